"""The bus: broadcast, subscriptions, conflict resolution (core logic; no Ray imports)."""
