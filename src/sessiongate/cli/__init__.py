"""The `sessiongate` command line."""
