"""One worker's run on whichever host runs it: made ready, and its checkouts read back."""
