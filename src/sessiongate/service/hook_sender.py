"""The webhook sender (docs/hooks.md): a background worker that claims due deliveries
from the store and POSTs them, signed, never on a turn's path. Queueing them is
service/hooks.py's part.

It claims due rows (store/hooks.py: one statement, `FOR UPDATE SKIP LOCKED` on
PostgreSQL, so several processes never send one row twice at once), POSTs each with
httpx under the hook's `timeout`, and marks it delivered (any 2xx), due again after a
backoff with jitter (anything else), or failed after `max_attempts`. A restart resumes
the pending rows; `stop()` gives back the attempts it cut short. Delivery is at least
once: a receiver dedupes on `X-Sessiongate-Delivery`. The log names hooks and delivery
ids, never bodies or URLs' secrets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping
from datetime import timedelta

import httpx

from sessiongate import __version__
from sessiongate.config.hooks import HookConfig
from sessiongate.core.clock import Clock
from sessiongate.core.hooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    retry_delay,
    short_error,
    signature,
)
from sessiongate.models.retry import parse_retry_after
from sessiongate.store.hooks import HookDelivery, HookStore

log = logging.getLogger(__name__)

#: Attempts in flight at once, per process.
MAX_IN_FLIGHT = 8
#: The worker looks at the queue at least this often (other processes queue too).
POLL_SECONDS = 1.0
#: How often each hook's finished deliveries are pruned to its queue_size.
PRUNE_SECONDS = 60.0
#: A claim holds a row this much longer than the slowest hook's timeout.
LEASE_MARGIN = timedelta(seconds=30)


class HookSender:
    def __init__(
        self,
        hooks: Mapping[str, HookConfig],
        secrets: Mapping[str, bytes],
        store: HookStore,
        clock: Clock,
        stats: Counter[str],
        *,
        poll_seconds: float = POLL_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.hooks = hooks
        self._secrets = secrets
        self.store = store
        self.clock = clock
        #: Shared with the hook service: delivered, retried, failed counted here.
        self.stats = stats
        self.poll_seconds = poll_seconds
        self._transport = transport
        timeouts = (hook.timeout for hook in hooks.values())
        self._lease = max(timeouts, default=timedelta(0)) + LEASE_MARGIN
        self._client: httpx.AsyncClient | None = None
        self._worker: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._sending: dict[asyncio.Task[None], HookDelivery] = {}
        self._cut_short: list[HookDelivery] = []
        self._pruned_at = float("-inf")

    def wake(self) -> None:
        """Something was queued: look at the queue now rather than at the next poll."""
        self._wake.set()

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
