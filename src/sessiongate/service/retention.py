"""Retention: archive or erase the keys nobody has used for `retention.idle_after`
(seed 001 cleans up sessions idle more than 30 days). The rules are in core/retention.py;
docs/operations.md says what each action keeps.

A run finds the idle keys with one query, longest idle first (at most
`max_keys_per_run`), then handles each under the key's own lock — the lock every turn
holds — after reading the key again: a key used since it was found is left alone, so a
run never races a turn. Erasure is `DELETE /v1/sessions/{key}`'s own path (messages,
segments, rotations and search rows in one transaction, then every erase hook: artifacts
with their files, and whatever else is registered with `SessionService.on_erase`).
Archiving is an ordinary rotation, announced like any other.

Runs never overlap, across processes too: each holds the store's retention lock
(`RetentionStore.exclusive_run`), and a run that cannot take it does nothing. The gateway
runs it at start-up and then every `interval` (`start_schedule`, from the app's
lifespan); `sessiongate gc` runs it once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sessiongate.config import Settings
from sessiongate.core.retention import RetentionAction, RetentionPolicy, Skip, decide
from sessiongate.errors import ConfigError
from sessiongate.service.sessions import SessionService
from sessiongate.store.base import Store
from sessiongate.store.retention import IdleKey, RetentionStore

log = logging.getLogger("sessiongate.retention")

#: How long `stop_schedule` lets the key in hand finish before cancelling the run.
STOP_GRACE_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RetentionItem:
    owner: str
    key: str
    last_activity_at: datetime
    #: `erased`, `archived`, `would erase`, `would archive` (dry run), `skipped: active`,
    #: `skipped: empty`, `skipped: gone`, or `failed: <error>`.
    outcome: str


@dataclass(slots=True)
class RetentionReport:
    action: RetentionAction
    cutoff: datetime
    dry_run: bool
    #: False: another run (in this or another process) held the lock; nothing was done.
    ran: bool = True
    items: list[RetentionItem] = field(default_factory=list)
    #: The run stopped at `max_keys_per_run`; more idle keys may remain for the next one.
    more: bool = False

    def counts(self) -> Counter[str]:
        return Counter(item.outcome.split(":")[0] for item in self.items)


class RetentionService:
    def __init__(
        self,
        sessions: SessionService,
        store: RetentionStore,
        policy: RetentionPolicy | None,
        *,
        interval: timedelta = timedelta(hours=1),
        max_keys_per_run: int = 10_000,
    ) -> None:
        self.sessions = sessions
        self.store = store
        #: None: retention is off (`retention.idle_after` unset).
        self.policy = policy
        self.interval = interval
        self.max_keys_per_run = max_keys_per_run
        #: Scheduled runs finished (whatever their outcome).
        self.runs = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    # -- one run ----------------------------------------------------------------

    async def run(self, *, dry_run: bool = False) -> RetentionReport:
        """Archive or erase every idle key (dry run: only say which)."""
        return await self._run(dry_run, None)

    async def _run(self, dry_run: bool, stop: asyncio.Event | None) -> RetentionReport:
        policy = self.policy
        if policy is None:
            raise ConfigError(
                "retention is off: set retention.idle_after (e.g. 30d) to archive or erase"
                " idle keys"
            )
        now = self.sessions.clock.now()
        report = RetentionReport(policy.action, policy.cutoff(now), dry_run)
        async with self.store.exclusive_run() as held:
            if not held:
                report.ran = False
                return report
            idle = await self.store.idle_keys(
                report.cutoff,
                with_context=policy.action is RetentionAction.ARCHIVE,
                limit=self.max_keys_per_run,
            )
            report.more = len(idle) >= self.max_keys_per_run
            for candidate in idle:
                if stop is not None and stop.is_set():
                    report.more = True
                    break
                if dry_run:
                    outcome = f"would {policy.action.value}"
                else:
                    outcome = await self._handle(candidate, policy, now)
                ref = candidate.ref
                report.items.append(
                    RetentionItem(ref.owner, ref.name, candidate.last_activity_at, outcome)
                )
        return report

    async def _handle(self, candidate: IdleKey, policy: RetentionPolicy, now: datetime) -> str:
        ref = candidate.ref
        sessions = self.sessions
        try:
            async with sessions.locks.hold(ref):
                record = await sessions.store.get_key(ref)
                if record is None:
                    return "skipped: gone"
                latest = await sessions.store.latest_segment(ref)
                decision = decide(latest, now, policy, sessions.policy_for(record))
                if isinstance(decision, Skip):
                    return f"skipped: {decision.value}"
                if decision is RetentionAction.ERASE:
                    await sessions.erase_held(ref)
                    return "erased"
                assert not isinstance(decision, RetentionAction)
                sessions.threads.drop(ref)
                await sessions.apply(ref, latest, decision, sessions.clock.now())
                return "archived"
        except Exception as exc:  # one key's failure must not stop the others'
            code = getattr(exc, "code", type(exc).__name__)
            log.warning(
                "retention could not handle a key",
                extra={"key": ref.storage_id, "error": code},
                exc_info=True,
            )
            return f"failed: {code}"

    # -- the schedule -----------------------------------------------------------

    def start_schedule(self) -> None:
        """Run now and then every `interval`, in the background, until `stop_schedule`.
        Nothing starts when retention is off. Idempotent."""
        if self.policy is None or self._task is not None:
            return
        self._stopping = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._loop(), name="sessiongate-retention"
        )

    async def stop_schedule(self) -> None:
        """Stop the schedule: the key in hand is finished (up to STOP_GRACE_SECONDS),
        the rest wait for the next start."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping.set()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(task, STOP_GRACE_SECONDS)

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                report_run(await self._run(False, self._stopping))
            except Exception:
                log.exception("retention run failed")
            self.runs += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval.total_seconds())


def report_run(report: RetentionReport) -> None:
    """One log line per run that did something (counts only: no key names)."""
    if not report.ran or not (report.items or report.more):
        return
    counts = report.counts()
    log.info(
        "retention",
        extra={
            "action": report.action.value,
            "erased": counts["erased"],
            "archived": counts["archived"],
            "skipped": counts["skipped"],
            "failed": counts["failed"],
            "more": report.more,
        },
    )


def retention_policy(settings: Settings) -> RetentionPolicy | None:
    config = settings.retention
    if config.idle_after is None:
        return None
    return RetentionPolicy(config.idle_after, RetentionAction(config.action))


def build_retention_service(
    settings: Settings, store: Store, sessions: SessionService
) -> RetentionService:
    """The retention queries beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    queries: RetentionStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.retention import SQLiteRetentionStore

        queries = SQLiteRetentionStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.retention import PostgresRetentionStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no retention queries for {type(store).__name__}")
        queries = PostgresRetentionStore(store)
    return RetentionService(
        sessions,
        queries,
        retention_policy(settings),
        interval=settings.retention.interval,
        max_keys_per_run=settings.retention.max_keys_per_run,
    )
