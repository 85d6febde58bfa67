"""The workspace: its layout and checkouts, paths, prompts, reports, patches, builds."""
