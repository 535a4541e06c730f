"""The SQLite adapter of every store port: one file, WAL, triggers that guard the
invariants; backups and checkpoints. Imports `core` and the ports in `store/`."""
