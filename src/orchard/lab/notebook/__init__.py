"""The lab notebook: the journal, leaderboard, report, charts, pages, the dashboard and `orchard status`."""
