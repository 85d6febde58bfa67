"""The judge: collecting a candidate, building it, measuring it (the only door to the bench), the rule ladder."""
