"""One scenario run once against one binary, and the rows it gives."""
