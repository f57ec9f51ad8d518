"""Provider webhooks (the top domain): signatures, provider formats, the token registry,
deposit-address mapping, unmatched events and their replay.

The names other packages use; import them from here or from their module."""

from payflow.ingress.formats import parse_payload
from payflow.ingress.payloads import EVM_ADDRESS, InvalidPayload, normalise_address
from payflow.ingress.rawjson import NotJson, decode_body
from payflow.ingress.registry import add_chain_cli, add_token_cli, list_tokens_cli
from payflow.ingress.replay import replay_unmatched
from payflow.ingress.service import Delivery, assign_address, land_event, list_unmatched
from payflow.ingress.signature import require_secret

__all__ = [
    "EVM_ADDRESS",
    "Delivery",
    "InvalidPayload",
    "NotJson",
    "add_chain_cli",
    "add_token_cli",
    "assign_address",
    "decode_body",
    "land_event",
    "list_tokens_cli",
    "list_unmatched",
    "normalise_address",
    "parse_payload",
    "replay_unmatched",
    "require_secret",
]
