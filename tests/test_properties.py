"""Property-based tests of the session lifecycle.

`LifecycleMachine` drives a real engine on a fresh SQLite file through random sequences of
turns (short texts drawn from a few topic vocabularies, so the built-in lexical judge fires
on topic changes), `/new`, clock jumps (forward and backward) and reverts. It keeps its
own model of what must be in the store and checks after every step, through the store and
through raw SQL on the database file:

- exactly one latest segment per key, equal to the key's pointer;
- the chain is a single path in creation order;
- every message ever committed is still there, unchanged, and nothing else appeared;
- an archived segment (row and messages) never changes again;
- each rotation (or its absence) is the one the lifecycle rules call for.

The pure day-boundary rule is checked against an independent oracle across DST zones.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from sessiongate.core.clock import ManualClock
from sessiongate.core.control import lexical_shift_confidence
from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import LifecyclePolicy, day_key, parse_new_command, temporal_action
from sessiongate.core.segments import RotationReason, Segment, SegmentStatus
from sessiongate.errors import NothingToRevert
from sessiongate.service.engine import Engine, build_engine
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import ALICE, make_settings
from tests.support.helpers import ScriptedModel, collect

KEY = "chat:alice"
#: The key in alice's namespace, as the store addresses it (`owner/name` in raw SQL).
REF = KeyRef(ALICE.name, KEY)
STORED_KEY = REF.storage_id
START = datetime(2026, 3, 2, 1, 30, tzinfo=UTC)  # 02:30 in Berlin
TIMEZONE = "Europe/Berlin"
IDLE_WINDOW = timedelta(hours=6)
DAY_BOUNDARY = time(4, 0)
THRESHOLD = 0.5
COOLDOWN = timedelta(minutes=10)
MIN_MESSAGES = 2
JUDGE_WINDOW = 6

TOPICS = {
    "baking": "sourdough starter flour oven crust yeast dough knead proofing loaf".split(),
    "space": "rocket orbit galaxy nebula telescope planet comet asteroid lunar module".split(),
    "garden": "tomato seedlings compost mulch basil pruning trellis watering soil roots".split(),
    "music": "guitar chord melody tempo rhythm piano scales harmony drums bass".split(),
}

topic_text = st.sampled_from(sorted(TOPICS)).flatmap(
    lambda topic: st.lists(st.sampled_from(TOPICS[topic]), min_size=1, max_size=4).map(" ".join)
)
# Mostly topical text; sometimes a message with no content words at all (judge says 0.0).
turn_text = st.one_of(topic_text, topic_text, topic_text, st.sampled_from(["ok", "yes", "hi"]))

clock_jump = st.one_of(
    st.integers(1, 1800).map(lambda s: timedelta(seconds=s)),  # small step forward
    st.integers(3600, 7 * 3600).map(lambda s: timedelta(seconds=s)),  # maybe a new day
    st.integers(6 * 3600, 50 * 3600).map(lambda s: timedelta(seconds=s)),  # mostly idle
    st.integers(1, 3 * 3600).map(lambda s: timedelta(seconds=-s)),  # the clock steps back
)

SEGMENT_ROW_SQL = (
    "SELECT session_id, key, created_at, archived_at, parent_ids, continues,"
    " cleared_after_seq, context_started_at, message_count, last_activity_at, created_reason"
    " FROM segments WHERE session_id = ?"
)
MESSAGE_ROWS_SQL = (
    "SELECT segment_id, seq, role, content, status, metadata, created_at"
    " FROM messages WHERE segment_id = ? ORDER BY seq"
)


class LifecycleMachine(RuleBasedStateMachine):
    """One key, one engine, one fresh database file per example."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(START)
        settings_ = make_settings(
            Path(self.tmp.name),
            timezone=TIMEZONE,
            idle_window="6h",
            day_boundary="04:00",
            semantic={
                "enabled": True,
                "threshold": THRESHOLD,
                "min_messages": MIN_MESSAGES,
                "cooldown": "10m",
            },
        )
        self.engine: Engine = build_engine(
            settings_, clock=self.clock, models={"scripted": ScriptedModel()}
        )
        assert isinstance(self.engine.store, SQLiteStore)
        self.raw = sqlite3.connect(self.engine.store.path, isolation_level=None)
        # -- the model -------------------------------------------------------------------
        #: Segment ids in the order they were created.
        self.created: list[str] = []
        #: session_id -> (parent_ids, continues) as decided when the segment was created.
        self.links: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        #: (session_id, seq) -> (role, content) of every message ever committed.
        self.messages: dict[tuple[str, int], tuple[str, str]] = {}
        #: (session_id, seq) -> the full raw row, as first seen.
        self.message_rows: dict[tuple[str, int], tuple[Any, ...]] = {}
        #: session_id -> (segment row, message rows) at the moment it was seen archived.
        self.archived: dict[str, tuple[tuple[Any, ...], list[tuple[Any, ...]]]] = {}
        #: The last rotation of the key: (reason, from, to).
        self.last_rotation: tuple[RotationReason, str, str] | None = None
        self.last_semantic_at: datetime | None = None

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.raw.close()
            self.run(self.engine.aclose())
        finally:
            self.loop.close()
            self.tmp.cleanup()

    # -- model helpers --------------------------------------------------------------------

    @property
    def latest_id(self) -> str:
        return self.created[-1]

    def own_messages(self, session_id: str) -> list[str]:
        seqs = sorted(seq for (sid, seq) in self.messages if sid == session_id)
        return [self.messages[(session_id, seq)][1] for seq in seqs]

    def thread(self, session_id: str) -> list[str]:
        """The texts a segment's thread holds, oldest first, from the model alone."""
        _, continues = self.links[session_id]
        out: list[str] = []
        for earlier in continues:
            out.extend(self.thread(earlier))
        return out + self.own_messages(session_id)

    def new_segment(self, segment: Segment) -> None:
        assert segment.session_id not in self.links, "a segment id was reused"
        self.created.append(segment.session_id)
        self.links[segment.session_id] = (segment.parent_ids, segment.continues)

    def expected_reason(
        self, before: Segment | None, content: str, now: datetime
    ) -> RotationReason | None:
        """Which rotation (if any) the lifecycle rules call for, decided from the model."""
        if parse_new_command(content) is not None:
            return RotationReason.MANUAL
        if before is None:  # the first message creates the key: nothing to rotate from
            return None
        active = before.active_message_count
        assert active == len(self.own_messages(before.session_id))
        if active > 0:
            if now - before.last_activity_at > IDLE_WINDOW:
                return RotationReason.IDLE
            started = day_key(before.context_started_at, DAY_BOUNDARY, ZoneInfo(TIMEZONE))
            if day_key(now, DAY_BOUNDARY, ZoneInfo(TIMEZONE)) > started:
                return RotationReason.DAY_BOUNDARY
        if active < MIN_MESSAGES:
            return None
        if self.last_semantic_at is not None and now - self.last_semantic_at < COOLDOWN:
            return None
        recent = self.thread(before.session_id)[-JUDGE_WINDOW:]
        if lexical_shift_confidence(recent, content) > THRESHOLD:
            return RotationReason.SEMANTIC
        return None

    # -- rules ---------------------------------------------------------------------------

    @initialize(text=topic_text)
    def first_turn(self, text: str) -> None:
        self.do_turn(text)

    @rule(text=turn_text)
    def turn(self, text: str) -> None:
        self.do_turn(text)

    @rule(rest=st.one_of(st.none(), topic_text))
    def new(self, rest: str | None) -> None:
        self.do_turn("/new" if rest is None else f"/new {rest}")

    @rule(delta=clock_jump)
    def jump(self, delta: timedelta) -> None:
        self.clock.advance(delta)

    @rule()
    def revert(self) -> None:
        last = self.last_rotation
        allowed = (
            last is not None and last[0] is RotationReason.SEMANTIC and last[2] == self.latest_id
        )
        event(f"revert allowed: {allowed}")
        if not allowed:
            with pytest.raises(NothingToRevert):
                self.run(self.engine.sessions.revert(KEY, ALICE))
            return
        assert last is not None
        _, s1, s2 = last
        segment, record = self.run(self.engine.sessions.revert(KEY, ALICE))
        assert record.reason is RotationReason.REVERT
        assert (record.from_session_id, record.to_session_id) == (s2, segment.session_id)
        assert segment.parent_ids == (s2, s1) and segment.continues == (s1, s2)
        assert segment.message_count == 0 and segment.status is SegmentStatus.LATEST
        self.new_segment(segment)
        self.last_rotation = (RotationReason.REVERT, s2, segment.session_id)

    def do_turn(self, content: str) -> None:
        store = self.engine.store
        now = self.clock.now()
        before = self.run(store.latest_segment(REF)) if self.created else None
        expected = self.expected_reason(before, content, now)
        event(f"rotation: {expected}")

        events = self.run(collect(self.engine, content, key=KEY))

        assert events[0].type == "start" and events[-1].type == "end", events
        rotations = [e for e in events if e.type == "rotation"]
        latest = self.run(store.latest_segment(REF))
        assert events[0].session_id == latest.session_id
        if before is None:
            self.new_segment(latest)
        if expected is None:
            assert rotations == [], (content, rotations)
            if before is not None:
                assert latest.session_id == before.session_id
        else:
            assert [e.reason for e in rotations] == [expected.value], (content, rotations)
            assert before is not None
            rotation = rotations[0]
            assert rotation.from_session_id == before.session_id
            assert rotation.to_session_id == latest.session_id != before.session_id
            assert not rotation.in_place
            assert latest.parent_ids == (before.session_id,) and latest.continues == ()
            assert latest.created_reason is expected
            if expected is RotationReason.SEMANTIC:
                assert rotation.confidence is not None and rotation.confidence > THRESHOLD
                self.last_semantic_at = now
            self.new_segment(latest)
            self.last_rotation = (expected, before.session_id, latest.session_id)

        command = parse_new_command(content)
        text = command.rest if command is not None else content
        start_seq = len(self.own_messages(latest.session_id))
        landed = self.run(store.list_messages(latest.session_id, after_seq=start_seq))
        if not text:
            assert landed == []
            return
        assert [(m.seq, m.role.value, m.content) for m in landed] == [
            (start_seq + 1, "user", text),
            (start_seq + 2, "assistant", f"reply to: {text}"),
        ]
        assert all(m.status.value == "complete" for m in landed)
        for m in landed:
            self.messages[(m.session_id, m.seq)] = (m.role.value, m.content)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def exactly_one_latest(self) -> None:
        if not self.created:
            return
        pointer = self.raw.execute(
            "SELECT latest_session_id FROM session_keys WHERE key = ?", (STORED_KEY,)
        ).fetchall()
        assert pointer == [(self.latest_id,)]
        unarchived = self.raw.execute(
            "SELECT session_id FROM segments WHERE key = ? AND archived_at IS NULL", (STORED_KEY,)
        ).fetchall()
        assert unarchived == [(self.latest_id,)]
        chain = self.run(self.engine.store.chain(REF))
        latest = [s.session_id for s in chain if s.status is SegmentStatus.LATEST]
        assert latest == [self.latest_id]
        assert self.run(self.engine.store.latest_segment(REF)).session_id == self.latest_id

    @invariant()
    def chain_is_a_single_path(self) -> None:
        if not self.created:
            return
        rows = self.raw.execute(
            "SELECT session_id FROM segments WHERE key = ?", (STORED_KEY,)
        ).fetchall()
        assert sorted(r[0] for r in rows) == sorted(self.created)
        chain = self.run(self.engine.store.chain(REF))
        # `Store.chain` promises "oldest first": the order the segments were created in.
        assert [s.session_id for s in chain] == self.created
        for index, segment in enumerate(chain):
            assert segment.key == REF
            assert (segment.parent_ids, segment.continues) == self.links[segment.session_id]
            if index == 0:
                assert segment.parent_ids == ()
            else:
                assert segment.parent_ids[0] == chain[index - 1].session_id

    @invariant()
    def no_message_lost_or_changed(self) -> None:
        rows = self.raw.execute(
            "SELECT m.segment_id, m.seq, m.role, m.content, m.status, m.metadata, m.created_at"
            " FROM messages m JOIN segments s ON s.session_id = m.segment_id WHERE s.key = ?",
            (STORED_KEY,),
        ).fetchall()
        in_db = {(r[0], r[1]): (r[2], r[3]) for r in rows}
        assert in_db == self.messages
        for row in rows:
            first_seen = self.message_rows.setdefault((row[0], row[1]), row)
            assert row == first_seen, "a committed message row changed"
        for session_id in self.created:
            listed = self.run(self.engine.store.list_messages(session_id, limit=1000))
            assert [(m.seq, m.role.value, m.content) for m in listed] == [
                (seq, *self.messages[(session_id, seq)])
                for seq in range(1, len(self.own_messages(session_id)) + 1)
            ]
            (count,) = self.raw.execute(
                "SELECT message_count FROM segments WHERE session_id = ?", (session_id,)
            ).fetchone()
            assert count == len(listed)

    @invariant()
    def archived_segments_never_change(self) -> None:
        for session_id in self.created:
            row = self.raw.execute(SEGMENT_ROW_SQL, (session_id,)).fetchone()
            messages = self.raw.execute(MESSAGE_ROWS_SQL, (session_id,)).fetchall()
            if session_id in self.archived:
                assert (row, messages) == self.archived[session_id], session_id
            elif row[3] is not None:  # archived_at set: it has just been archived
                assert session_id != self.latest_id
                self.archived[session_id] = (row, messages)
            else:
                assert session_id == self.latest_id


