"""The ResponseStore protocol (DESIGN.md §14): a stored response's row, found by its id
within its owner's namespace, and a conversation object's (`conv_…`: a key and its
metadata) (SQLite: store/sqlite/responses.py; PostgreSQL:
store/postgres/responses.py). The turn's messages are in the session store; this row
adds what the Responses API shows and where a `previous_response_id` continues."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import orjson

COLUMNS = "response_id, owner, key, tip_hash, tip_position, body, input_items, created_at"
CONVERSATION_COLUMNS = "conversation_id, owner, key, metadata, created_at"


@dataclass(frozen=True, slots=True)
class ResponseRecord:
    response_id: str
    owner: str
    #: The session key the response's turn ran on.
    key: str
    #: The conversation node the answer ended at, and its position (the client's list
    #: length): a later request continues from it, or forks there.
    tip_hash: str
    tip_position: int
    #: The response object as the API shows it.
    body: dict[str, Any]
    #: The request's input items, as `input_items` lists them.
    input_items: list[dict[str, Any]]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ConversationObject:
    conversation_id: str
    owner: str
    #: The session key holding the conversation's items.
    key: str
    metadata: dict[str, str]
    created_at: datetime


def response_from_row(row: Any, to_time: Callable[[Any], datetime]) -> ResponseRecord:
    """A row of `COLUMNS`; `to_time` reads the store's stored time."""
    return ResponseRecord(
        response_id=row[0],
        owner=row[1],
        key=row[2],
        tip_hash=row[3],
        tip_position=int(row[4]),
        body=orjson.loads(row[5]),
        input_items=orjson.loads(row[6]),
        created_at=to_time(row[7]),
    )


class ResponseStore(Protocol):
    @property
    def process_token(self) -> int:
        """This process's token: a background response it runs names it in its kept body,
        so that another process can tell when the one running it is gone."""
        ...

    async def claimer_gone(self, token: int) -> bool:
        """Whether no live process holds `token` (PostgreSQL: its liveness lock,
        store/postgres/liveness.py; SQLite, which one process serves: any token but this
        process's is of a process that stopped)."""
        ...

    async def add(self, record: ResponseRecord) -> None:
        """Keep the row; a row with the same id (a background response finishing, a
        request that joined the turn) gets this one's tip and body."""
        ...

    async def get(self, owner: str, response_id: str) -> ResponseRecord | None:
        """The owner's response: another user's id is not found."""
        ...

    async def delete(self, owner: str, response_id: str) -> bool: ...

    async def replace_body(
        self, owner: str, response_id: str, expected: dict[str, Any], body: dict[str, Any]
    ) -> bool:
        """Put `body` in place of `expected` only if the row still holds exactly that
        (compare and set: a background response's cancel request, which must not
        overwrite the response's end written meanwhile by the process running it)."""
        ...

    async def erase_key(self, owner: str, key: str) -> None:
        """The key was erased: its responses and conversation object go too."""
        ...

    async def add_conversation(self, conversation: ConversationObject) -> None: ...

    async def get_conversation(
        self, owner: str, conversation_id: str
    ) -> ConversationObject | None: ...

    async def set_conversation_metadata(
        self, owner: str, conversation_id: str, metadata: dict[str, str]
    ) -> bool: ...

    async def delete_conversation(self, owner: str, conversation_id: str) -> bool: ...
