"""The imperative shell around the core: sessions and turns."""
