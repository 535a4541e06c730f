"""Modes (DESIGN.md §8): the mode store on SQLite and on PostgreSQL, the service's rules
with a manual clock (exact expiry, locks, re-unlocks, limits, admin only), the HTTP API
through a real gateway on loopback (who may enable, unlock and lock what, `/v1/me`, the
recorded history, hostile input) and `sessiongate users modes`."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from sessiongate.cli.main import app as cli_app
from sessiongate.config.routing import ModeConfig
from sessiongate.core.clock import ManualClock
from sessiongate.core.modes import ModeState, ModeUnlock
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.modes import ModeService
from sessiongate.store.modes import ModeStore
from sessiongate.store.postgres.modes import PostgresModeStore
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.postgres.users import PostgresUserStore
from sessiongate.store.sqlite.modes import SQLiteModeStore
from sessiongate.store.sqlite.store import SQLiteStore
from sessiongate.store.sqlite.users import SQLiteUserStore
from tests.conftest import BACKENDS, START, make_settings
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.pg import fresh_database

MODES = {
    "work": ModeConfig(unlock_ttl=timedelta(hours=1)),
    "focus": ModeConfig(unlock_ttl=timedelta(minutes=10)),
    "night": ModeConfig(),
}
ROOT = User("root", admin=True)
ALICE = User("alice")
BOB = User("bob")
US = timedelta(microseconds=1)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


async def refused(call: Any) -> tuple[str, int]:
    with pytest.raises(SessionGateError) as raised:
        await call
    return raised.value.code, raised.value.status


# -- the store, on both backends ----------------------------------------------------------


@pytest.fixture(params=BACKENDS)
async def rows(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ModeStore]:
    """A mode store over a fresh database holding the users alice, bob and root."""
    if request.param == "sqlite":
        sqlite = SQLiteStore.open(tmp_path / "modes.db")
        users = SQLiteUserStore(sqlite)
        for user in (ALICE, BOB, ROOT):
            await users.add_user(user, START)
        yield SQLiteModeStore(sqlite)
        await sqlite.close()
        return
    async with fresh_database() as url:
        pg = PostgresStore(url, pool_size=4)
        await pg.start()
        pg_users = PostgresUserStore(pg)
        for user in (ALICE, BOB, ROOT):
            await pg_users.add_user(user, START)
        yield PostgresModeStore(pg)
        await pg.close()


def unlock(
    unlock_id: str, mode: str, at: datetime, ttl: timedelta, user: str = "alice"
) -> ModeUnlock:
    return ModeUnlock(unlock_id, user, mode, at, at + ttl, unlocked_by=user)


async def test_enabled_modes_are_replaced_and_read_back(rows: ModeStore) -> None:
    assert await rows.enabled("alice") == ()
    changed = await rows.set_enabled("alice", ["focus", "work"], START, "root")
    assert changed == User("alice", modes=("focus", "work"))
    assert await rows.enabled("alice") == ("focus", "work")
    assert await rows.enabled("bob") == ()
    assert await rows.set_enabled("nobody", ["work"], START, "root") is None
    assert await rows.enabled("nobody") is None
    admin = await rows.set_enabled("root", ["night"], START, "root")
    assert admin == User("root", admin=True, modes=("night",))  # flags untouched


async def test_unlocks_round_trip_to_the_microsecond(rows: ModeStore) -> None:
    at = START + timedelta(microseconds=123_457)
    added = unlock("u1", "work", at, timedelta(minutes=30))
    await rows.add_unlock(added)
    assert await rows.history("alice", 10) == [added]
    assert await rows.holding("alice", at) == [added]
    await rows.set_enabled("alice", ["work"], at, "root")
    assert await rows.access("alice", "work", at) == (("work",), [added])


async def test_access_keeps_only_what_may_hold_at_now(rows: ModeStore) -> None:
    await rows.set_enabled("alice", ["work"], START, "root")
    first = unlock("u1", "work", START, timedelta(minutes=10))
    await rows.add_unlock(first)
    await rows.add_unlock(unlock("u2", "focus", START, timedelta(hours=1)))
    await rows.add_unlock(unlock("u3", "work", START, timedelta(hours=1), user="bob"))
    end = first.expires_at
    assert await rows.access("alice", "work", end - US) == (("work",), [first])
    assert await rows.access("alice", "work", end) == (("work",), [])  # expired exactly here
    (bobs,) = await rows.history("bob", 1)
    assert bobs.unlock_id == "u3"
    assert await rows.access("bob", "work", START) == ((), [bobs])  # not enabled, still listed
    assert await rows.access("nobody", "work", START) is None
    assert await rows.access("root", "work", START) == ((), [])


async def test_a_lock_ends_what_holds_of_that_user_and_mode_only(rows: ModeStore) -> None:
    await rows.add_unlock(unlock("u1", "work", START, timedelta(minutes=10)))
    await rows.add_unlock(unlock("u2", "work", START, timedelta(hours=1)))
    await rows.add_unlock(unlock("u0", "work", START - timedelta(hours=2), timedelta(hours=1)))
    await rows.add_unlock(unlock("u3", "focus", START, timedelta(hours=1)))
    await rows.add_unlock(unlock("u4", "work", START, timedelta(hours=1), user="bob"))
    at = START + timedelta(minutes=5)
    ended = await rows.lock("alice", "work", at, "alice")
    assert [(u.unlock_id, u.locked_at, u.locked_by) for u in ended] == [
        ("u1", at, "alice"),
        ("u2", at, "alice"),
    ]
    assert await rows.lock("alice", "work", at + US, "alice") == []  # nothing left to lock
    assert [u.unlock_id for u in await rows.holding("alice", at)] == ["u3"]
    assert [u.unlock_id for u in await rows.holding("bob", at)] == ["u4"]
    history = {u.unlock_id: u for u in await rows.history("alice", 10)}
    assert history["u0"].locked_at is None  # expired before the lock: left as it was
    assert history["u1"].locked_at == at and history["u3"].locked_at is None


async def test_disabling_a_mode_locks_its_running_unlocks(rows: ModeStore) -> None:
    await rows.set_enabled("alice", ["focus", "work"], START, "root")
    await rows.add_unlock(unlock("u1", "work", START, timedelta(hours=1)))
    await rows.add_unlock(unlock("u2", "focus", START, timedelta(minutes=10)))
    at = START + timedelta(minutes=1)
    assert await rows.set_enabled("alice", ["focus"], at, "root") is not None
    by_id = {u.unlock_id: u for u in await rows.history("alice", 10)}
    assert (by_id["u1"].locked_at, by_id["u1"].locked_by) == (at, "root")
    assert (by_id["u2"].locked_at, by_id["u2"].locked_by) == (None, None)
    await rows.set_enabled("alice", [], at, "root")
    assert (await rows.history("alice", 10))[0].locked_by == "root"
    assert await rows.holding("alice", at) == []


async def test_history_is_newest_first_and_limited(rows: ModeStore) -> None:
    for n in range(5):
        await rows.add_unlock(unlock(f"u{n}", "work", START + n * timedelta(minutes=1), US))
    assert [u.unlock_id for u in await rows.history("alice", 3)] == ["u4", "u3", "u2"]
    assert await rows.history("bob", 3) == []


async def test_the_database_refuses_rows_the_service_never_writes(rows: ModeStore) -> None:
    bad = [
        unlock("b1", "work", START, timedelta(0)),  # expires when it starts
        unlock("b2", "work", START, timedelta(minutes=1), user="nobody"),  # no such user
        unlock("b3", "", START, timedelta(minutes=1)),
        ModeUnlock("b4", "alice", "work", START, START + US, "alice", locked_at=START),
    ]
    for row in bad:
        with pytest.raises(Exception):  # noqa: B017, PT011 - each store has its own error
            await rows.add_unlock(row)
    assert await rows.history("alice", 10) == []


def test_the_access_query_is_one_indexed_lookup(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "plan.db")
    try:
        from sessiongate.store.sqlite.modes import _ACCESS

        plan = " ".join(
            str(row[3])
            for row in store.connection.execute(
                "EXPLAIN QUERY PLAN " + _ACCESS, {"mode": "work", "now": 0, "user": "alice"}
            )
        )
        assert "mode_unlocks_by_mode" in plan and "SCAN" not in plan, plan
    finally:
        store.connection.close()


# -- the service, on both stores ----------------------------------------------------------


@pytest.fixture
async def engine(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> AsyncIterator[Engine]:
    settings = make_settings(tmp_path, database_url=database_url)
    built = build_engine(
        settings.model_copy(update={"modes": MODES}), clock=clock, models={"scripted": scripted}
    )
    await built.start()
    for name, admin in (("alice", False), ("bob", False), ("root", True)):
        await built.users.add(name, admin=admin)
    yield built
    await built.aclose()


def modes_of(engine: Engine) -> ModeService:
    assert engine.modes is not None
    return engine.modes


async def test_an_unlock_holds_until_exactly_its_expiry(engine: Engine, clock: ManualClock) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["focus", "work"])
    assert await modes.state(ALICE, "work") is ModeState.LOCKED
    made = await modes.unlock(ALICE, "work", timedelta(minutes=30))
    assert (made.user, made.mode, made.unlocked_by) == ("alice", "work", "alice")
    assert (made.unlocked_at, made.expires_at) == (START, START + timedelta(minutes=30))
    assert await modes.state(ALICE, "work") is ModeState.ACTIVE
    assert await modes.state(ALICE, "focus") is ModeState.LOCKED
    clock.set(made.expires_at - US)
    assert await modes.state(ALICE, "work") is ModeState.ACTIVE
    assert await modes.unlocks("alice") == [made]
    clock.set(made.expires_at)
    assert await modes.state(ALICE, "work") is ModeState.LOCKED
    assert await modes.unlocks("alice") == []
    assert await modes.unlocks("alice", made.expires_at - US) == [made]


async def test_no_ttl_means_the_modes_unlock_ttl_which_is_also_the_most(
    engine: Engine, clock: ManualClock
) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["focus", "night"])
    assert (await modes.unlock(ALICE, "focus")).expires_at == START + timedelta(minutes=10)
    assert (await modes.unlock(ALICE, "night")).expires_at == START + timedelta(hours=1)
    exact = await modes.unlock(ALICE, "focus", timedelta(minutes=10))
    assert exact.expires_at == START + timedelta(minutes=10)
    for ttl in (timedelta(minutes=10) + US, timedelta(days=3650), timedelta(0), -US):
        with pytest.raises(SessionGateError) as raised:
            await modes.unlock(ALICE, "focus", ttl)
        assert (raised.value.code, raised.value.status) == ("invalid_ttl", 400)
        assert "10m" in raised.value.message  # names the limit
    assert len(await modes.history("alice")) == 3  # nothing refused was recorded


async def test_a_lock_ends_an_unlock_and_a_new_unlock_works(
    engine: Engine, clock: ManualClock
) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["work"])
    first = await modes.unlock(ALICE, "work")
    clock.advance(timedelta(minutes=5))
    lock = await modes.lock(ALICE, "work")
    assert lock.locked_at == START + timedelta(minutes=5)
    assert [u.unlock_id for u in lock.ended] == [first.unlock_id]
    assert await modes.state(ALICE, "work") is ModeState.LOCKED
    again = await modes.lock(ALICE, "work")  # idempotent: nothing more to end
    assert again.ended == ()
    clock.advance(timedelta(minutes=1))
    second = await modes.unlock(ALICE, "work", timedelta(minutes=2))
    assert await modes.state(ALICE, "work") is ModeState.ACTIVE
    history = await modes.history("alice")
    assert [u.unlock_id for u in history] == [second.unlock_id, first.unlock_id]
    assert (history[1].locked_at, history[1].locked_by) == (lock.locked_at, "alice")
    assert history[0].locked_at is None


async def test_unlocking_needs_a_configured_enabled_mode(engine: Engine) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["work"])
    assert await refused(modes.unlock(ALICE, "focus")) == ("mode_not_enabled", 403)
    assert await refused(modes.unlock(BOB, "work")) == ("mode_not_enabled", 403)
    assert await refused(modes.unlock(ALICE, "nope")) == ("mode_not_found", 404)
    for bad in ("../x", "WORK", "", "x" * 10_000, "a b", "wörk", "-x"):
        assert await refused(modes.unlock(ALICE, bad)) == ("invalid_mode", 400)
        assert await refused(modes.lock(ALICE, bad)) == ("invalid_mode", 400)
        assert await modes.state(ALICE, bad) is ModeState.UNKNOWN
    assert await refused(modes.lock(ALICE, "nope")) == ("mode_not_found", 404)
    assert await modes.state(ALICE, "nope") is ModeState.UNKNOWN
    assert await modes.state(ALICE, "focus") is ModeState.NOT_ENABLED
    assert await modes.history("alice") == []


async def test_one_users_unlock_is_not_anothers(engine: Engine) -> None:
    modes = modes_of(engine)
    for name in ("alice", "bob"):
        await modes.set_enabled(ROOT, name, ["work"])
    await modes.unlock(ALICE, "work")
    assert await modes.state(ALICE, "work") is ModeState.ACTIVE
    assert await modes.state(BOB, "work") is ModeState.LOCKED
    assert (await modes.lock(BOB, "work")).ended == ()
    assert await modes.state(ALICE, "work") is ModeState.ACTIVE
    assert await modes.unlocks("bob") == []


async def test_only_an_admin_enables_modes(engine: Engine) -> None:
    modes = modes_of(engine)
    for actor in (ALICE, BOB, User("alice", primary=True)):
        assert await refused(modes.set_enabled(actor, "alice", ["work"])) == (
            "admin_required",
            403,
        )
        # Asked about a user who does not exist, anyone else learns nothing either.
        assert await refused(modes.set_enabled(actor, "nobody", ["nope"])) == (
            "admin_required",
            403,
        )
        code = await refused(modes.change_enabled(actor, "alice", enable=["work"]))
        assert code == ("admin_required", 403)
    assert await modes.enabled("alice") == ()
    assert await refused(modes.set_enabled(ROOT, "nobody", ["work"])) == ("user_not_found", 404)
    assert await refused(modes.set_enabled(ROOT, "a b", ["work"])) == ("invalid_user_name", 400)
    assert await refused(modes.set_enabled(ROOT, "alice", ["nope"])) == ("unknown_mode", 400)
    assert await refused(modes.set_enabled(ROOT, "alice", ["../x"])) == ("invalid_mode", 400)
    assert await refused(modes.set_enabled(ROOT, "alice", "work")) == ("invalid_mode", 400)
    user = await modes.set_enabled(ROOT, "alice", ["work", "focus", "work"])
    assert user.modes == ("focus", "work")  # de-duplicated, by name
    assert await modes.enabled("alice") == ("focus", "work")


async def test_disabling_a_mode_ends_its_unlock_recorded_as_the_admins(
    engine: Engine, clock: ManualClock
) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["work"])
    await modes.unlock(ALICE, "work")
    clock.advance(timedelta(minutes=1))
    await modes.set_enabled(ROOT, "alice", [])
    # The user object the caller holds may be stale; the store's word counts.
    assert await modes.state(User("alice", modes=("work",)), "work") is ModeState.NOT_ENABLED
    await modes.set_enabled(ROOT, "alice", ["work"])
    assert await modes.state(ALICE, "work") is ModeState.LOCKED  # not revived
    (ended,) = await modes.history("alice")
    assert (ended.locked_at, ended.locked_by) == (START + timedelta(minutes=1), "root")


async def test_change_enabled_adds_and_drops(engine: Engine) -> None:
    modes = modes_of(engine)
    user = await modes.change_enabled(ROOT, "alice", enable=["work", "night"])
    assert user.modes == ("night", "work")
    user = await modes.change_enabled(ROOT, "alice", enable=["focus"], disable=["night"])
    assert user.modes == ("focus", "work")
    code = await refused(modes.change_enabled(ROOT, "alice", enable=["work"], disable=["work"]))
    assert code == ("conflicting_modes", 400)
    assert await refused(modes.change_enabled(ROOT, "alice", disable=["nope"])) == (
        "unknown_mode",
        400,
    )
    assert await refused(modes.change_enabled(ROOT, "nobody", enable=["work"])) == (
        "user_not_found",
        404,
    )
    assert await modes.enabled("alice") == ("focus", "work")


async def test_a_mode_no_longer_configured_can_still_be_disabled(engine: Engine) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["work"])
    smaller = ModeService(modes.store, modes.clock, {"focus": MODES["focus"]}, modes.ids)
    assert await smaller.state(ALICE, "work") is ModeState.UNKNOWN
    assert await refused(smaller.change_enabled(ROOT, "alice", enable=["focus"])) == (
        "unknown_mode",
        400,
    )
    user = await smaller.change_enabled(ROOT, "alice", enable=["focus"], disable=["work"])
    assert user.modes == ("focus",)


async def test_overview_shows_every_configured_mode(engine: Engine, clock: ManualClock) -> None:
    modes = modes_of(engine)
    await modes.set_enabled(ROOT, "alice", ["focus", "work"])
    short = await modes.unlock(ALICE, "work", timedelta(minutes=5))
    long = await modes.unlock(ALICE, "work", timedelta(minutes=50))
    views = {v.name: v for v in await modes.overview(ALICE)}
    assert list(views) == ["focus", "night", "work"]
    assert views["work"].unlock == long and views["work"].state is ModeState.ACTIVE
    assert views["focus"].unlock is None and views["focus"].state is ModeState.LOCKED
    assert not views["night"].enabled and views["night"].state is ModeState.NOT_ENABLED
    assert views["focus"].unlock_ttl == timedelta(minutes=10)
    clock.set(short.expires_at)
    assert (await modes.overview(ALICE))[2].unlock == long  # the longer one still holds


async def test_state_asks_the_store_once(tmp_path: Path, clock: ManualClock) -> None:
    settings = make_settings(tmp_path).model_copy(update={"modes": MODES})
    built = build_engine(settings, clock=clock, models={"scripted": ScriptedModel()})
    try:
        await built.users.add("alice")
        modes = modes_of(built)
        await modes.set_enabled(ROOT, "alice", ["work"])
        await modes.unlock(ALICE, "work")
        assert isinstance(built.store, SQLiteStore)
        statements: list[str] = []
        built.store.connection.set_trace_callback(statements.append)
        assert await modes.state(ALICE, "work") is ModeState.ACTIVE
        assert await modes.state(ALICE, "nope") is ModeState.UNKNOWN  # no query at all
        built.store.connection.set_trace_callback(None)
        assert len(statements) == 1 and "mode_unlocks" in statements[0]
    finally:
        await built.aclose()


# -- the API through a real gateway -------------------------------------------------------

HTTP_START = datetime(2026, 4, 1, 8, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("modes"),
        modes={"work": {"unlock_ttl": "1h"}, "focus": {"unlock_ttl": "10m"}},
    )
    with running_gateway(settings, {"scripted": ScriptedModel()}) as gateway:
        yield gateway


@pytest.fixture
def http_clock(gw: Gateway) -> ManualClock:
    """The gateway's mode service on a manual clock, a day on for each test (so nothing
    an earlier test unlocked still holds), with every user's modes disabled."""
    modes = modes_of(gw.engine)
    clock = ManualClock(HTTP_START)
    if isinstance(modes.clock, ManualClock):
        clock.set(modes.clock.now() + timedelta(days=1))
    modes.clock = clock
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        for name in ("prime", "alice", "bob", "root"):
            reset = c.patch(
                f"/v1/users/{name}", json={"modes_enabled": []}, headers=gw.auth("root")
            )
            assert reset.status_code == 200, reset.text
    return clock


