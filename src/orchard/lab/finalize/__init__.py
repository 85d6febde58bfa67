"""`orchard finalize`: a lab's landed wins as review branches on its starting main, each judged alone."""
