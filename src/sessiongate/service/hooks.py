"""Webhooks (DESIGN.md §9, docs/hooks.md): events queued in the store, sent by a
background worker (service/hook_sender.py), signed, retried with backoff, never on a
turn's path.

- Queueing. `turn.completed` comes from the after-turn listener (service/turn/after.py)
  and `tasks.extracted` from task extraction, both already in the background;
  `session.rotated` from the session service's rotation listener, which fires inside the
  rotating operation, so it only schedules the insert and returns. Queueing is one
  transaction: a row per subscribed hook, then each hook's oldest undelivered rows beyond
  its `queue_size` are dropped (counted and logged), so the queue never grows unbounded.
- Sending. `start()` runs the sender (the app's lifespan starts it; CLI commands that
  open the engine do not send); `stop()` gives back the attempts it cut short.
- Privacy. Bodies carry ids, names and statuses; message text (and task titles) only for
  a hook with `include_text = true`. Erasing a key erases its queued and kept deliveries.
  The log names hooks and delivery ids, never bodies or URLs' secrets.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx

from sessiongate.config import Settings
from sessiongate.config.hooks import HookConfig, public_url
from sessiongate.core.clock import Clock, SystemClock
from sessiongate.core.hooks import delivery_body, iso
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationRecord
from sessiongate.core.working_set import CompactionRecord
from sessiongate.errors import ConfigError
from sessiongate.service.hook_sender import POLL_SECONDS, HookSender
from sessiongate.service.turn.handle import FinishedTurn
from sessiongate.store.base import Store
from sessiongate.store.hooks import HookDelivery, HookStore

if TYPE_CHECKING:
    from sessiongate.service.sessions import SessionService
    from sessiongate.service.turn.pipeline import TurnService

log = logging.getLogger(__name__)

#: Turn statuses that count as a completed turn (a reply was kept whole, or cut at
#: limits.max_reply_chars).
COMPLETED = frozenset({"complete", "truncated"})


class HookService:
    def __init__(
        self,
        hooks: Sequence[HookConfig],
        secrets: Mapping[str, bytes],
        store: HookStore,
        *,
        clock: Clock | None = None,
        poll_seconds: float = POLL_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.hooks = {hook.hook_name: hook for hook in hooks}
        self._secrets = dict(secrets)
        self.store = store
        # Deliveries are about real time (retries, timeouts), whatever clock turns use.
        self.clock = clock or SystemClock()
        self.ids = IdGenerator(self.clock)
        #: Per process, since start: queued, delivered, retried, failed, dropped.
        self.stats: Counter[str] = Counter()
        self.sender = HookSender(
            self.hooks,
            self._secrets,
            store,
            self.clock,
            self.stats,
            poll_seconds=poll_seconds,
            transport=transport,
        )
        self._queueing: set[asyncio.Task[None]] = set()
        #: The session store, to find a compacted segment's key (set by `attach`).
        self._segments: Store | None = None

    # -- wiring ---------------------------------------------------------------------------

    def attach(self, sessions: SessionService, turns: TurnService) -> None:
        """Listen to rotations, erasures and finished turns."""
        sessions.on_rotation(self.rotated)
        sessions.on_erase(self.erase_key)
        turns.after_turn(self.turn_finished)
        self._segments = sessions.store
        turns.compactor.on_compaction(self.compacted)

    def subscribed(self, event: str) -> bool:
        return any(event in hook.events for hook in self.hooks.values())

    async def turn_finished(self, finished: FinishedTurn) -> None:
        """`turn.completed` for a turn whose reply was kept (complete or truncated)."""
        if finished.status not in COMPLETED or not self.subscribed("turn.completed"):
            return
        data = {
            "owner": finished.owner,
            "key": finished.key,
            "agent": finished.agent,
            "turn_id": finished.turn_id,
            "session_id": finished.session_id,
            "status": finished.status,
            "primary": finished.primary,
            "mode": finished.mode,
        }
        text = {"user_text": finished.user_text, "reply_text": finished.reply_text}
        await self.emit("turn.completed", data, text=text, owner=finished.owner, key=finished.key)

    def rotated(self, record: RotationRecord) -> None:
        """`session.rotated`: called inside the rotating operation, so the insert is only
        scheduled here."""
        if not self.subscribed("session.rotated"):
            return
        data = {
            "owner": record.key.owner,
            "key": record.key.name,
            "from": record.from_session_id,
            "to": record.to_session_id,
            "reason": record.reason.value,
            "at": iso(record.at),
            "confidence": record.confidence,
            "deciding_model": record.deciding_model,
            "in_place": record.in_place,
        }
        owner, key = record.key.owner, record.key.name
        coro = self._emit_logged("session.rotated", data, owner=owner, key=key)
        task = asyncio.get_running_loop().create_task(coro)
        self._queueing.add(task)
        task.add_done_callback(self._queueing.discard)

    def compacted(self, session_id: str, record: CompactionRecord | None, status: str) -> None:
        """`session.compacted`: a compaction stored or reverted (failures are the
        metric's and the next turn's `compaction` event's). Scheduled: the segment's key
        is read first."""
        if record is None or not self.subscribed("session.compacted"):
            return
        coro = self._compacted(session_id, record, status)
        task = asyncio.get_running_loop().create_task(coro)
        self._queueing.add(task)
        task.add_done_callback(self._queueing.discard)

    async def _compacted(self, session_id: str, record: CompactionRecord, status: str) -> None:
        try:
            segment = (
                None if self._segments is None else await self._segments.get_segment(session_id)
            )
            if segment is None:  # erased meanwhile: nobody to tell
                return
            data = {
                "owner": segment.key.owner,
                "key": segment.key.name,
                "session_id": session_id,
                "compaction_id": record.compaction_id,
                "covers": {
                    "first_seq": record.first_seq,
                    "last_seq": record.last_seq,
                    "count": record.count,
                },
                "tokens_before": record.tokens_before,
                "tokens_after": record.tokens_after,
                "model": record.model,
                "status": status,
                "created_at": iso(record.created_at),
                "previous_compaction_id": record.previous_compaction_id,
            }
            text = {"summary": record.summary, "instructions": record.instructions}
            owner, key = segment.key.owner, segment.key.name
            await self.emit("session.compacted", data, text=text, owner=owner, key=key)
        except Exception:
            log.exception("could not queue a session.compacted hook event")

    async def erase_key(self, ref: KeyRef) -> None:
        await self._settle_queueing()
        await self.store.delete_for_key(ref.owner, ref.name)

    # -- queueing -------------------------------------------------------------------------

    async def emit(
        self,
        event: str,
        data: Mapping[str, Any],
        *,
        text: Mapping[str, Any] | None = None,
        owner: str | None = None,
        key: str | None = None,
    ) -> int:
        """Queue `event` for every hook subscribed to it (`text` is merged into the data
        only for hooks with `include_text`); how many deliveries were queued."""
        targets = [hook for hook in self.hooks.values() if event in hook.events]
        if not targets:
            return 0
        now = self.clock.now()
        rows = []
        for hook in targets:
            delivery_id = self.ids.new()
            payload = {**data, **(text or {})} if hook.include_text else dict(data)
            rows.append(
                HookDelivery(
                    delivery_id=delivery_id,
                    hook=hook.hook_name,
                    event=event,
                    body=delivery_body(delivery_id, event, now, payload),
                    status="pending",
                    attempts=0,
                    next_attempt_at=now,
                    last_error=None,
                    delivered_at=None,
                    failed_at=None,
                    created_at=now,
                    owner=owner,
                    session_key=key,
                )
            )
        dropped = await self.store.enqueue(rows, {h.hook_name: h.queue_size for h in targets})
        self.stats["queued"] += len(rows)
        for hook_name, count in dropped.items():
            self.stats["dropped"] += count
            log.warning(
                "hook %s: queue full; dropped the %d oldest undelivered deliveries",
                hook_name,
                count,
            )
        self.sender.wake()
        return len(rows)

    async def _emit_logged(
        self, event: str, data: Mapping[str, Any], *, owner: str, key: str
    ) -> None:
        try:
            await self.emit(event, data, owner=owner, key=key)
        except Exception:
            log.exception("could not queue a %s hook event", event)

    async def _settle_queueing(self) -> None:
        if self._queueing:
            await asyncio.gather(*self._queueing, return_exceptions=True)

    # -- sending --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start sending (idempotent). The store must be started."""
        await self.sender.start()

    async def stop(self) -> None:
        """Stop sending (attempts cut short go back to the queue) and finish queueing what
        was scheduled. Idempotent."""
        await self.sender.stop()
        await self._settle_queueing()

    @property
    def running(self) -> bool:
        return self.sender.running

    # -- inspection -----------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        """The configured hooks, without secrets or URL credentials."""
        return [
            {"name": name, "url": public_url(hook.url), "events": list(hook.events)}
            for name, hook in self.hooks.items()
        ]


def delivery_json(delivery: HookDelivery) -> dict[str, Any]:
    """A delivery as `GET /v1/hooks/deliveries` answers it (the body left out)."""

    def at(value: datetime | None) -> str | None:
        return None if value is None else iso(value)

    return {
        "id": delivery.delivery_id,
        "hook": delivery.hook,
        "event": delivery.event,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "next_attempt_at": at(delivery.next_attempt_at) if delivery.status == "pending" else None,
        "last_error": delivery.last_error,
        "delivered_at": at(delivery.delivered_at),
        "failed_at": at(delivery.failed_at),
        "created_at": iso(delivery.created_at),
    }


def hook_secrets(hooks: Sequence[HookConfig]) -> dict[str, bytes]:
    """Each hook's secret, from the file or read once from the environment now."""
    secrets: dict[str, bytes] = {}
    for index, hook in enumerate(hooks):
        if hook.secret is not None:
            secrets[hook.hook_name] = hook.secret.encode()
            continue
        assert hook.secret_env is not None
        value = os.environ.get(hook.secret_env, "").strip()
        if len(value) < 16:
            raise ConfigError(
                f"hooks.{index}.secret_env: the environment variable {hook.secret_env} is"
                " not set or shorter than 16 characters"
            )
        secrets[hook.hook_name] = value.encode()
    return secrets


def build_hook_store(store: Store) -> HookStore:
    """The delivery rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.hooks import SQLiteHookStore

        return SQLiteHookStore(store)
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres.hooks import PostgresHookStore
    from sessiongate.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no hook store for {type(store).__name__}")
    return PostgresHookStore(store)


def build_hook_service(settings: Settings, store: Store) -> HookService | None:
    """The hook service, or None when no `[[hooks]]` are configured."""
    if not settings.hooks:
        return None
    return HookService(settings.hooks, hook_secrets(settings.hooks), build_hook_store(store))