TestLifecycleMachine = LifecycleMachine.TestCase
TestLifecycleMachine.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


async def test_chain_stays_in_creation_order_when_the_clock_steps_back(tmp_path: Path) -> None:
    """The smallest failing case the machine above finds, spelled out: one turn, the clock
    steps back one second (NTP, a VM resume), `/new`. The new segment is the younger one
    and must come last; and an exported chain must import again."""
    clock = ManualClock(START)
    engine = build_engine(
        make_settings(tmp_path), clock=clock, models={"scripted": ScriptedModel()}
    )
    try:
        await collect(engine, "sourdough", key=KEY)
        first = (await engine.store.latest_segment(REF)).session_id
        clock.advance(timedelta(seconds=-1))
        await collect(engine, "/new", key=KEY)
        second = (await engine.store.latest_segment(REF)).session_id
        assert (await engine.store.get_segment(second)).parent_ids == (first,)  # type: ignore[union-attr]

        chain = await engine.store.chain(REF)
        assert [s.session_id for s in chain] == [first, second]
        view = await engine.sessions.show(KEY, ALICE)
        assert [s.session_id for s in view.segments] == [first, second]

        lines = list(await engine.sessions.export(KEY, ALICE))
        await engine.sessions.delete(KEY, ALICE)
        record = await engine.sessions.import_chain(lines, ALICE)
        assert record.latest_session_id == second
    finally:
        await engine.aclose()


