"""A worker's job and its process tree, below every executor."""
