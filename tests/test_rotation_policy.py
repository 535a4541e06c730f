"""Pure lifecycle rules: idle windows, day boundaries across DST, `/new` parsing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import (
    ActionKind,
    LifecycleMode,
    LifecyclePolicy,
    SemanticPolicy,
    day_key,
    parse_new_command,
    semantic_action,
    temporal_action,
)
from sessiongate.core.segments import RotationReason, Segment, SegmentStatus

NY = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def segment(created: datetime, last: datetime | None = None, count: int = 2) -> Segment:
    return Segment(
        session_id="s",
        key=KeyRef("alice", "k"),
        status=SegmentStatus.LATEST,
        created_at=created,
        archived_at=None,
        parent_ids=(),
        continues=(),
        cleared_after_seq=0,
        context_started_at=created,
        message_count=count,
        last_activity_at=last or created,
        created_reason=None,
    )


def policy(**kwargs: object) -> LifecyclePolicy:
    base = LifecyclePolicy(idle_window=None, day_boundary=None, timezone=ZoneInfo("UTC"))
    return replace(base, **kwargs)  # type: ignore[arg-type]


def local(
    tz: ZoneInfo,
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    *,
    fold: int = 0,
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=tz, fold=fold).astimezone(UTC)


# -- idle -------------------------------------------------------------------------


def test_idle_gap_equal_to_window_does_not_rotate() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    p = policy(idle_window=timedelta(hours=12))
    assert temporal_action(segment(start), start + timedelta(hours=12), p) is None
    action = temporal_action(segment(start), start + timedelta(hours=12, microseconds=1), p)
    assert action is not None and action.reason is RotationReason.IDLE


def test_idle_off_never_rotates() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert temporal_action(segment(start), start + timedelta(days=400), policy()) is None


def test_empty_segment_never_rotates() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    p = policy(idle_window=timedelta(seconds=1), day_boundary=time(4))
    assert temporal_action(segment(start, count=0), start + timedelta(days=3), p) is None


def test_clock_stepping_backwards_does_not_rotate() -> None:
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    p = policy(idle_window=timedelta(hours=1), day_boundary=time(4))
    assert temporal_action(segment(start), start - timedelta(days=2), p) is None


def test_idle_is_reported_when_both_triggers_hold() -> None:
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    p = policy(idle_window=timedelta(hours=1), day_boundary=time(4))
    action = temporal_action(segment(start), start + timedelta(days=1), p)
    assert action is not None and action.reason is RotationReason.IDLE


def test_legacy_mode_turns_rotation_into_in_place_clear() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    p = policy(idle_window=timedelta(hours=1), mode=LifecycleMode.LEGACY)
    action = temporal_action(segment(start), start + timedelta(hours=2), p)
    assert action is not None and action.kind is ActionKind.CLEAR_IN_PLACE


# -- day boundary ----------------------------------------------------------------------


def test_day_boundary_exact_instant_rotates_one_microsecond_before_does_not() -> None:
    p = policy(day_boundary=time(4), timezone=BERLIN)
    created = local(BERLIN, 2026, 6, 1, 22, 0)
    boundary = local(BERLIN, 2026, 6, 2, 4, 0)
    assert temporal_action(segment(created), boundary - timedelta(microseconds=1), p) is None
    action = temporal_action(segment(created), boundary, p)
    assert action is not None and action.reason is RotationReason.DAY_BOUNDARY


def test_segment_created_on_the_boundary_lives_a_whole_day() -> None:
    p = policy(day_boundary=time(4), timezone=BERLIN)
    created = local(BERLIN, 2026, 6, 2, 4, 0)
    almost = local(BERLIN, 2026, 6, 3, 3, 59, 59)
    assert temporal_action(segment(created), almost, p) is None
    assert temporal_action(segment(created), local(BERLIN, 2026, 6, 3, 4, 0), p) is not None


def test_day_boundary_uses_the_configured_timezone_not_utc() -> None:
    p = policy(day_boundary=time(4), timezone=NY)
    created = local(NY, 2026, 6, 1, 20, 0)  # 00:00 UTC on June 2
    # 05:00 UTC is 01:00 in New York: UTC's 04:00 has passed, New York's has not.
    assert temporal_action(segment(created), datetime(2026, 6, 2, 5, tzinfo=UTC), p) is None
    assert temporal_action(segment(created), local(NY, 2026, 6, 2, 4, 0), p) is not None


def test_day_boundary_in_spring_forward_gap_fires_at_the_transition() -> None:
    # New York, 2026-03-08: clocks jump from 02:00 EST to 03:00 EDT; 02:30 never happens.
    p = policy(day_boundary=time(2, 30), timezone=NY)
    created = local(NY, 2026, 3, 7, 23, 0)
    transition = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 02:00 EST == 03:00 EDT
    assert temporal_action(segment(created), transition - timedelta(seconds=1), p) is None
    assert temporal_action(segment(created), transition, p) is not None


def test_day_boundary_in_fall_back_fold_fires_once() -> None:
    # New York, 2026-11-01: 01:00-02:00 happens twice (EDT, then EST).
    p = policy(day_boundary=time(1, 30), timezone=NY)
    before = local(NY, 2026, 11, 1, 1, 0, fold=0)
    first = local(NY, 2026, 11, 1, 1, 30, fold=0)
    assert temporal_action(segment(before), first, p) is not None
    # A segment started after the first 01:30 does not rotate at the repeated 01:30.
    started_after = local(NY, 2026, 11, 1, 1, 45, fold=0)
    repeat = local(NY, 2026, 11, 1, 1, 30, fold=1)
    assert repeat > started_after
    assert temporal_action(segment(started_after), repeat, p) is None
    assert temporal_action(segment(started_after), local(NY, 2026, 11, 1, 23, 0), p) is None


def test_day_boundary_across_a_23_and_a_25_hour_day() -> None:
    p = policy(day_boundary=time(4), timezone=BERLIN)
    for day in ((2026, 3, 29), (2026, 10, 25)):  # Berlin's DST changes
        created = local(BERLIN, *day, 3, 0)
        boundary = local(BERLIN, *day, 4, 0)
        assert temporal_action(segment(created), boundary - timedelta(seconds=1), p) is None
        assert temporal_action(segment(created), boundary, p) is not None


def test_day_key_increases_by_one_per_local_day() -> None:
    keys = [day_key(local(BERLIN, 2026, 3, d, 12, 0), time(4), BERLIN) for d in range(27, 32)]
    assert keys == list(range(keys[0], keys[0] + 5))


# -- semantic ------------------------------------------------------------------------------


def test_semantic_requires_strictly_greater_confidence_and_min_messages() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    p = policy(semantic=SemanticPolicy(enabled=True, threshold=0.8, min_messages=4))
    assert semantic_action(0.8, "j", segment(now, count=4), now, p, None) is None
    assert semantic_action(0.81, "j", segment(now, count=3), now, p, None) is None
    action = semantic_action(0.81, "j", segment(now, count=4), now, p, None)
    assert action is not None and action.deciding_model == "j" and action.confidence == 0.81


def test_semantic_disabled_or_legacy_never_rotates() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    on = SemanticPolicy(enabled=True, min_messages=0)
    assert semantic_action(1.0, "j", segment(now), now, policy(), None) is None
    legacy = policy(semantic=on, mode=LifecycleMode.LEGACY)
    assert semantic_action(1.0, "j", segment(now), now, legacy, None) is None


def test_semantic_cooldown_is_not_shortened_by_a_backwards_clock() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    p = policy(
        semantic=SemanticPolicy(enabled=True, min_messages=0, cooldown=timedelta(minutes=10))
    )
    last = now + timedelta(hours=1)  # the last rotation is "in the future"
    assert semantic_action(1.0, "j", segment(now), now, p, last) is None
    assert semantic_action(1.0, "j", segment(now), now, p, now - timedelta(minutes=10)) is not None


# -- /new parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "rest"),
    [
        ("/new", ""),
        ("  /new  ", ""),
        ("/new hello there", "hello there"),
        ("/new\nmulti\nline", "multi\nline"),
    ],
)
def test_parse_new_command_recognises_new(text: str, rest: str) -> None:
    command = parse_new_command(text)
    assert command is not None and command.rest == rest


@pytest.mark.parametrize("text", ["/newer", "say /new", "/ new", "/New", "new"])
def test_parse_new_command_ignores_lookalikes(text: str) -> None:
    assert parse_new_command(text) is None
