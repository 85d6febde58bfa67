"""The lab's typed records: no I/O, and nothing of the lab imported but other records (the bottom floor)."""
