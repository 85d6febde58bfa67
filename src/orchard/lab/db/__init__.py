"""lab.db: the lab's state (SQLite, WAL), its schema, and the one-run-per-workspace lock."""