@pytest.fixture
def client(gw: Gateway, http_clock: ManualClock) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        yield c


def me(gw: Gateway, client: httpx.Client, user: str) -> dict[str, Any]:
    answer = client.get("/v1/me", headers=gw.auth(user))
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def mode_in(body: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [m for m in body["modes"] if m["name"] == name]
    assert len(found) == 1
    return found[0]


def enable(gw: Gateway, client: httpx.Client, user: str, modes: list[str]) -> httpx.Response:
    return client.patch(f"/v1/users/{user}", json={"modes_enabled": modes}, headers=gw.auth("root"))


def test_me_shows_the_user_and_every_mode(gw: Gateway, client: httpx.Client) -> None:
    body = me(gw, client, "alice")
    assert set(body) == {"name", "primary", "admin", "modes", "unlocks"}
    assert (body["name"], body["primary"], body["admin"]) == ("alice", False, False)
    assert [m["name"] for m in body["modes"]] == ["focus", "work"]
    assert '"unlock_ttl_seconds":600,' in client.get("/v1/me", headers=gw.auth("bob")).text
    assert mode_in(body, "focus") == {
        "name": "focus",
        "enabled": False,
        "unlocked": False,
        "expires_at": None,
        "unlock_ttl_seconds": 600,
        "state": "mode_not_enabled",
    }
    prime = me(gw, client, "prime")
    assert prime["primary"] is True and me(gw, client, "root")["admin"] is True
    assert client.get("/v1/me").status_code == 401


def test_non_admins_can_never_enable_modes(gw: Gateway, client: httpx.Client) -> None:
    for user in ("alice", "bob", "prime"):
        attempts = [
            ("PATCH", "/v1/users/alice", {"modes_enabled": ["work"]}),
            ("PATCH", f"/v1/users/{user}", {"modes_enabled": ["work", "focus"]}),
            ("PATCH", "/v1/users/nobody", {"modes_enabled": ["work"]}),
            ("PATCH", "/v1/users/alice", {"modes_enabled": "x" * 10_000}),
            ("PATCH", "/v1/users/alice", {"admin": True}),
            ("GET", "/v1/users", None),
        ]
        for method, path, body in attempts:
            answer = client.request(method, path, json=body, headers=gw.auth(user))
            assert answer.status_code == 403, (user, path, answer.text)
            assert answer.json()["error"]["code"] == "admin_required"
    for user in ("alice", "bob", "prime"):
        assert not any(m["enabled"] for m in me(gw, client, user)["modes"])
        assert me(gw, client, user)["admin"] is False
    assert client.patch("/v1/users/alice", json={"modes_enabled": ["work"]}).status_code == 401


def test_an_admin_enables_and_disables_modes(gw: Gateway, client: httpx.Client) -> None:
    answer = enable(gw, client, "alice", ["work", "focus"])
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "name": "alice",
        "primary": False,
        "admin": False,
        "modes_enabled": ["focus", "work"],
        "quotas": {"requests_per_minute": None, "tokens_per_day": None},  # the defaults
    }
    listed = client.get("/v1/users", headers=gw.auth("root")).json()["users"]
    assert {u["name"]: u["modes_enabled"] for u in listed} == {
        "alice": ["focus", "work"],
        "bob": [],
        "prime": [],
        "root": [],
    }
    assert mode_in(me(gw, client, "alice"), "work")["state"] == "mode_locked"
    assert enable(gw, client, "alice", ["focus"]).json()["modes_enabled"] == ["focus"]
    assert mode_in(me(gw, client, "alice"), "work")["enabled"] is False


