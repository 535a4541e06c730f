"""Routing and modes as pure rules (core/routing.py, core/modes.py).

Properties over random users, modes, unlocks, locks and clock jumps (forward and back):
no locked, expired, disabled or unknown mode ever routes; expiry is exact to the
microsecond; every decision names a valid key; seed 000's table is the default.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiongate.core.keys import validate_session_key
from sessiongate.core.modes import ModeState, ModeUnlock, active_unlock, mode_state, unlock_expiry
from sessiongate.core.routing import (
    DEFAULT_ROUTES,
    Route,
    RouteRequest,
    render_key,
    route,
    validate_label,
)
from sessiongate.errors import InvalidInput, InvalidSessionKey

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MODES = ("private", "work", "night")
USERS = ("prime", "alice", "bob")
MICRO = timedelta(microseconds=1)

offsets = st.integers(min_value=-3 * 3600 * 10**6, max_value=3 * 3600 * 10**6).map(
    lambda us: T0 + timedelta(microseconds=us)
)


@st.composite
def unlocks(draw: st.DrawFn) -> ModeUnlock:
    start = draw(offsets)
    ttl = timedelta(microseconds=draw(st.integers(1, 2 * 3600 * 10**6)))
    locked = draw(st.none() | st.integers(0, 3 * 3600 * 10**6))
    return ModeUnlock(
        unlock_id=f"u{draw(st.integers(0, 10**9))}",
        user=draw(st.sampled_from(USERS)),
        mode=draw(st.sampled_from(MODES)),
        unlocked_at=start,
        expires_at=start + ttl,
        unlocked_by="someone",
        locked_at=None if locked is None else start + timedelta(microseconds=locked),
        locked_by=None if locked is None else "someone",
    )


def oracle_holds(unlock: ModeUnlock, now: datetime) -> bool:
    """Written independently of `ModeUnlock.holds_at`: the half-open interval
    [unlocked_at, min(expires_at, locked_at))."""
    end = (
        unlock.expires_at if unlock.locked_at is None else min(unlock.expires_at, unlock.locked_at)
    )
    return unlock.unlocked_at <= now < end


@settings(max_examples=400, deadline=None)
@given(
    records=st.lists(unlocks(), max_size=8),
    now=offsets,
    mode=st.sampled_from((*MODES, "unknown")),
    enabled=st.frozensets(st.sampled_from(MODES)),
    configured=st.frozensets(st.sampled_from(MODES)),
)
def test_no_locked_mode_ever_routes(
    records: list[ModeUnlock],
    now: datetime,
    mode: str,
    enabled: frozenset[str],
    configured: frozenset[str],
) -> None:
    user_records = [r for r in records if r.user == "alice"]
    state = mode_state(mode, configured, enabled, user_records, now)
    holds = any(r.mode == mode and oracle_holds(r, now) for r in user_records)
    expected_active = mode in configured and mode in enabled and holds
    assert (state is ModeState.ACTIVE) == expected_active
    if mode not in configured:
        assert state is ModeState.UNKNOWN
    elif mode not in enabled:
        assert state is ModeState.NOT_ENABLED
    elif not holds:
        assert state is ModeState.LOCKED
    decision = route(
        RouteRequest("alice", False, "http", mode),
        (),
        {m: f"{m}-agent" for m in configured},
        state,
    )
    assert (decision.mode == mode) == expected_active
    if not expected_active:
        # The normal route, and the reason says why the mode did not count.
        assert decision.mode is None
        assert decision.key == "chat:alice"
        assert decision.agent == "main"
        assert decision.reason == state.value
    else:
        assert decision.key == f"mode:{mode}:alice"
        assert decision.agent == f"{mode}-agent"
        assert decision.reason == "mode_active"


@settings(max_examples=300, deadline=None)
@given(record=unlocks())
def test_expiry_is_exact_to_the_microsecond(record: ModeUnlock) -> None:
    end = (
        record.expires_at if record.locked_at is None else min(record.expires_at, record.locked_at)
    )
    if end > record.unlocked_at:
        assert record.holds_at(record.unlocked_at)
        assert record.holds_at(end - MICRO)
    assert not record.holds_at(end)
    assert not record.holds_at(record.unlocked_at - MICRO)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(("unlock", "lock", "jump")),
            st.sampled_from(MODES),
            st.integers(-7200, 7200),
        ),
        max_size=30,
    )
)
def test_random_unlocks_locks_and_clock_jumps_match_a_model(
    steps: list[tuple[str, str, int]],
) -> None:
    """A simple model of "unlocked until" per mode, driven with the real rules: after
    every step, the state the rules compute equals the model's."""
    now = T0
    records: list[ModeUnlock] = []
    limit = timedelta(minutes=30)
    for index, (action, mode, seconds) in enumerate(steps):
        if action == "jump":
            now = now + timedelta(seconds=seconds)
        elif action == "unlock":
            ttl = timedelta(seconds=abs(seconds) + 1)
            records.append(
                ModeUnlock(f"u{index}", "alice", mode, now, unlock_expiry(now, ttl, limit), "alice")
            )
        else:
            records = [
                r
                if r.mode != mode or not r.holds_at(now)
                else ModeUnlock(
                    r.unlock_id,
                    r.user,
                    r.mode,
                    r.unlocked_at,
                    r.expires_at,
                    r.unlocked_by,
                    now,
                    "a",
                )
                for r in records
            ]
        for candidate in MODES:
            expected = any(r.mode == candidate and oracle_holds(r, now) for r in records)
            state = mode_state(candidate, MODES, MODES, records, now)
            assert (state is ModeState.ACTIVE) == expected
            # No unlock ever outlives the mode's limit.
            found = active_unlock(records, candidate, now)
            if found is not None:
                assert found.expires_at - found.unlocked_at <= limit


