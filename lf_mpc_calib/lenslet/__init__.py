"""Micro-lens (lenslet) grids, raw -> light-field decoding, micro-image indexing."""
