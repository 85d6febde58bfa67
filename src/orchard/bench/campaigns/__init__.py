"""Campaigns: a verdict's or a calibration's pairs, shared-baseline rounds, a suite run for subjects."""
