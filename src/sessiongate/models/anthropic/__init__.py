"""The `anthropic` provider: Anthropic's Messages API, streamed, with its wire translation.
Imports `models/base.py` and the shared stream reader."""
