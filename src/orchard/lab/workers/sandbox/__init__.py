"""The sandbox around every untrusted command a worker or judge step runs, and its network egress."""
