"""Tests of orchard.bench: measurement, usable alone."""
