"""Durable stores (SQLite, Redis) and derived indexes (vectors)."""

from memorybus.storage.base import AlreadyApplied, OpRecord, SlotWrite, Store, WriteBatch

__all__ = ["AlreadyApplied", "OpRecord", "SlotWrite", "Store", "WriteBatch"]