# -- the day boundary across DST, against an independent oracle ------------------------------

ZONES = ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "UTC"]
# The 2026 DST changes of those zones (local dates), where the interesting cases live.
TRANSITIONS = [
    date(2026, 3, 8),
    date(2026, 11, 1),
    date(2026, 3, 29),
    date(2026, 10, 25),
    date(2026, 4, 5),
    date(2026, 10, 4),
]
BOUNDARIES = [time(0, 0), time(1, 45), time(2, 0), time(2, 15), time(2, 30), time(4, 0)]


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def boundary_instant(day: date, boundary: time, tz: ZoneInfo) -> datetime:
    """The first UTC instant at which the local wall clock reads `day boundary` or later:
    the first occurrence in a fall-back fold, the transition itself in a spring-forward
    gap. Computed from the zone data directly, not from `day_key`."""
    wall = datetime.combine(day, boundary)
    a = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    b = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = min(a, b), max(a, b)
    if _wall(lo, tz) == wall:
        return lo  # exists (the earlier occurrence, if it exists twice)
    # In a gap: find the transition (whole seconds) between the two readings.
    assert _wall(lo, tz) < wall <= _wall(hi, tz)
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if _wall(datetime.fromtimestamp(mid, UTC), tz) >= wall:
            hi_s = mid
        else:
            lo_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def boundary_crossed(start: datetime, now: datetime, boundary: time, tz: ZoneInfo) -> bool:
    """Whether a lifecycle day started in (start, now]."""
    first = _wall(start, tz).date() - timedelta(days=2)
    last = _wall(now, tz).date() + timedelta(days=2)
    day = first
    while day <= last:
        if start < boundary_instant(day, boundary, tz) <= now:
            return True
        day += timedelta(days=1)
    return False


