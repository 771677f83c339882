"""The sentence-transformers model: what a model is, read from its files (modelinfo), and
the embedder that loads it once, batches and caches (embedding)."""
