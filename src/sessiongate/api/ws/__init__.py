"""The WebSocket transport: `/v1/ws` and seed 001's two endpoints; frames, the per-key
broadcast across sockets and workers, resume. Translates the turn event stream; reaches
data only through services."""