def test_unlock_requires_the_mode_enabled(gw: Gateway, client: httpx.Client) -> None:
    before = me(gw, client, "bob")["unlocks"]
    refused = client.post("/v1/modes/work/unlock", json={}, headers=gw.auth("bob"))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "mode_not_enabled"
    assert me(gw, client, "bob")["unlocks"] == before  # nothing recorded
    enable(gw, client, "bob", ["work"])
    allowed = client.post("/v1/modes/work/unlock", headers=gw.auth("bob"))  # no body at all
    assert allowed.status_code == 200, allowed.text
    unknown = client.post("/v1/modes/nope/unlock", headers=gw.auth("bob"))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "mode_not_found"


def test_unlock_then_expiry_shows_in_me(
    gw: Gateway, client: httpx.Client, http_clock: ManualClock
) -> None:
    enable(gw, client, "alice", ["work"])
    now = http_clock.now()
    answer = client.post("/v1/modes/work/unlock", json={"ttl": "30m"}, headers=gw.auth("alice"))
    assert answer.status_code == 200, answer.text
    expected_end = (now + timedelta(minutes=30)).isoformat().replace("+00:00", "Z")
    assert answer.json() == {
        "mode": "work",
        "unlocked_at": now.isoformat().replace("+00:00", "Z"),
        "expires_at": expected_end,
    }
    work = mode_in(me(gw, client, "alice"), "work")
    assert (work["enabled"], work["unlocked"], work["state"]) == (True, True, "mode_active")
    assert work["expires_at"] == expected_end and work["unlock_ttl_seconds"] == 3600
    http_clock.advance(timedelta(minutes=30) - US)
    assert mode_in(me(gw, client, "alice"), "work")["unlocked"] is True
    http_clock.advance(US)
    work = mode_in(me(gw, client, "alice"), "work")
    assert (work["unlocked"], work["expires_at"], work["state"]) == (False, None, "mode_locked")
    seconds = client.post("/v1/modes/work/unlock", json={"ttl": 90}, headers=gw.auth("alice"))
    assert seconds.json()["expires_at"] == (
        (http_clock.now() + timedelta(seconds=90)).isoformat().replace("+00:00", "Z")
    )


