"""Durable stores (SQLite, Redis) and derived indexes (vectors)."""

from memorybus.storage.base import Store, WriteBatch

__all__ = ["Store", "WriteBatch"]
