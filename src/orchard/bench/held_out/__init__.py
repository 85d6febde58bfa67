"""Held-out inputs: withheld from workers, made into variants, judged inside a verdict."""
