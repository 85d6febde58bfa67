"""Where workers run: the workspace and its checkouts, version control, launchers, the sandbox, executors."""
