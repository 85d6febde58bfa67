"""The verdict and its statistics: its records, the decision rule, the noise floor (A/A calibration)."""