def _segment(started: datetime) -> Segment:
    return Segment(
        session_id="s",
        key=KeyRef("alice", "k"),
        status=SegmentStatus.LATEST,
        created_at=started,
        archived_at=None,
        parent_ids=(),
        continues=(),
        cleared_after_seq=0,
        context_started_at=started,
        message_count=2,
        last_activity_at=started,
        created_reason=None,
    )


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    boundary=st.sampled_from(BOUNDARIES),
    near=st.sampled_from(TRANSITIONS),
    start_minutes=st.integers(-36 * 60, 36 * 60),
    gap_minutes=st.integers(0, 30 * 60),
)
# Europe/Berlin, 2026-10-25: 02:30 local occurs at 00:30Z (CEST) and again at 01:30Z (CET).
# A segment started at 01:15Z (02:15 CET, after the first 02:30) sees no new lifecycle day
# at 01:45Z (02:45 CET): the day already began at its first 02:30.
@example(
    zone="Europe/Berlin",
    boundary=time(2, 30),
    near=date(2026, 10, 25),
    start_minutes=75,
    gap_minutes=30,
)
# The same zone and fold, the other way round: a segment started the day before (03:08
# CEST on the 24th) gets a message at 01:10Z on the 25th (02:10 CET, the repeat), 40 minutes
# after the first 02:30 began a new lifecycle day: the boundary has been crossed.
@example(
    zone="Europe/Berlin",
    boundary=time(2, 30),
    near=date(2026, 10, 25),
    start_minutes=-1372,
    gap_minutes=1442,
)
def test_day_boundary_fires_exactly_when_a_lifecycle_day_starts(
    zone: str, boundary: time, near: date, start_minutes: int, gap_minutes: int
) -> None:
    tz = ZoneInfo(zone)
    start = datetime.combine(near, time(0, 0), UTC) + timedelta(minutes=start_minutes)
    now = start + timedelta(minutes=gap_minutes)
    policy = LifecyclePolicy(idle_window=None, day_boundary=boundary, timezone=tz)
    action = temporal_action(_segment(start), now, policy)
    fired = action is not None and action.reason is RotationReason.DAY_BOUNDARY
    assert fired == boundary_crossed(start, now, boundary, tz), (
        f"{zone} boundary {boundary}: segment started {start:%Y-%m-%d %H:%MZ}"
        f" ({_wall(start, tz):%H:%M} local), message at {now:%Y-%m-%d %H:%MZ}"
        f" ({_wall(now, tz):%H:%M} local): fired={fired}"
    )


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    boundary=st.sampled_from(BOUNDARIES),
    near=st.sampled_from(TRANSITIONS),
    start_minutes=st.integers(-36 * 60, 36 * 60),
    steps=st.lists(st.integers(1, 6 * 60), min_size=1, max_size=30),
)
def test_day_boundary_never_rotates_twice_in_one_lifecycle_day(
    zone: str, boundary: time, near: date, start_minutes: int, steps: list[int]
) -> None:
    """Messages at increasing instants, rotating whenever the rule says so: at most one
    day-boundary rotation per real boundary, and one for every boundary passed."""
    tz = ZoneInfo(zone)
    policy = LifecyclePolicy(idle_window=None, day_boundary=boundary, timezone=tz)
    first = now = datetime.combine(near, time(0, 0), UTC) + timedelta(minutes=start_minutes)
    segment = _segment(now)
    rotations: list[datetime] = []
    for minutes in steps:
        now += timedelta(minutes=minutes)
        if temporal_action(segment, now, policy) is not None:
            rotations.append(now)
            segment = _segment(now)
    crossed = [
        b
        for offset in range(-2, 8)
        if first
        < (b := boundary_instant(_wall(first, tz).date() + timedelta(days=offset), boundary, tz))
        <= now
    ]
    # Exactly one rotation in each interval between consecutive boundary instants.
    assert len(rotations) == len(crossed)
    for index, (at, b) in enumerate(zip(rotations, crossed, strict=True)):
        assert at >= b
        if index + 1 < len(crossed):
            assert at < crossed[index + 1]