def test_seed_000_table_is_the_default() -> None:
    primary = route(RouteRequest("prime", True, "http"), (), {}, None)
    other = route(RouteRequest("alice", False, "http"), (), {}, None)
    assert (primary.agent, primary.key, primary.rule) == ("main", "agent:main:main", None)
    assert (other.agent, other.key) == ("main", "chat:alice")
    assert DEFAULT_ROUTES[-1].matches(RouteRequest("x", False, "ws"), None)


def test_first_matching_route_wins_and_templates_render() -> None:
    routes = (
        Route(agent="voice", key="voice:{user}:{device}", channel="voice"),
        Route(agent="night", key="{mode}:{user}", mode="night"),
        Route(agent="main", key="{agent}:{channel}:{user}", user="bob"),
        Route(agent="main", key="chat:{user}"),
    )
    voice = route(RouteRequest("bob", False, "voice", device="kitchen"), routes, {}, None)
    assert (voice.agent, voice.key, voice.rule) == ("voice", "voice:bob:kitchen", 0)
    bob = route(RouteRequest("bob", False, "http"), routes, {}, None)
    assert (bob.key, bob.rule) == ("main:http:bob", 2)
    night = route(
        RouteRequest("alice", False, "http", mode="night"),
        routes,
        {"night": None},
        ModeState.ACTIVE,
    )
    assert (night.agent, night.key, night.mode, night.rule) == ("night", "night:alice", "night", 1)
    locked = route(
        RouteRequest("alice", False, "http", mode="night"),
        routes,
        {"night": None},
        ModeState.LOCKED,
    )
    assert (locked.key, locked.mode, locked.reason) == ("chat:alice", None, "mode_locked")
    device_default = route(RouteRequest("carol", False, "voice"), routes, {}, None)
    assert device_default.key == "voice:carol:default"


def test_no_configured_route_matches_falls_back_to_the_default_table() -> None:
    routes = (Route(agent="ops", key="ops:{user}", user="ops"),)
    decision = route(RouteRequest("prime", True, "http"), routes, {}, None)
    assert (decision.agent, decision.key, decision.rule) == ("main", "agent:main:main", None)


@given(name=st.text(min_size=0, max_size=80))
def test_labels_are_checked_before_they_reach_a_key(name: str) -> None:
    try:
        validate_label(name, "device")
    except InvalidInput as exc:
        refused: InvalidInput | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.code == "invalid_device"
        return
    key = render_key(
        "voice:{user}:{device}", RouteRequest("alice", False, "voice", device=name), "a", None
    )
    assert validate_session_key(key) == key


def test_a_template_that_renders_an_invalid_key_is_refused() -> None:
    with pytest.raises(InvalidSessionKey):
        render_key("x" * 199 + ":{user}", RouteRequest("alice", False, "http"), "main", None)


def test_unlock_expiry_never_exceeds_the_limit() -> None:
    limit = timedelta(minutes=10)
    assert unlock_expiry(T0, None, limit) == T0 + limit
    assert unlock_expiry(T0, timedelta(minutes=5), limit) == T0 + timedelta(minutes=5)
    assert unlock_expiry(T0, timedelta(hours=5), limit) == T0 + limit
