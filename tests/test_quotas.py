"""Quotas (DESIGN.md §15, issue 23): requests per minute and tokens per day, per user.

The pure rules (windows, Retry-After, which limit applies, the override body) here
directly; the enforcement through `sessiongate serve` on both stores: 429 with
`Retry-After` and `quota_exceeded` on REST, the OpenAI route and the WebSocket, the
refused message never stored, a user's own quotas set and cleared by an admin, the day's
tokens, `/metrics`, `/v1/me/quotas` and erasure; and two gateways on one PostgreSQL
sharing one quota exactly.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.sync.client import connect

from sessiongate.core.quotas import (
    REQUESTS_PER_MINUTE,
    TOKENS_PER_DAY,
    QuotaLimits,
    parse_overrides,
    refusal,
    request_admitted,
    tokens_refused,
    usage_tokens,
    window_of,
    with_changes,
)
from sessiongate.errors import InvalidInput
from tests.support.pg import fresh_database_sync
from tests.support.served import (
    Served,
    relay_model,
    served_gateway,
)
from tests.support.served_cluster import served_cluster

# --- the pure rules ----------------------------------------------------------------------


def test_windows_are_utc_minutes_and_days_and_retry_after_counts_to_their_end() -> None:
    now = datetime(2026, 11, 27, 9, 41, 17, 250_000, tzinfo=UTC)
    minute = window_of(REQUESTS_PER_MINUTE, now)
    assert datetime.fromtimestamp(minute.start, UTC) == datetime(2026, 11, 27, 9, 41, tzinfo=UTC)
    assert minute.end - minute.start == 60
    assert minute.retry_after(now) == 43  # 42.75 s left, rounded up
    day = window_of(TOKENS_PER_DAY, now)
    assert datetime.fromtimestamp(day.start, UTC) == datetime(2026, 11, 27, tzinfo=UTC)
    assert day.retry_after(now) == 14 * 3600 + 18 * 60 + 43
    # A moment in another zone falls in the same UTC window.
    there = now.astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    assert window_of(TOKENS_PER_DAY, there) == day
    # The last instant of a window still waits at least a second.
    edge = datetime(2026, 11, 27, 9, 41, 59, 999_999, tzinfo=UTC)
    assert window_of(REQUESTS_PER_MINUTE, edge).retry_after(edge) == 1
    assert window_of(REQUESTS_PER_MINUTE, edge + timedelta(microseconds=1)).start == minute.end


def test_a_users_own_limits_win_over_the_defaults_and_null_clears_them() -> None:
    defaults = QuotaLimits(requests_per_minute=10, tokens_per_day=None)
    assert QuotaLimits().over(defaults) == defaults
    own = QuotaLimits(requests_per_minute=3, tokens_per_day=500)
    assert own.over(defaults) == own
    assert QuotaLimits(tokens_per_day=0).over(defaults) == QuotaLimits(10, 0)
    assert QuotaLimits().unlimited and not defaults.unlimited
    changed = with_changes(own, parse_overrides({"requests_per_minute": None}))
    assert changed == QuotaLimits(None, 500)
    assert changed.over(defaults).requests_per_minute == 10


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"requests_per_hour": 1},
        {"requests_per_minute": -1},
        {"requests_per_minute": 1.5},
        {"requests_per_minute": True},
        {"tokens_per_day": "100"},
        {"tokens_per_day": 10**16},
    ],
)
def test_bad_quota_bodies_are_refused_with_a_code(body: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_overrides(body)
    assert caught.value.code == "invalid_quotas"


def test_the_decisions_and_the_refusal() -> None:
    assert request_admitted(2, 1) and request_admitted(2, 2)
    assert not request_admitted(2, None)  # the store did not count it: the window is full
    assert not request_admitted(0, 1)
    assert not tokens_refused(None, 10**9)
    assert not tokens_refused(100, 99) and tokens_refused(100, 100)
    assert usage_tokens({"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}) == 12
    assert usage_tokens({"prompt_tokens": True, "completion_tokens": -3, "estimated": True}) == 0
    now = datetime(2026, 11, 27, 9, 41, 50, tzinfo=UTC)
    error = refusal(REQUESTS_PER_MINUTE, 2, window_of(REQUESTS_PER_MINUTE, now), now)
    assert (error.status, error.code, error.retry_after) == (429, "quota_exceeded", 10)
    assert "2 requests per minute" in error.message


# --- served --------------------------------------------------------------------------------


def _fresh_minute(margin: float = 15.0) -> None:
    """Wait for a new UTC minute when this one has less than `margin` seconds left, so
    the requests of one check fall in one window."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.2)


