"""Launchers: the launch line of each agent CLI, of `patch` and of `command`, and their pre-flight."""
