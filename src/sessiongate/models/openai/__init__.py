"""The `openai` provider: any OpenAI-compatible chat-completions server, streamed, with its
wire translation. Imports `models/base.py` and the shared stream reader."""