def _config(directory: Path, database_url: str | None, quotas: str) -> str:
    text = relay_model(directory, "relay") + '[agents.defaults]\nmodel = "relay"\n'
    if database_url is not None:
        text += f"[database]\nurl = {json.dumps(database_url)}\npool_size = 4\n"
    return text + f"[quotas]\n{quotas}\n"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Served, str]]:
    users = {"alice": (), "bob": (), "carol": (), "root": ("--admin",)}
    if request.param == "sqlite":
        with served_gateway(
            tmp_path, _config(tmp_path, None, "requests_per_minute = 2"), users
        ) as g:
            yield g, "sqlite"
        return
    with (
        fresh_database_sync() as url,
        served_gateway(tmp_path, _config(tmp_path, url, "requests_per_minute = 2"), users) as g,
    ):
        yield g, url


def _rows(where: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows from the gateway's database (SQLite file under data_dir, or PostgreSQL)."""
    if where.startswith("postgresql://"):

        async def fetch() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(where)
            try:
                pg_sql = sql
                for n in range(sql.count("?")):
                    pg_sql = pg_sql.replace("?", f"${n + 1}", 1)
                return [tuple(r) for r in await conn.fetch(pg_sql, *args)]
            finally:
                await conn.close()

        return asyncio.run(fetch())
    raise AssertionError(where)


def _db_rows(served: Served, where: str, sql: str, *args: object) -> list[tuple[Any, ...]]:
    if where == "sqlite":
        path = served.config.parent / "data" / "sessiongate.db"
        with sqlite3.connect(path) as conn:
            return [tuple(r) for r in conn.execute(sql, args).fetchall()]
    return _rows(where, sql, *args)


def _turn(client: httpx.Client, key: str, content: str) -> httpx.Response:
    return client.post(f"/v1/sessions/{key}/messages", json={"content": content})


def _assert_quota_429(answer: httpx.Response, what: str, most: int) -> dict[str, Any]:
    assert answer.status_code == 429, answer.text
    wait = int(answer.headers["Retry-After"])
    assert 1 <= wait <= most
    error = answer.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert what in error["message"]
    return dict(error)


def test_requests_over_the_minute_are_refused_on_every_transport_and_never_stored(
    gateway: tuple[Served, str],
) -> None:
    served, where = gateway
    _fresh_minute()
    with served.client("alice") as alice:
        assert _turn(alice, "k", "one").status_code == 200
        assert _turn(alice, "k", "two").status_code == 200
        _assert_quota_429(_turn(alice, "k", "three refused"), "2 requests per minute", 60)
        # The OpenAI route: the same quota, the same answer.
        chat = alice.post(
            "/v1/chat/completions",
            json={"model": "main", "messages": [{"role": "user", "content": "chat refused"}]},
        )
        _assert_quota_429(chat, "requests per minute", 60)
        # The Responses API answers in OpenAI's error shape, with the same code and header.
        response = alice.post("/v1/responses", json={"model": "main", "input": "refused too"})
        assert response.status_code == 429, response.text
        assert 1 <= int(response.headers["Retry-After"]) <= 60
        assert response.json()["error"]["code"] == "quota_exceeded"
        quotas = alice.get("/v1/me/quotas").json()["quotas"]
        assert quotas["requests_per_minute"]["limit"] == 2
        assert quotas["requests_per_minute"]["used"] == 2  # refusals are not counted
        assert quotas["tokens_per_day"]["limit"] is None
    # The WebSocket: an error frame with the code, and the socket stays usable.
    ws_url = served.url.replace("http://", "ws://") + "/api/claude/ws?session_id=phone-1"
    with connect(ws_url, proxy=None) as ws:
        ws.send(served.keys["alice"])
        assert ws.recv(timeout=10) == "authenticated"
        assert json.loads(ws.recv(timeout=10))["type"] == "ready"
        ws.send(json.dumps({"content": "socket refused"}))
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and frame["code"] == "quota_exceeded", frame
    contents = [
        r[0] for r in _db_rows(served, where, "SELECT content FROM messages WHERE role = 'user'")
    ]
    assert sorted(contents) == ["one", "two"]  # no refused message anywhere
    # Another user has a minute of their own.
    with served.client("bob") as bob:
        assert _turn(bob, "k", "bob's first").status_code == 200
    metrics = httpx.get(served.url + "/metrics", headers=served.auth("root"), timeout=10).text
    line = next(
        m
        for m in metrics.splitlines()
        if m.startswith('sessiongate_quota_refusals_total{quota="requests_per_minute"}')
    )
    assert float(line.split()[-1]) == 4.0


def test_an_admin_sets_and_clears_a_users_own_quotas(gateway: tuple[Served, str]) -> None:
    served, where = gateway
    with served.client("root") as root, served.client("bob") as bob:
        # Only an admin; bad bodies and unknown users answer with a code.
        refused = bob.patch("/v1/users/bob", json={"quotas": {"requests_per_minute": 100}})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "admin_required"
        bad = root.patch("/v1/users/bob", json={"quotas": {"requests_per_minute": -1}})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_quotas"
        missing = root.patch("/v1/users/nobody", json={"quotas": {"tokens_per_day": 5}})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "user_not_found"
        assert root.get("/v1/users/nobody").status_code == 404

        _fresh_minute()
        changed = root.patch("/v1/users/bob", json={"quotas": {"requests_per_minute": 4}})
        assert changed.status_code == 200, changed.text
        assert changed.json()["quotas"] == {"requests_per_minute": 4, "tokens_per_day": None}
        shown = root.get("/v1/users/bob").json()
        assert shown["quotas"]["requests_per_minute"] == 4
        assert shown["quota_usage"]["requests_per_minute"]["own"] is True
        statuses = [_turn(bob, "k", f"m{n}").status_code for n in range(5)]
        assert statuses == [200, 200, 200, 200, 429]
        # Cleared: the default (2) again, already used up this minute.
        cleared = root.patch("/v1/users/bob", json={"quotas": {"requests_per_minute": None}})
        assert cleared.json()["quotas"]["requests_per_minute"] is None
        assert _turn(bob, "k", "after clearing").status_code == 429
        # Modes untouched by a quotas-only PATCH, and listed users show quotas.
        listed = {u["name"]: u for u in root.get("/v1/users").json()["users"]}
        assert listed["bob"]["modes_enabled"] == []
        assert listed["bob"]["quotas"] == {"requests_per_minute": None, "tokens_per_day": None}

        # Tokens per day: the turn that reaches the limit runs, the next is refused.
        set_tokens = root.patch(
            "/v1/users/carol",
            json={"quotas": {"tokens_per_day": 5, "requests_per_minute": 1000}},
        )
        assert set_tokens.status_code == 200
    with served.client("carol") as carol:
        assert _turn(carol, "k", "a few words to count as tokens").status_code == 200
        deadline = time.monotonic() + 10
        used = 0
        while time.monotonic() < deadline and used < 5:
            used = carol.get("/v1/me/quotas").json()["quotas"]["tokens_per_day"]["used"]
            time.sleep(0.05)
        assert used >= 5
        _assert_quota_429(_turn(carol, "k", "refused by tokens"), "5 tokens per day", 86_400)
    rows = _db_rows(
        served, where, "SELECT COUNT(*) FROM quota_counters WHERE user_name = ?", "carol"
    )
    assert rows[0][0] == 2  # the day's tokens and the minute's requests
    # Erasing the user erases their counters.
    with served.client("root") as root:
        assert root.delete("/v1/users/carol").status_code == 200
    rows = _db_rows(
        served, where, "SELECT COUNT(*) FROM quota_counters WHERE user_name = ?", "carol"
    )
    assert rows[0][0] == 0


# --- two gateways, one PostgreSQL -----------------------------------------------------------


@pytest.mark.postgres
def test_two_gateways_on_one_postgresql_admit_exactly_the_quota(tmp_path: Path) -> None:
    quota = 15
    config = _config(tmp_path, None, f"requests_per_minute = {quota}")
    with (
        fresh_database_sync() as url,
        served_cluster(tmp_path, config, {"alice": ()}, database_url=url) as gateways,
    ):
        _fresh_minute(25)

        async def fire() -> list[int]:
            async with (
                httpx.AsyncClient(base_url=gateways[0].url, timeout=30) as one,
                httpx.AsyncClient(base_url=gateways[1].url, timeout=30) as two,
            ):
                headers = gateways[0].auth("alice")
                sent = [
                    (one if n % 2 == 0 else two).post(
                        f"/v1/sessions/k{n % 6}/messages",
                        json={"content": f"m{n}"},
                        headers=headers,
                    )
                    for n in range(3 * quota)
                ]
                return [r.status_code for r in await asyncio.gather(*sent)]

        statuses = asyncio.run(fire())
        assert statuses.count(200) == quota, statuses
        assert statuses.count(429) == 2 * quota, statuses
        stored = _rows(url, "SELECT COUNT(*) FROM messages WHERE role = 'user'")
        assert stored[0][0] == quota
