"""The two runners of an agent's turn: `chat` (the native function-calling loop) and
`plan_execute` (seed 002's planner, worker and explainer)."""