def test_one_users_unlock_does_not_unlock_anothers(gw: Gateway, client: httpx.Client) -> None:
    for user in ("alice", "bob"):
        enable(gw, client, user, ["work"])
    bobs_before = me(gw, client, "bob")["unlocks"]
    assert client.post("/v1/modes/work/unlock", headers=gw.auth("alice")).status_code == 200
    assert mode_in(me(gw, client, "bob"), "work")["unlocked"] is False
    locked = client.post("/v1/modes/work/lock", headers=gw.auth("bob"))
    assert locked.status_code == 200 and locked.json()["ended"] == 0
    assert mode_in(me(gw, client, "alice"), "work")["unlocked"] is True
    assert me(gw, client, "bob")["unlocks"] == bobs_before  # alice's is not in bob's history


def test_every_unlock_and_lock_is_in_the_history(
    gw: Gateway, client: httpx.Client, http_clock: ManualClock
) -> None:
    enable(gw, client, "prime", ["work", "focus"])
    prime = gw.auth("prime")
    t0 = http_clock.now()
    client.post("/v1/modes/work/unlock", json={"ttl": "20m"}, headers=prime)
    http_clock.advance(timedelta(minutes=1))
    lock = client.post("/v1/modes/work/lock", headers=prime)
    assert lock.status_code == 200
    t1 = http_clock.now()
    assert lock.json() == {"mode": "work", "locked": True, "locked_at": iso(t1), "ended": 1}
    idle = client.post("/v1/modes/work/lock", headers=prime).json()
    assert idle["locked"] is True and idle["ended"] == 0  # locking twice is fine
    http_clock.advance(timedelta(minutes=1))
    t2 = http_clock.now()
    client.post("/v1/modes/focus/unlock", json={"ttl": "5m"}, headers=prime)
    http_clock.advance(timedelta(minutes=1))
    t3 = http_clock.now()
    enable(gw, client, "prime", ["work"])  # the admin disables focus: its unlock ends
    assert me(gw, client, "prime")["unlocks"] == [
        {
            "mode": "focus",
            "unlocked_at": iso(t2),
            "expires_at": iso(t2 + timedelta(minutes=5)),
            "unlocked_by": "prime",
            "locked_at": iso(t3),
            "locked_by": "root",
        },
        {
            "mode": "work",
            "unlocked_at": iso(t0),
            "expires_at": iso(t0 + timedelta(minutes=20)),
            "unlocked_by": "prime",
            "locked_at": iso(t1),
            "locked_by": "prime",
        },
    ]


