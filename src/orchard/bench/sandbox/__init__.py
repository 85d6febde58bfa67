"""A measured run's sandbox: its confinement, what it sees, its environment, the timer inside it."""
