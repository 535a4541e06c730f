"""Stores: the persistence port and its adapters."""
