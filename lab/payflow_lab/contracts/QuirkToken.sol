// SPDX-License-Identifier: MIT
// An ERC-20 with the two quirks real tokens have, for payflow's anvil tests:
// - `transfer` to a blocked recipient returns false WITHOUT reverting and moves nothing
//   (the standard allows it; some tokens do it for blacklisted addresses): the receipt has
//   status 1 and no Transfer log;
// - with `silent` set, `transfer` returns no data at all (the USDT style) and still moves
//   the value and logs Transfer.
pragma solidity 0.8.28;

contract QuirkToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    bool public immutable silent;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => bool) public blocked;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_, bool silent_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
        silent = silent_;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function setBlocked(address who, bool value) external {
        blocked[who] = value;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        if (blocked[to] || balanceOf[msg.sender] < value) {
            return false;
        }
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        if (silent) {
            assembly {
                return(0, 0)
            }
        }
        return true;
    }
}
