"""Durable stores (SQLite, Redis) and derived indexes (vectors)."""

from memorybus.storage.base import SlotWrite, Store, WriteBatch

__all__ = ["SlotWrite", "Store", "WriteBatch"]
