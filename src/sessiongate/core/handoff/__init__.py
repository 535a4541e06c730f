"""Seed 000's hybrid hand-off, the pure part: which promises a tool-less reply makes (stage
1: patterns by structure, guards, the learned backstop and its weights), what the
control model is asked in stage 2 and how its answer is read. Pure: imports only other
`core` modules (and numpy for the backstop)."""
