"""Stored results: where rows go, what they say, shown, compared and ranked."""
