"""Landing a win: the judged patch committed, re-judged, merged; main pinned and published."""
