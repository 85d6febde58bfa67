"""orchard: an optimization research lab for a codebase.

`orchard.bench` measures (and stands alone as a benchmark harness);
`orchard.lab` runs the research loop on top of it.
"""

__version__ = "0.1.0"
