"""Workers on a dask cluster: the connection, the git daemon serving the lab, the task, the executor."""
