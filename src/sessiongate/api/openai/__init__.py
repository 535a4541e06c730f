"""The OpenAI-compatible transport: `/v1/models` and `/v1/chat/completions`, and reading a
client's message list. Translates the turn event stream; reaches data only through
services."""
