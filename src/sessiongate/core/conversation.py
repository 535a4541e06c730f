"""An OpenAI-compatible client's conversation as the gateway sees it. Pure.

Most clients send the whole conversation with every request. The gateway keeps each
conversation it stored as a tree of *nodes*, one per message as the client sees it: a
user message, an answer (everything the client received for one turn: a rotation notice,
the text of every model step, a hand-off's addition), the client's own tool calls and the
results it sent back. A node's hash is a rolling hash over every message from the start
of its branch to it, so one hash names one whole prefix of a conversation: finding the
list a client sent is one indexed look-up per candidate prefix, whatever the number of
stored conversations. A regenerated answer is a sibling of the one it replaces; an edited
message starts a new branch beside the old one.

Texts are compared as the client shows them: parts joined by a newline, line ends made
`\\n`, surrounding blanks ignored; tool-call arguments as canonical JSON (clients such as
LangChain re-encode them). System messages are not part of the path: they are the
client's instructions, sent to the model after the agent's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

#: The hash of the empty prefix: where every branch starts.
ROOT = ""

#: The longest answer (model steps and tool results) a regenerate looks back across.
MAX_ANSWER_NODES = 16


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Identity(StrEnum):
    """How the request's conversation was found (in this order, DESIGN.md §11)."""

    #: `X-Session-Key`: the client names the key; a one-message list is always new.
    KEY = "key"
    #: The client's own conversation id (`X-OpenWebUI-Chat-Id`, `metadata.conversation_id`).
    CLIENT_ID = "client_id"
    #: The stored conversation the list continues (no key, no id).
    MATCHED = "matched"
    #: A list that continues no stored conversation: a new one.
    NEW = "new"


@dataclass(frozen=True, slots=True)
class ClientCall:
    """A tool call as the client shows it: its id, the function and its arguments."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """One message of the client's list, system messages aside."""

    role: Role
    #: The text: a string as it came, text parts joined by a newline.
    content: str
    #: Digests of the images a user message carries (data or http URLs), in order.
    images: tuple[str, ...] = ()
    #: An assistant message's tool calls.
    calls: tuple[ClientCall, ...] = ()
    #: A tool result: the call it answers and (found in the calls before it) its name.
    call_id: str | None = None
    name: str | None = None

    def fingerprint(self) -> bytes:
        """What identifies the message as the client shows it: tagged, length-prefixed
        fields, so no text can pass for another field."""
        text = normalise_text(self.content)
        fields = [f"r{self.role.value}", f"x{len(text)}:{text}"]
        if self.images:
            fields.append("i" + ",".join(self.images))
        for call in self.calls:
            arguments = canonical_arguments(call.arguments)
            fields.append(
                f"c{len(call.call_id)}:{call.call_id}{len(call.name)}:{call.name}"
                f"{len(arguments)}:{arguments}"
            )
        if self.call_id is not None:
            fields.append(f"t{len(self.call_id)}:{self.call_id}")
        return "\x00".join(fields).encode()


def normalise_text(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def canonical_arguments(raw: str) -> str:
    """Tool-call arguments as canonical JSON (sorted keys, no blanks); text that is not
    JSON as it is, trimmed."""
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return raw.strip()
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def image_digest(url: str) -> str:
    return hashlib.blake2b(url.encode(), digest_size=8).hexdigest()


def chain(parent: str, message: ClientMessage) -> str:
    """The hash of the prefix ending with `message`, given the hash of the one before."""
    digest = hashlib.blake2b(parent.encode() + b"\x00" + message.fingerprint(), digest_size=16)
    return digest.hexdigest()


def prefix_hashes(messages: Sequence[ClientMessage], start: str = ROOT) -> tuple[str, ...]:
    """`hashes[i]` names the first `i` messages (`hashes[0]` is `start`)."""
    hashes = [start]
    for message in messages:
        hashes.append(chain(hashes[-1], message))
    return tuple(hashes)


def last_index(messages: Sequence[ClientMessage], role: Role) -> int | None:
    """The index of the last message with `role`, or None."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role is role:
            return index
    return None


def trailing_input(messages: Sequence[ClientMessage]) -> int:
    """Where the request's new input starts: the last user message, or the tool results
    after the last assistant message."""
    if messages[-1].role is Role.USER:
        return len(messages) - 1
    start = len(messages)
    while start > 0 and messages[start - 1].role is Role.TOOL:
        start -= 1
    return start


def match_candidates(hashes: Sequence[str], messages: Sequence[ClientMessage]) -> tuple[str, ...]:
    """The prefixes a stored conversation must end at (its newest message) for the list
    to continue it, deepest first: from the whole list back to its last assistant
    message. Empty when the list holds no assistant message: such a list (a chat's first
    request) never continues anything, so two chats opening with the same words stay two
    conversations — the answer the first one got is what tells them apart."""
    anchor = last_index(messages, Role.ASSISTANT)
    if anchor is None:
        return ()
    return tuple(reversed(hashes[anchor + 1 :]))


def render_notice(template: str, reason: str) -> str:
    """The rotation notice an OpenAI client sees first in the reply ("" when off). A
    fork is the client's own doing and gets none."""
    if not template or reason == "fork":
        return ""
    return template.replace("{reason}", reason.replace("_", " "))
