"""Durable stores (SQLite, Redis) and derived indexes (vectors)."""

from memorybus.storage.base import AlreadyApplied, OpRecord, Scrub, SlotWrite, Store, WriteBatch

__all__ = ["AlreadyApplied", "OpRecord", "Scrub", "SlotWrite", "Store", "WriteBatch"]
