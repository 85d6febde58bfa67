"""What must hold beside the statistics: gates, state between runs, the surroundings, identical programs."""
