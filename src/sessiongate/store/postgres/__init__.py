"""The PostgreSQL adapter of every store port: pools, advisory locks, LISTEN/NOTIFY fan-
out, the same answers as SQLite. Imports `core` and the ports in `store/`."""
