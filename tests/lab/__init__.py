"""The lab's tests."""