def test_me_lists_at_most_fifty_unlocks(gw: Gateway, client: httpx.Client) -> None:
    enable(gw, client, "root", ["focus"])
    for _ in range(52):
        assert client.post("/v1/modes/focus/unlock", headers=gw.auth("root")).status_code == 200
    assert len(me(gw, client, "root")["unlocks"]) == 50


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


LONG_NAME = "w" * 10_000


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/modes/work/unlock", {"ttl": "99999999999d"}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "1" * 70}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": 1e308}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": 10**400}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": -(10**400)}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": -5}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": 0}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "0s"}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "2h"}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": 3601}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "soon"}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "-5m"}, 400, "invalid_ttl"),
        ("POST", "/v1/modes/work/unlock", {"ttl": True}, 400, "invalid_request"),
        ("POST", "/v1/modes/work/unlock", {"ttl": [60]}, 400, "invalid_request"),
        ("POST", "/v1/modes/work/unlock", {"ttl": "5m", "mode": "focus"}, 400, "invalid_request"),
        ("POST", "/v1/modes/work/unlock", [1], 400, "invalid_request"),
        ("POST", "/v1/modes/..%2Fx/unlock", {}, 400, "invalid_mode"),
        ("POST", "/v1/modes/%2E%2E%2Fx/lock", None, 400, "invalid_mode"),
        ("POST", f"/v1/modes/{LONG_NAME}/unlock", {}, 400, "invalid_mode"),
        ("POST", f"/v1/modes/{LONG_NAME}/lock", None, 400, "invalid_mode"),
        ("POST", "/v1/modes/WORK/unlock", {}, 400, "invalid_mode"),
        ("POST", "/v1/modes/w%00rk/unlock", {}, 400, "invalid_mode"),
        ("POST", "/v1/modes/%FF%FE/unlock", {}, 400, "invalid_mode"),
        ("POST", "/v1/modes/a/b/lock", None, 400, "invalid_mode"),
        ("POST", "/v1/modes/nope/lock", None, 404, "mode_not_found"),
        ("GET", "/v1/modes/work/unlock", None, 405, "method_not_allowed"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": ["nope"]}, 400, "unknown_mode"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": ["../x"]}, 400, "invalid_mode"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": [LONG_NAME]}, 400, "invalid_mode"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": ["w"] * 33}, 400, "invalid_request"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": "work"}, 400, "invalid_request"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": [5]}, 400, "invalid_request"),
        ("PATCH", "/v1/users/alice", {}, 400, "invalid_request"),
        ("PATCH", "/v1/users/alice", {"modes_enabled": [], "admin": True}, 400, "invalid_request"),
        ("PATCH", "/v1/users/a%20b", {"modes_enabled": []}, 400, "invalid_user_name"),
        ("PATCH", "/v1/users/nobody", {"modes_enabled": ["work"]}, 404, "user_not_found"),
    ],
)
def test_hostile_requests_get_a_4xx_with_a_code(
    gw: Gateway,
    client: httpx.Client,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    enable(gw, client, "alice", ["work"])
    user = "root" if method == "PATCH" else "alice"
    answer = client.request(method, path, json=body, headers=gw.auth(user))
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == code
    # Nothing refused changed alice's modes or unlocked anything.
    after = me(gw, client, "alice")
    assert [m["name"] for m in after["modes"] if m["enabled"]] == ["work"]
    assert not any(m["unlocked"] for m in after["modes"])


@pytest.mark.parametrize("path", ["/v1/modes/work/unlock", "/v1/users/alice"])
def test_raw_bodies_that_are_not_json_are_refused(
    gw: Gateway, client: httpx.Client, path: str
) -> None:
    enable(gw, client, "alice", ["work"])
    method = "PATCH" if path.startswith("/v1/users") else "POST"
    for content, media_type in (
        (b'{"ttl": ', "application/json"),
        (b"\xff\xfe garbage", "application/json"),
        (b'{"ttl": NaN}', "application/json"),
        (b"ttl=5m", "application/x-www-form-urlencoded"),
        (b"30m", "text/plain"),
    ):
        answer = client.request(
            method,
            path,
            content=content,
            headers={**gw.auth("root"), "Content-Type": media_type},
        )
        assert 400 <= answer.status_code < 500, (content, answer.text)
        assert answer.json()["error"]["code"], answer.text
    after = me(gw, client, "alice")
    assert [m["name"] for m in after["modes"] if m["enabled"]] == ["work"]


# -- the command line ---------------------------------------------------------------------


def test_users_modes_on_the_command_line(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[modes.work]\nunlock_ttl = "2h"\n[modes.focus]\n',
        encoding="utf-8",
    )
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli_app, [*args, "--config", str(config)], env={"COLUMNS": "200"})

    assert run("users", "add", "carol").exit_code == 0
    shown = run("users", "modes", "carol")
    assert shown.exit_code == 0, shown.output
    assert "carol: modes enabled: (none)" in shown.stdout
    enabled = run("users", "modes", "carol", "--enable", "work", "--enable", "focus")
    assert enabled.exit_code == 0, enabled.output
    assert "carol: modes enabled: focus, work" in enabled.stdout
    dropped = run("users", "modes", "carol", "--disable", "focus")
    assert "carol: modes enabled: work" in dropped.stdout

    unknown_mode = run("users", "modes", "carol", "--enable", "nope")
    assert unknown_mode.exit_code == 1 and "nope" in unknown_mode.stderr
    assert "Traceback" not in unknown_mode.output
    unknown_user = run("users", "modes", "nobody", "--enable", "work")
    assert unknown_user.exit_code == 1 and "no user 'nobody'" in unknown_user.stderr
    bad_name = run("users", "modes", "carol", "--enable", "../x")
    assert bad_name.exit_code == 1 and "mode name" in bad_name.stderr
    assert "carol: modes enabled: work" in run("users", "modes", "carol").stdout

    # What the CLI changed is what the gateway reads.
    with sqlite3.connect(tmp_path / "sessiongate.db") as db:
        (stored,) = db.execute("SELECT modes FROM users WHERE name = 'carol'").fetchone()
    assert stored == '["work"]'
