"""The Responses API's records (DESIGN.md §14): a response is a turn on a key; its row
(store/responses.py) finds it again by id, within its owner's namespace, and says where a
`previous_response_id` continues: the conversation node its answer ended at. The
continuation itself is reconciled by service/conversation/ like any OpenAI client's list.
"""

from __future__ import annotations

from typing import Any

from sessiongate.core.clock import Clock
from sessiongate.core.conversation import ROOT
from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.sessions import SessionService
from sessiongate.store.responses import ResponseRecord, ResponseStore

#: A kept response's body: its cancel was asked for (POST /v1/responses/{id}/cancel),
#: maybe in another process than the one running it.
CANCEL_REQUESTED = "sessiongate_cancel_requested"
#: The statuses of a response still running.
RUNNING = frozenset({"queued", "in_progress"})


class ResponseService:
    def __init__(
        self, store: ResponseStore, conversations: ConversationService, clock: Clock
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.clock = clock

    async def record(
        self,
        caller: Caller,
        key: str,
        body: dict[str, Any],
        input_items: list[dict[str, Any]],
    ) -> None:
        """Keep a finished response: its key's conversation head is where its answer
        ended (the key's turns are serialised; the head read right after the turn)."""
        head = await self.conversations.index.head(KeyRef(caller.name, key))
        await self.store.add(
            ResponseRecord(
                response_id=str(body["id"]),
                owner=caller.name,
                key=key,
                tip_hash=head.hash if head is not None else ROOT,
                tip_position=head.position if head is not None else 0,
                body=body,
                input_items=input_items,
                created_at=self.clock.now(),
            )
        )

    async def get(self, caller: Caller, response_id: str) -> ResponseRecord | None:
        return await self.store.get(caller.name, response_id)

    async def delete(self, caller: Caller, response_id: str) -> bool:
        return await self.store.delete(caller.name, response_id)

    async def request_cancel(self, caller: Caller, found: ResponseRecord) -> bool:
        """Mark a background response that is still running (in any process) to be
        cancelled: `CANCEL_REQUESTED` in its kept body, which the process running it
        polls. False when it ended meanwhile (its end is kept as it is)."""
        if found.body.get("status") not in RUNNING or found.body.get(CANCEL_REQUESTED):
            return False
        marked = {**found.body, CANCEL_REQUESTED: True}
        return await self.store.replace_body(caller.name, found.response_id, found.body, marked)

    async def erase(self, ref: KeyRef) -> None:
        await self.store.erase_key(ref.owner, ref.name)


def build_response_service(
    sessions: SessionService, conversations: ConversationService
) -> ResponseService:
    """The response rows beside the session store's (same connection or pool); erased
    with their key."""
    from sessiongate.store.sqlite.store import SQLiteStore

    store = sessions.store
    rows: ResponseStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.responses import SQLiteResponseStore

        rows = SQLiteResponseStore(store)
    else:
        from sessiongate.store.postgres.responses import PostgresResponseStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no response store for {type(store).__name__}")
        rows = PostgresResponseStore(store)
    service = ResponseService(rows, conversations, sessions.clock)
    sessions.on_erase(service.erase)
    return service
