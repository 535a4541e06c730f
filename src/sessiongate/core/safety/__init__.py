"""Seed 004's safety gate, the pure part: the three labels and their markers, the control
model's protocol, and the deterministic keyword rules that decide when no model does.
Pure: imports only other `core` modules."""
