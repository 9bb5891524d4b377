"""ipu ops of the indexing family (being written)."""
