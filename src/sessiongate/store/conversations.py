"""The conversation index port: the tree of what OpenAI-compatible clients saw of each
conversation (core/conversation.py), so the list a client re-sends is found with indexed
look-ups whose cost does not grow with the number of stored conversations.

The index is derived data beside the append-only history: a node names the messages it
stands for (`session_id:seq`), never their text; a key's *head* is the node its next
message follows. Erasing a key erases its nodes and head.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sessiongate.core.keys import KeyRef
from sessiongate.store.base import Row

#: The columns both stores write and select, in the order `node_from_row` reads.
NODE_COLUMNS = "key, hash, parent, position, role, session_id, message_ids"


@dataclass(frozen=True, slots=True)
class ConversationNode:
    key: KeyRef
    #: The rolling hash of the branch up to and including this message.
    hash: str
    parent: str
    #: 1 for a branch's first message.
    position: int
    role: str
    #: The segment its messages were written to; None for a message nothing was stored
    #: for (a bare `/new` and its notice).
    session_id: str | None
    #: The stored messages it stands for: one, or every message of an answer (its model
    #: steps and tool results).
    message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConversationHead:
    key: KeyRef
    hash: str
    position: int


def node_from_row(row: Row) -> ConversationNode:
    return ConversationNode(
        key=KeyRef.from_storage_id(row[0]),
        hash=row[1],
        parent=row[2],
        position=int(row[3]),
        role=row[4],
        session_id=row[5],
        message_ids=tuple(json.loads(row[6])),
    )


def node_values(node: ConversationNode) -> tuple[str, str, str, str, int, str, str | None, str]:
    """(key, owner, hash, parent, position, role, session_id, message_ids) for an insert."""
    return (
        node.key.storage_id,
        node.key.owner,
        node.hash,
        node.parent,
        node.position,
        node.role,
        node.session_id,
        json.dumps(list(node.message_ids)),
    )


class ConversationIndex(Protocol):
    async def head(self, key: KeyRef) -> ConversationHead | None: ...

    async def heads_at(self, owner: str, hashes: Sequence[str]) -> list[ConversationHead]:
        """The owner's keys whose head is one of `hashes`, deepest first, then the most
        recently moved."""
        ...

    async def deepest(self, owner: str, hashes: Sequence[str]) -> ConversationNode | None:
        """The owner's deepest node whose hash is one of `hashes` (the newest among
        equals)."""
        ...

    async def find(
        self, owner: str, hashes: Sequence[str]
    ) -> tuple[ConversationHead | None, ConversationNode | None]:
        """What finding a conversation needs, in one round trip: the first of
        `heads_at(owner, hashes)` and `deepest(owner, hashes)`."""
        ...

    async def nodes(self, key: KeyRef, hashes: Sequence[str]) -> list[ConversationNode]:
        """The key's nodes whose hash is one of `hashes`."""
        ...

    async def record(self, nodes: Sequence[ConversationNode], head: ConversationHead) -> None:
        """Add `nodes` (a node already there is kept) and move the key's head, at once."""
        ...

    async def erase(self, key: KeyRef) -> None:
        """Forget the key's nodes and head."""
        ...
