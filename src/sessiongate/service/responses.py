"""The Responses API's records (DESIGN.md §14): a response is a turn on a key; its row
(store/responses.py) finds it again by id, within its owner's namespace, and says where a
`previous_response_id` continues: the conversation node its answer ended at. The
continuation itself is reconciled by service/conversation/ like any OpenAI client's list.

A background response names the process running it in its kept body (`CLAIMED_BY`, the
store's process token: PostgreSQL's liveness lock). Whoever reads it `in_progress` while
that process is gone (SIGKILL, a crash, a lost host) ends it there and then, keeping what
its turn stored (core/responses.py `abandoned_response`): GET, cancel and stream resume
never wait on a response that can no longer end.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import Any

from sessiongate.core.clock import Clock
from sessiongate.core.conversation import ROOT
from sessiongate.core.keys import KeyRef
from sessiongate.core.responses import abandoned_response
from sessiongate.core.users import Caller
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.recovery import build_turn_records, reply_of, reply_status
from sessiongate.store.responses import ResponseRecord, ResponseStore
from sessiongate.store.turns import StoredTurn, TurnRecords

log = logging.getLogger("sessiongate.service")

#: A kept response's body: its cancel was asked for (POST /v1/responses/{id}/cancel),
#: maybe in another process than the one running it.
CANCEL_REQUESTED = "sessiongate_cancel_requested"
#: A running background response's kept body: the token of the process running it.
CLAIMED_BY = "sessiongate_claimed_by"
#: The statuses of a response still running.
RUNNING = frozenset({"queued", "in_progress"})
#: What a kept body holds for the gateway only, never shown.
_PRIVATE = (CANCEL_REQUESTED, CLAIMED_BY)


def shown(body: dict[str, Any]) -> dict[str, Any]:
    """A kept response as the API shows it (the gateway's own marks left out)."""
    if not any(name in body for name in _PRIVATE):
        return body
    return {k: v for k, v in body.items() if k not in _PRIVATE}


class ResponseService:
    def __init__(
        self,
        store: ResponseStore,
        conversations: ConversationService,
        clock: Clock,
        turns: TurnRecords | None = None,
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.clock = clock
        #: Where an abandoned background response's stored reply is read.
        self.turns = turns

    async def record(
        self,
        caller: Caller,
        key: str,
        body: dict[str, Any],
        input_items: list[dict[str, Any]],
        *,
        running_here: bool = False,
    ) -> None:
        """Keep a response: its key's conversation head is where its answer ended (the
        key's turns are serialised; the head read right after the turn).
        `running_here`: a background response this process runs on (its body names the
        process, until its end is kept)."""
        if running_here:
            body = {**body, CLAIMED_BY: self.store.process_token}
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
        """The caller's response; one left running by a process that is gone is ended
        first (kept so: every gateway then reads the same end)."""
        found = await self.store.get(caller.name, response_id)
        if found is None or found.body.get("status") not in RUNNING:
            return found
        token = found.body.get(CLAIMED_BY)
        if not isinstance(token, int) or token == self.store.process_token:
            return found
        if not await self.store.claimer_gone(token):
            return found
        return await self._end_abandoned(caller, found)

    async def _end_abandoned(self, caller: Caller, found: ResponseRecord) -> ResponseRecord:
        text, end_status, usage = "", None, None
        stored = await self._stored_turn(caller, found.response_id)
        if stored is not None:
            reply = reply_of(stored)
            if reply is not None:
                text, usage = reply.content, reply.metadata.get("usage")
                if not reply.metadata.get("tool_calls"):
                    end_status = reply_status(reply)
        ended = abandoned_response(
            {k: v for k, v in found.body.items() if k not in _PRIVATE},
            text,
            end_status=end_status,
            usage=usage if isinstance(usage, dict) else None,
            cancelled=bool(found.body.get(CANCEL_REQUESTED)),
        )
        log.warning(
            "background_response_abandoned",
            extra={"response_id": found.response_id, "status": ended["status"]},
        )
        if await self.store.replace_body(caller.name, found.response_id, found.body, ended):
            return replace(found, body=ended)
        # Ended meanwhile (another reader, or the process was alive after all).
        return await self.store.get(caller.name, found.response_id) or found

    async def _stored_turn(self, caller: Caller, response_id: str) -> StoredTurn | None:
        """The response's turn as the store holds it (None: unknown, nothing stored)."""
        if self.turns is None:
            return None
        try:
            turn_id = str(uuid.UUID(hex=response_id.removeprefix("resp_")))
        except ValueError:
            return None
        return await self.turns.find_turn(caller.name, turn_id)

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
    service = ResponseService(rows, conversations, sessions.clock, build_turn_records(store))
    sessions.on_erase(service.erase)
    return service
