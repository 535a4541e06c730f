"""Config of the OpenAI-compatible route (`[openai]`, DESIGN.md §11): how a request's
conversation is found, the notice a rotation shows, and which one-shot requests are
answered without keeping anything."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sessiongate.config.base import Section

#: Open WebUI's task prompts (title, tags, follow-ups, search queries) all begin so, and
#: the system prompt of its tool choice (function calling in its default mode).
OPEN_WEBUI_TASK_PREFIXES = ("### Task:", "Available Tools:")


class OpenAIConfig(Section):
    #: Without `X-Session-Key` or a client's conversation id: `match` finds the stored
    #: conversation the message list continues (else a new one); `route` uses the
    #: caller's route key, as `POST /v1/chat` does (every such client shares it).
    conversations: Literal["match", "route"] = "match"
    #: The first content of a reply whose turn rotated (`{reason}`: idle, day boundary,
    #: semantic, manual, revert); "" for none. The `sessiongate_rotation` field is sent
    #: regardless.
    rotation_notice: str = Field("(new conversation segment: {reason})\n\n", max_length=500)
    #: Keys the gateway makes for OpenAI clients (from a client's conversation id, or for
    #: a conversation found by its messages) follow the client's boundaries: no idle or
    #: day-boundary rotation unless this is true.
    client_keys_rotate: bool = False
    #: A request with one user message, where it or a system message begins with one of
    #: these, is a one-shot task (Open WebUI's title and tag generation, its tool choice):
    #: answered from the request alone, nothing kept.
    stateless_prefixes: list[str] = Field(
        default_factory=lambda: list(OPEN_WEBUI_TASK_PREFIXES), max_length=32
    )
