"""The operator's side without Ray: a data directory read straight from its files
(offline), and what the bus exports for monitoring."""
