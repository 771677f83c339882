"""Who may do what: signed credentials, the key ring that signs them, and the check
every actor makes (see :mod:`memorybus.auth.gate`). Pure Python: no Ray."""

from memorybus.auth.credential import OPERATOR_ORG, Grant, peek, verify
from memorybus.auth.gate import Gatekeeper, gatekeeper_for
from memorybus.auth.keyring import Key, KeyRing, open_keys

__all__ = ["OPERATOR_ORG", "Gatekeeper", "Grant", "Key", "KeyRing", "gatekeeper_for", "open_keys", "peek", "verify"]
