"""Webhooks (DESIGN.md §9, docs/hooks.md) against a real receiver on loopback: signed
bodies without message text unless asked, `turn.completed` and `session.rotated` (from
turns, `POST /new` and revert), retries with backoff while the receiver fails or is not
there, a restart that resumes the queue, a bound on the queue, a hanging receiver that
never delays a turn, failed deliveries kept and shown to admins, erasure, the store on
SQLite and PostgreSQL (one claim per delivery across processes), and the configuration.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings, load_settings
from sessiongate.core.hooks import retry_delay, signature, verify_signature
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationReason, RotationRecord
from sessiongate.errors import ConfigError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.hooks import HookService
from sessiongate.service.sessions import Caller
from sessiongate.store.hooks import HookDelivery
from tests.conftest import BACKENDS
from tests.support import helpers
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect
from tests.support.hook_receiver import Receiver, free_port

SECRET = "hook-secret-0123456789abcdef"
ALICE = Caller("alice")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one's do.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def hook(url: str, **fields: Any) -> dict[str, Any]:
    return {
        "url": url,
        "secret": SECRET,
        "backoff": "50ms",
        "max_backoff": "200ms",
        "timeout": "2s",
        **fields,
    }


def hook_settings(
    tmp_path: Path, hooks: list[dict[str, Any]], *, database_url: str = ""
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "scripted"}},
        hooks=hooks,
    )


def hooks_of(engine: Engine) -> HookService:
    assert engine.hooks is not None
    return engine.hooks


@asynccontextmanager
async def running_engine(settings: Settings, *, send: bool = True) -> AsyncIterator[Engine]:
    engine = build_engine(settings, models={"scripted": ScriptedModel()})
    await engine.start()
    if send:
        await hooks_of(engine).start()
    try:
        yield engine
    finally:
        await engine.aclose()


async def eventually(check: Callable[[], bool | Awaitable[bool]], within: float = 5.0) -> None:
    await helpers.eventually(check, within, every=0.02)


async def deliveries(engine: Engine, status: str | None = None) -> list[HookDelivery]:
    found = await hooks_of(engine).store.list_deliveries(None, status, 200)  # type: ignore[arg-type]
    return found


@pytest.fixture
def receiver() -> Any:
    started = Receiver(SECRET.encode()).start()
    yield started
    started.stop()


# -- signing, pure ------------------------------------------------------------------------


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    body = b'{"id":"x","event":"turn.completed"}'
    expected = hmac.new(b"k" * 16, b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature(b"k" * 16, 1700000000, body) == "sha256=" + expected
    good = signature(b"k" * 16, 1700000000, body)
    assert verify_signature(b"k" * 16, "1700000000", good, body, now=1700000100)
    assert not verify_signature(b"k" * 16, "1700000000", good, body + b" ", now=1700000100)
    assert not verify_signature(b"j" * 16, "1700000000", good, body, now=1700000100)
    assert not verify_signature(b"k" * 16, "1700000001", good, body, now=1700000100)
    assert not verify_signature(b"k" * 16, "1700000000", good, body, now=1700009999)  # stale
    assert not verify_signature(b"k" * 16, "soon", good, body, now=1700000000)


def test_retry_delays_double_with_jitter_up_to_the_cap() -> None:
    rng = random.Random(7)
    base, cap = timedelta(seconds=1), timedelta(seconds=10)
    for attempts in range(1, 12):
        step = min(2 ** (attempts - 1), 10)
        for _ in range(50):
            wait = retry_delay(attempts, base, cap, rng=rng).total_seconds()
            assert step / 2 <= wait <= step
    honoured = retry_delay(1, base, cap, retry_after=7, rng=rng).total_seconds()
    assert honoured == 7
    assert retry_delay(1, base, cap, retry_after=99, rng=rng).total_seconds() == 10


# -- events through a running engine ------------------------------------------------------


async def test_events_arrive_signed_and_carry_text_only_when_asked(
    tmp_path: Path, receiver: Receiver
) -> None:
    settings = hook_settings(
        tmp_path,
        [
            hook(receiver.url, name="plain"),
            hook(
                receiver.url + "?texty=1",
                name="texty",
                include_text=True,
                events=["turn.completed"],
            ),
        ],
    )
    async with running_engine(settings) as engine:
        events = await collect(engine, "remember the otters")
        assert events[-1].type == "end"
        turn_id, session_id = events[0].turn_id, events[0].session_id
        await collect(engine, "/new")  # a bare /new: a rotation, not a completed turn
        await engine.sessions.rotate_now("chat:alice", ALICE)  # POST /new's path
        await eventually(
            lambda: (
                len(receiver.events("turn.completed")) == 2
                and len(receiver.events("session.rotated")) == 2
            )
        )
    assert receiver.received and all(r.signature_ok for r in receiver.received)
    for got in receiver.received:
        assert got.headers["X-Sessiongate-Event"] == got.body["event"]
        assert got.headers["X-Sessiongate-Delivery"] == got.body["id"]
        assert got.headers["Content-Type"] == "application/json"
        assert got.headers["X-Sessiongate-Signature"].startswith("sha256=")
        assert set(got.body) == {"id", "event", "created_at", "data"}
        assert got.body["created_at"].endswith("Z")

    plain = [r for r in receiver.events("turn.completed") if "texty" not in r.path]
    texty = [r for r in receiver.events("turn.completed") if "texty" in r.path]
    assert len(plain) == len(texty) == 1
    assert plain[0].body["data"] == {
        "owner": "alice",
        "key": "chat:alice",
        "agent": "main",
        "turn_id": turn_id,
        "session_id": session_id,
        "status": "complete",
        "primary": False,
        "mode": None,
    }
    assert b"otters" not in plain[0].raw  # privacy by default
    assert texty[0].body["data"]["user_text"] == "remember the otters"
    assert texty[0].body["data"]["reply_text"] == "reply to: remember the otters"
    assert plain[0].body["id"] != texty[0].body["id"]  # one delivery per hook

    rotations = [r.body["data"] for r in receiver.events("session.rotated")]
    assert all(r["reason"] == "manual" and r["key"] == "chat:alice" for r in rotations)
    # Deliveries are sent in parallel: their order of arrival is not promised.
    assert session_id in {r["from"] for r in rotations}
    assert {r["owner"] for r in rotations} == {"alice"}
    assert all("texty" not in r.path for r in receiver.events("session.rotated"))


async def test_a_failing_receiver_is_retried_with_growing_waits(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.status = lambda n: 500 if n < 3 else 204
    settings = hook_settings(
        tmp_path, [hook(receiver.url, backoff="100ms", max_backoff="2s", events=["turn.completed"])]
    )
    async with running_engine(settings) as engine:
        await collect(engine, "hello")
        await eventually(lambda: _delivered(engine))
        (row,) = await deliveries(engine)
        assert (row.status, row.attempts, row.last_error) == ("delivered", 4, None)
        assert hooks_of(engine).stats["retried"] == 3
    times = receiver.attempt_times
    assert len(times) == 4
    for n, (before, after) in enumerate(itertools.pairwise(times)):
        # Equal jitter: at least half of 100 ms * 2**n, less a little for timer slack.
        assert after - before >= 0.05 * 2**n - 0.01


async def test_a_receiver_that_is_down_gets_the_delivery_once_it_is_up(tmp_path: Path) -> None:
    receiver = Receiver(SECRET.encode())  # nobody listens on its port yet
    settings = hook_settings(tmp_path, [hook(receiver.url, events=["turn.completed"])])
    async with running_engine(settings) as engine:
        await collect(engine, "anyone there?")

        async def retried() -> bool:
            rows = await deliveries(engine, "pending")
            return bool(rows) and rows[0].attempts >= 2

        await eventually(retried)
        (row,) = await deliveries(engine)
        assert row.last_error is not None and "could not reach" in row.last_error
        receiver.start()
        try:
            await eventually(lambda: len(receiver.received) == 1)
            await eventually(lambda: _delivered(engine))
        finally:
            receiver.stop()
    assert receiver.received[0].signature_ok


async def _delivered(engine: Engine) -> bool:
    return [d.status for d in await deliveries(engine)] == ["delivered"]


async def test_a_restarted_gateway_resumes_pending_deliveries(tmp_path: Path) -> None:
    port = free_port()
    settings = hook_settings(
        tmp_path, [hook(f"http://127.0.0.1:{port}/hook", name="main", backoff="100ms")]
    )
    async with running_engine(settings) as first:
        await collect(first, "one")
        await collect(first, "/new")

        async def tried() -> bool:
            rows = await deliveries(first)
            return len(rows) == 2 and all(r.attempts >= 1 for r in rows)

        await eventually(tried)
        pending = {d.delivery_id for d in await deliveries(first, "pending")}
    assert len(pending) == 2  # the gateway stopped with both undelivered

    receiver = Receiver(SECRET.encode(), port).start()
    try:
        async with running_engine(settings) as second:  # a new engine, the same data_dir
            await eventually(lambda: len(receiver.received) == 2)
            assert {r.delivery for r in receiver.received} == pending
            assert {r.event for r in receiver.received} == {"turn.completed", "session.rotated"}
            await eventually(lambda: _all_status(second, "delivered", 2))
    finally:
        receiver.stop()


async def _all_status(engine: Engine, status: str, count: int) -> bool:
    rows = await deliveries(engine)
    return len(rows) == count and all(r.status == status for r in rows)


async def test_a_hanging_receiver_never_delays_a_turn(tmp_path: Path) -> None:
    hanging = Receiver(SECRET.encode()).start()
    hanging.hang = True
    later = Receiver(SECRET.encode()).start()
    try:
        settings = hook_settings(
            tmp_path, [hook(hanging.url, name="main", timeout="20s", events=["turn.completed"])]
        )
        async with running_engine(settings) as engine:
            await eventually(lambda: True)
            for n in range(3):
                started = time.monotonic()
                events = await collect(engine, f"turn {n}")
                assert events[-1].type == "end"
                assert time.monotonic() - started < 0.5
            await eventually(lambda: len(hanging.attempt_times) == 3)  # all three in flight
            assert hanging.received == []
        # A graceful stop gave the cut-short attempts back: not counted, due at once.
        moved = hook_settings(tmp_path, [hook(later.url, name="main", events=["turn.completed"])])
        async with running_engine(moved) as engine:
            await eventually(lambda: len(later.received) == 3)
            await eventually(lambda: _all_status(engine, "delivered", 3))
            assert [d.attempts for d in await deliveries(engine)] == [1, 1, 1]
    finally:
        hanging.stop()
        later.stop()


def test_failed_deliveries_are_kept_and_admins_see_the_queue(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.status = lambda n: 503
    settings = gateway_settings(
        tmp_path, hooks=[hook(receiver.url + "?token=abc", name="ops", max_attempts=2)]
    )
    with (
        running_gateway(settings, {"scripted": ScriptedModel()}) as gw,
        httpx.Client(base_url=gw.url, timeout=10) as client,
    ):
        answer = client.post(
            "/v1/sessions/chat:alice/messages",
            json={"content": "hi", "stream": False},
            headers=gw.auth("alice"),
        )
        assert answer.status_code == 200
        assert client.post("/v1/sessions/chat:alice/new", headers=gw.auth("alice")).is_success
        deadline = time.monotonic() + 5
        while True:
            listing = client.get("/v1/hooks/deliveries", headers=gw.auth("root")).json()
            if listing["counts"].get("ops", {}).get("failed") == 2:
                break
            assert time.monotonic() < deadline, listing
            time.sleep(0.05)
        refused = client.get("/v1/hooks/deliveries", headers=gw.auth("alice"))
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "admin_required"
        failed = client.get(
            "/v1/hooks/deliveries?status=failed&limit=1", headers=gw.auth("root")
        ).json()
        bad = client.get("/v1/hooks/deliveries?status=lost", headers=gw.auth("root"))
        assert bad.status_code == 400
    assert len(receiver.attempt_times) == 4  # two deliveries, two attempts each
    assert listing["hooks"] == [
        {
            "name": "ops",
            "url": receiver.url,  # no query: it may hold a token
            "events": [
                "turn.completed",
                "session.rotated",
                "tasks.extracted",
                "memory.changed",
                "session.compacted",
            ],
        }
    ]
    assert {d["event"] for d in listing["deliveries"]} == {"turn.completed", "session.rotated"}
    (row,) = failed["deliveries"]
    assert row["status"] == "failed" and row["attempts"] == 2
    assert row["last_error"] == "HTTP 503" and row["failed_at"] is not None
    assert row["next_attempt_at"] is None and "body" not in row
    assert listing["stats"]["failed"] == 2


async def test_erasing_a_key_erases_its_deliveries(tmp_path: Path) -> None:
    settings = hook_settings(tmp_path, [hook(f"http://127.0.0.1:{free_port()}/x")])
    async with running_engine(settings, send=False) as engine:
        await collect(engine, "one", key="chat:alice")
        await collect(engine, "two", key="chat:other")
        await engine.turns.drain()
        assert len(await deliveries(engine)) == 2
        await engine.sessions.delete("chat:alice", ALICE)
        left = await deliveries(engine)
        assert [json.loads(d.body)["data"]["key"] for d in left] == ["chat:other"]


# -- the store, on SQLite and PostgreSQL ----------------------------------------------------


@asynccontextmanager
async def queue_engine(tmp_path: Path, database_url: str, **fields: Any) -> AsyncIterator[Engine]:
    settings = hook_settings(
        tmp_path,
        [hook(f"http://127.0.0.1:{free_port()}/x", name="q", **fields)],
        database_url=database_url,
    )
    async with running_engine(settings, send=False) as engine:
        yield engine


async def test_the_queue_is_bounded_dropping_the_oldest(
    tmp_path: Path, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with queue_engine(tmp_path, database_url, queue_size=3) as engine:
        hooks = hooks_of(engine)
        with caplog.at_level(logging.WARNING, logger="sessiongate.service.hooks"):
            for n in range(5):
                await hooks.emit("turn.completed", {"n": n})
        kept = await deliveries(engine, "pending")
        assert sorted(json.loads(d.body)["data"]["n"] for d in kept) == [2, 3, 4]
        assert hooks.stats["dropped"] == 2 and hooks.stats["queued"] == 5
        assert "queue full" in caplog.text
        assert await hooks.store.counts() == {"q": {"pending": 3}}


async def test_claims_lease_rows_and_stale_reports_change_nothing(
    tmp_path: Path, database_url: str
) -> None:
    async with queue_engine(tmp_path, database_url) as engine:
        hooks, store = hooks_of(engine), hooks_of(engine).store
        await hooks.emit("turn.completed", {"n": 1}, owner="alice", key="chat:alice")
        await hooks.emit("turn.completed", {"n": 2})
        now = datetime.now(UTC) + timedelta(seconds=1)
        lease = now + timedelta(minutes=1)
        first = await store.claim_due(now, lease, 10)
        assert [d.attempts for d in first] == [1, 1]
        assert [json.loads(d.body)["data"]["n"] for d in first] == [1, 2]
        assert first[0].owner == "alice" and first[0].session_key == "chat:alice"
        assert await store.claim_due(now, lease, 10) == []  # leased
        assert await store.next_due() == lease
        # The lease runs out (the sender died): the row is due again, one more attempt.
        again = await store.claim_due(lease, lease + timedelta(minutes=1), 1)
        assert [(d.delivery_id, d.attempts) for d in again] == [(first[0].delivery_id, 2)]
        # The first sender's late report names attempt 1: it changes nothing.
        assert not await store.mark_delivered(first[0].delivery_id, 1, now)
        assert await store.mark_retry(first[0].delivery_id, 2, now, "HTTP 500")
        assert await store.mark_failed(first[1].delivery_id, 1, now, "HTTP 410")
        rows = {d.delivery_id: d for d in await deliveries(engine)}
        retried, failed = rows[first[0].delivery_id], rows[first[1].delivery_id]
        assert (retried.status, retried.attempts, retried.last_error) == ("pending", 2, "HTTP 500")
        assert (failed.status, failed.last_error) == ("failed", "HTTP 410")
        assert failed.failed_at is not None
        (claimed,) = await store.claim_due(now, lease, 5)
        await store.release([claimed], now)
        (given_back,) = await deliveries(engine, "pending")
        assert given_back.attempts == 2 and given_back.next_attempt_at <= now + timedelta(0)
        (claimed,) = await store.claim_due(now, lease, 5)
        assert claimed.attempts == 3
        assert await store.mark_delivered(claimed.delivery_id, 3, now)
        assert await store.counts() == {"q": {"delivered": 1, "failed": 1}}
        assert await store.prune_finished("q", 1) == 1
        assert len(await deliveries(engine)) == 1
        assert await store.delete_for_key("alice", "chat:alice") in (0, 1)


@pytest.mark.postgres
async def test_two_postgres_processes_send_each_delivery_once(tmp_path: Path) -> None:
    from tests.support.pg import fresh_database

    receiver = Receiver(SECRET.encode()).start()
    try:
        async with fresh_database() as url:
            settings = hook_settings(
                tmp_path, [hook(receiver.url, name="shared", timeout="20s")], database_url=url
            )
            async with running_engine(settings, send=False) as writer:
                for n in range(30):
                    await hooks_of(writer).emit("turn.completed", {"n": n})
                # Two senders, each with its own pool: two gateway processes' worth.
                receiver.hang = True  # until both senders hold attempts in flight
                async with running_engine(settings) as a, running_engine(settings) as b:
                    await eventually(lambda: len(receiver.attempt_times) == 16)  # 8 each
                    receiver.release.set()
                    await eventually(lambda: len(receiver.received) >= 30, within=10)
                    await eventually(lambda: _all_status(a, "delivered", 30))

                    def sent() -> int:
                        return hooks_of(a).stats["delivered"] + hooks_of(b).stats["delivered"]

                    await eventually(lambda: sent() == 30)
                    # Both took part, none twice.
                    assert hooks_of(a).stats["delivered"] and hooks_of(b).stats["delivered"]
            ids = [r.delivery for r in receiver.received]
            assert len(ids) == len(set(ids)) == 30, ids
            assert sorted(r.body["data"]["n"] for r in receiver.received) == list(range(30))
    finally:
        receiver.stop()


@pytest.mark.postgres
async def test_concurrent_postgres_claims_never_overlap(tmp_path: Path) -> None:
    from tests.support.pg import fresh_database

    async with fresh_database() as url:
        settings = hook_settings(
            tmp_path, [hook(f"http://127.0.0.1:{free_port()}/x", name="c")], database_url=url
        )
        async with (
            running_engine(settings, send=False) as a,
            running_engine(settings, send=False) as b,
        ):
            for n in range(40):
                await hooks_of(a).emit("turn.completed", {"n": n})
            now = datetime.now(UTC) + timedelta(seconds=1)
            lease = now + timedelta(minutes=5)
            claims = await asyncio.gather(
                *(hooks_of(e).store.claim_due(now, lease, 7) for e in [a, b] * 4)
            )
            seen = [d.delivery_id for batch in claims for d in batch]
            assert len(seen) == len(set(seen))
            assert len(seen) == 40 or all(len(batch) == 7 for batch in claims)


async def test_a_delivery_of_a_hook_no_longer_configured_fails(tmp_path: Path) -> None:
    settings = hook_settings(tmp_path, [hook(f"http://127.0.0.1:{free_port()}/x", name="old")])
    async with running_engine(settings, send=False) as engine:
        await hooks_of(engine).emit("turn.completed", {"n": 1})
    receiver = Receiver(SECRET.encode()).start()
    try:
        renamed = hook_settings(tmp_path, [hook(receiver.url, name="new")])
        async with running_engine(renamed) as engine:
            await eventually(lambda: _all_status(engine, "failed", 1))
            (row,) = await deliveries(engine)
            assert row.last_error == "the hook is no longer configured"
        assert receiver.attempt_times == []
    finally:
        receiver.stop()


# -- configuration ------------------------------------------------------------------------


async def test_hook_configuration_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "sessiongate.toml"

    def problems(text: str) -> str:
        config.write_text(text)
        with pytest.raises(ConfigError) as raised:
            load_settings(config)
        return str(raised.value)

    assert "exactly one of secret or secret_env" in problems(
        '[[hooks]]\nurl = "http://127.0.0.1:9/x"\n'
    )
    assert "http:// or https://" in problems(
        '[[hooks]]\nurl = "ftp://host/x"\nsecret = "0123456789abcdef"\n'
    )
    assert "events" in problems(
        '[[hooks]]\nurl = "http://h/x"\nsecret = "0123456789abcdef"\nevents = ["turn.done"]\n'
    )
    assert "longer than zero" in problems(
        '[[hooks]]\nurl = "http://h/x"\nsecret = "0123456789abcdef"\nbackoff = "0s"\n'
    )
    assert "already used" in problems(
        '[[hooks]]\nurl = "http://h/x"\nsecret = "0123456789abcdef"\nname = "a"\n'
        '[[hooks]]\nurl = "http://h/y"\nsecret = "0123456789abcdef"\nname = "a"\n'
    )
    config.write_text(
        '[[hooks]]\nurl = "https://u:pw@h.example/x?token=t"\nsecret_env = "SG_HOOK_SECRET"\n'
    )
    settings = load_settings(config)
    shown = settings.model_dump(mode="json")["hooks"][0]
    assert shown["url"] == "https://h.example/x"
    with pytest.raises(ConfigError, match="SG_HOOK_SECRET"):
        build_engine(settings.model_copy(update={"data_dir": tmp_path}))
    monkeypatch.setenv("SG_HOOK_SECRET", "from-the-environment-123")
    engine = build_engine(settings.model_copy(update={"data_dir": tmp_path}))
    try:
        hooks = hooks_of(engine)
        (name,) = hooks.hooks
        assert name.startswith("url-")
        assert hooks._secrets[name] == b"from-the-environment-123"
    finally:
        await engine.aclose()
    inline = hook_settings(tmp_path, [hook("http://h/x")])
    assert inline.model_dump(mode="json")["hooks"][0]["secret"] == "********"


async def test_a_revert_rotation_record_becomes_a_rotation_event(tmp_path: Path) -> None:
    record = RotationRecord(
        KeyRef("bob", "chat:bob"),
        "a" * 8,
        "b" * 8,
        RotationReason.REVERT,
        datetime(2026, 3, 2, tzinfo=UTC),
    )
    settings = hook_settings(tmp_path, [hook(f"http://127.0.0.1:{free_port()}/x")])
    async with running_engine(settings, send=False) as engine:
        hooks_of(engine).rotated(record)  # what SessionService.revert announces
        await hooks_of(engine)._settle_queueing()
        (row,) = await deliveries(engine)
    assert json.loads(row.body)["data"] == {
        "owner": "bob",
        "key": "chat:bob",
        "from": "a" * 8,
        "to": "b" * 8,
        "reason": "revert",
        "at": "2026-03-02T00:00:00Z",
        "confidence": None,
        "deciding_model": None,
        "in_place": False,
    }
