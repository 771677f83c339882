"""Pub/sub: the hub that fans committed events out to subscriptions, and their durable records (no Ray imports)."""
