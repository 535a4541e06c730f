"""Webhooks (DESIGN.md §9, docs/hooks.md): events queued in the store, sent by a
background worker, signed, retried with backoff, never on a turn's path.

- Queueing. `turn.completed` comes from the after-turn listener (service/after_turn.py)
  and `tasks.extracted` from task extraction, both already in the background;
  `session.rotated` from the session service's rotation listener, which fires inside the
  rotating operation, so it only schedules the insert and returns. Queueing is one
  transaction: a row per subscribed hook, then each hook's oldest undelivered rows beyond
  its `queue_size` are dropped (counted and logged), so the queue never grows unbounded.
- Sending. `start()` runs the worker (the app's lifespan starts it; CLI commands that
  open the engine do not send). It claims due rows (store/hooks_base.py: one statement,
  `FOR UPDATE SKIP LOCKED` on PostgreSQL, so several processes never send one row twice
  at once), POSTs each with httpx under the hook's `timeout`, and marks it delivered (any
  2xx), due again after a backoff with jitter (anything else), or failed after
  `max_attempts`. A restart resumes the pending rows; `stop()` gives back the attempts it
  cut short. Delivery is at least once: a receiver dedupes on `X-Sessiongate-Delivery`.
- Privacy. Bodies carry ids, names and statuses; message text (and task titles) only for
  a hook with `include_text = true`. Erasing a key erases its queued and kept deliveries.
  The log names hooks and delivery ids, never bodies or URLs' secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx

from sessiongate import __version__
from sessiongate.config import Settings
from sessiongate.config_hooks import HookConfig, public_url
from sessiongate.core.clock import Clock, SystemClock
from sessiongate.core.hooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    delivery_body,
    iso,
    retry_delay,
    short_error,
    signature,
)
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationRecord
from sessiongate.errors import ConfigError
from sessiongate.models.retry import parse_retry_after
from sessiongate.service.turn_handle import FinishedTurn
from sessiongate.store.base import Store
from sessiongate.store.hooks_base import HookDelivery, HookStore

if TYPE_CHECKING:
    from sessiongate.service.sessions import SessionService
    from sessiongate.service.turns import TurnService

log = logging.getLogger(__name__)

#: Turn statuses that count as a completed turn (a reply was kept whole, or cut at
#: limits.max_reply_chars).
COMPLETED = frozenset({"complete", "truncated"})
#: Attempts in flight at once, per process.
MAX_IN_FLIGHT = 8
#: The worker looks at the queue at least this often (other processes queue too).
POLL_SECONDS = 1.0
#: How often each hook's finished deliveries are pruned to its queue_size.
PRUNE_SECONDS = 60.0
#: A claim holds a row this much longer than the slowest hook's timeout.
LEASE_MARGIN = timedelta(seconds=30)


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
        self.poll_seconds = poll_seconds
        self._transport = transport
        self._lease = max((h.timeout for h in hooks), default=timedelta(0)) + LEASE_MARGIN
        #: Per process, since start: queued, delivered, retried, failed, dropped.
        self.stats: Counter[str] = Counter()
        self._client: httpx.AsyncClient | None = None
        self._worker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._sending: dict[asyncio.Task[None], HookDelivery] = {}
        self._cut_short: list[HookDelivery] = []
        self._queueing: set[asyncio.Task[None]] = set()
        self._pruned_at = float("-inf")

    # -- wiring ---------------------------------------------------------------------------

    def attach(self, sessions: SessionService, turns: TurnService) -> None:
        """Listen to rotations, erasures and finished turns."""
        sessions.on_rotation(self.rotated)
        sessions.on_erase(self.erase_key)
        turns.after_turn(self.turn_finished)

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
        self._wake.set()
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

    # -- the worker -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start sending (idempotent). The store must be started."""
        if self._worker is not None and not self._worker.done():
            return
        self._wake = asyncio.Event()
        self._client = httpx.AsyncClient(
            transport=self._transport,
            follow_redirects=False,
            headers={"User-Agent": f"sessiongate/{__version__}"},
        )
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop sending; attempts cut short are given back (due at once, not counted), so
        the next start sends them. Idempotent."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        sending = list(self._sending)
        for task in sending:
            task.cancel()
        await asyncio.gather(*sending, return_exceptions=True)
        await self._settle_queueing()
        cut_short, self._cut_short = self._cut_short, []
        if cut_short:
            try:
                await self.store.release(cut_short, self.clock.now())
            except Exception:  # the lease ends by itself; the rows are not lost
                log.exception("could not give back %d hook deliveries", len(cut_short))
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @property
    def running(self) -> bool:
        return self._worker is not None and not self._worker.done()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = await self._pass()
            except Exception:
                log.exception("hook delivery pass failed")
                wait = self.poll_seconds
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    async def _pass(self) -> float:
        """Claim and start what is due; how long to sleep before the next look."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._pruned_at >= PRUNE_SECONDS:
            self._pruned_at = loop.time()
            for name, hook in self.hooks.items():
                await self.store.prune_finished(name, hook.queue_size)
        room = MAX_IN_FLIGHT - len(self._sending)
        now = self.clock.now()
        if room > 0:
            for delivery in await self.store.claim_due(now, now + self._lease, room):
                task = loop.create_task(self._send(delivery))
                self._sending[task] = delivery
                task.add_done_callback(self._sent)
        if len(self._sending) >= MAX_IN_FLIGHT:
            return self.poll_seconds  # a finished attempt wakes the worker
        due = await self.store.next_due()
        if due is None:
            return self.poll_seconds
        return min(max((due - self.clock.now()).total_seconds(), 0.01), self.poll_seconds)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.pop(task, None)
        self._wake.set()

    async def _send(self, delivery: HookDelivery) -> None:
        hook = self.hooks.get(delivery.hook)
        if hook is None:
            await self.store.mark_failed(
                delivery.delivery_id,
                delivery.attempts,
                self.clock.now(),
                "the hook is no longer configured",
            )
            self.stats["failed"] += 1
            return
        try:
            error, retry_after = await self._attempt(hook, delivery)
        except asyncio.CancelledError:
            self._cut_short.append(delivery)
            raise
        try:
            await self._record(hook, delivery, error, retry_after)
        except Exception:
            log.exception(
                "hook %s: could not record delivery %s", hook.hook_name, delivery.delivery_id
            )

    async def _attempt(
        self, hook: HookConfig, delivery: HookDelivery
    ) -> tuple[str | None, float | None]:
        """One POST: (None, None) on a 2xx, else a short error and any Retry-After."""
        assert self._client is not None
        body = delivery.body.encode()
        timestamp = int(self.clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            EVENT_HEADER: delivery.event,
            DELIVERY_HEADER: delivery.delivery_id,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signature(self._secrets[hook.hook_name], timestamp, body),
        }
        seconds = hook.timeout.total_seconds()
        try:
            async with asyncio.timeout(seconds):
                # The answer's body is never read: only its status counts.
                async with self._client.stream(
                    "POST", hook.url, content=body, headers=headers
                ) as response:
                    status = response.status_code
                    retry_after = parse_retry_after(response.headers)
        except TimeoutError:
            return f"no answer within {seconds:g} s", None
        except httpx.HTTPError as exc:
            return short_error(f"{type(exc).__name__}: could not reach the receiver"), None
        if 200 <= status < 300:
            return None, None
        return f"HTTP {status}", retry_after

    async def _record(
        self,
        hook: HookConfig,
        delivery: HookDelivery,
        error: str | None,
        retry_after: float | None,
    ) -> None:
        now = self.clock.now()
        did, attempts = delivery.delivery_id, delivery.attempts
        if error is None:
            await self.store.mark_delivered(did, attempts, now)
            self.stats["delivered"] += 1
            return
        if attempts >= hook.max_attempts:
            await self.store.mark_failed(did, attempts, now, error)
            self.stats["failed"] += 1
            log.warning(
                "hook %s: delivery %s failed after %d attempts (%s); kept as failed",
                hook.hook_name,
                did,
                attempts,
                error,
            )
            return
        wait = retry_delay(attempts, hook.backoff, hook.max_backoff, retry_after=retry_after)
        await self.store.mark_retry(did, attempts, now + wait, error)
        self.stats["retried"] += 1
        log.info(
            "hook %s: delivery %s attempt %d failed (%s); next in %.1f s",
            hook.hook_name,
            did,
            attempts,
            error,
            wait.total_seconds(),
        )

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
    from sessiongate.store.sqlite import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite_hooks import SQLiteHookStore

        return SQLiteHookStore(store)
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres import PostgresStore
    from sessiongate.store.postgres_hooks import PostgresHookStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no hook store for {type(store).__name__}")
    return PostgresHookStore(store)


def build_hook_service(settings: Settings, store: Store) -> HookService | None:
    """The hook service, or None when no `[[hooks]]` are configured."""
    if not settings.hooks:
        return None
    return HookService(settings.hooks, hook_secrets(settings.hooks), build_hook_store(store))
