"""The research loop on top: the `Lab`, its backlog, planner, start, stop, resume and sweeps."""
