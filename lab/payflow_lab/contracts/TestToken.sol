// SPDX-License-Identifier: MIT
// A minimal ERC-20 for payflow's anvil tests: configurable decimals, open minting,
// and a pause switch so a test can make `transfer` revert on demand.
pragma solidity 0.8.28;

contract TestToken {
    string public name;
    string public symbol;
    uint8 public immutable decimals;
    uint256 public totalSupply;
    bool public paused;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function mint(address to, uint256 value) external {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function setPaused(bool value) external {
        paused = value;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "allowance");
        allowance[from][msg.sender] = allowed - value;
        _move(from, to, value);
        return true;
    }

    /// Several transfers in one transaction: the test of positions inside a transaction.
    function batchTransfer(address[] calldata to, uint256[] calldata value) external {
        require(to.length == value.length, "length");
        for (uint256 i = 0; i < to.length; i++) {
            _move(msg.sender, to[i], value[i]);
        }
    }

    function _move(address from, address to, uint256 value) private {
        require(!paused, "paused");
        require(balanceOf[from] >= value, "balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
