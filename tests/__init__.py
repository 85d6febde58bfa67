"""orchard's tests: helpers are imported from this package (`from tests.helpers import ...`)."""
