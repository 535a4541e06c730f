"""OpenAI-compatible conversations: which stored conversation a client's message list
belongs to, how the list is reconciled with it, and what a turn records about it."""
