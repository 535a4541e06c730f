"""What the bench scripts share and never run on their own: stub models, the stacks under
test and how to start them, load generators, clients, figures and tables.

The runnable benchmarks stay one level up, in bench/ (`.venv/bin/python bench/<name>.py`);
Python puts a script's own directory on `sys.path`, so they import these as
`support.<module>`, and mypy finds them the same way (`bench` is on its `mypy_path`).
Subprocesses a benchmark starts for its own servers re-run the benchmark's script with a
hidden `--role` (gateway_load.py, agent_turns.py), never a module in here.
"""
