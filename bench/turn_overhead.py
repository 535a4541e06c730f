"""Per-turn persistence and context-load cost, sessiongate vs two popular peers.

One run measures, side by side and at history lengths of 10, 100, 1,000 and 10,000
messages, what one chat turn costs each store and how many bytes it adds to disk:

* sessiongate's `SQLiteStore`, driven the way the turn service drives it: append the user
  message, `latest_segment` + `thread_tail(segment, 50)` (the context load), append the
  assistant message, with gateway-shaped metadata on both messages;
* the OpenAI Agents SDK `SQLiteSession`, driven the way `Runner.run` drives it per turn
  (traced from the installed SDK): `get_items()` (the whole history, as no session limit is
  set by default), then `add_items([user input])`, then `add_items([model output])`;
* LangGraph's `SqliteSaver` under a compiled `StateGraph(MessagesState)` with one node
  that appends the assistant message (no LLM), `graph.invoke(...)` per turn on a thread id.

Every (store, length) pair gets its own SQLite file in a temporary directory. Within one
store the four lengths are measured round-robin, turn by turn, so drift on a shared machine
hits all lengths alike; the stores run one after another with a `gc.collect()` between.

    .venv/bin/python bench/turn_overhead.py            # full run (35-40 s on 2 cores)
    .venv/bin/python bench/turn_overhead.py --quick    # under a minute
    .venv/bin/python bench/turn_overhead.py --json results.json

The last line printed is always `turn_overhead_ratio_10k_vs_10=<x>`: sessiongate's median
per-turn time at 10,000 messages divided by its median at 10.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

from sessiongate.core.clock import SystemClock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.store.sqlite.store import SQLiteStore
from support.common import load_average, nearest_rank, render_table, version_of

LENGTHS: tuple[int, ...] = (10, 100, 1_000, 10_000)
CONTEXT_WINDOW = 50  # the gateway's default agent memory_window
SyncMode = Literal["native", "normal", "full"]
_SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}

# -- targets (sessiongate only) ---------------------------------------------------------------
TARGET_RATIO_10K_VS_10 = 1.5
TARGET_MEDIAN_10K_NS = 1_000_000  # 1 ms
TARGET_BYTES_SPREAD = 1.5  # max/min bytes per turn across lengths: "roughly constant"


# -- deterministic conversation text ------------------------------------------------------------


class Texts:
    """Deterministic, word-shaped chat text (the FTS index sees realistic token variety).

    User messages are 15-35 words, assistant messages 48-100 words, drawn with a Zipf-like
    skew from a 4,000-word synthetic vocabulary. The same text for index i is used by every
    store, so they all persist identical content."""

    POOL = 512

    def __init__(self, seed: int = 20240611) -> None:
        rng = random.Random(seed)
        syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
        vocabulary = sorted(
            {"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(6000)}
        )[:4000]
        rng.shuffle(vocabulary)
        weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]

        def sentence(low: int, high: int) -> str:
            words = rng.choices(vocabulary, weights=weights, k=rng.randint(low, high))
            return " ".join(words).capitalize() + "."

        self._user = [sentence(15, 35) for _ in range(self.POOL)]
        self._assistant = [" ".join(sentence(12, 25) for _ in range(4)) for _ in range(self.POOL)]

    def mean_lengths(self) -> tuple[int, int]:
        return (
            round(statistics.fmean(map(len, self._user))),
            round(statistics.fmean(map(len, self._assistant))),
        )

    def user(self, index: int) -> str:
        return self._user[index % self.POOL]

    def assistant(self, index: int) -> str:
        return self._assistant[index % self.POOL]

    def message(self, index: int) -> tuple[bool, str]:
        """Message `index` of a seeded history: even indexes are the user's."""
        is_user = index % 2 == 0
        return is_user, self.user(index // 2) if is_user else self.assistant(index // 2)


# -- the three stores ---------------------------------------------------------------------------


class TurnStore(Protocol):
    label: str
    path: Path

    async def start(self) -> None: ...

    async def seed(self, n: int, texts: Texts) -> None:
        """Bring the conversation to exactly `n` persisted messages."""

    async def turn(self, index: int, texts: Texts) -> int:
        """One chat turn; returns how many messages the context load returned."""

    def synchronous(self) -> str: ...

    async def close(self) -> None: ...


def _pragma_sync(conn: sqlite3.Connection) -> str:
    value = conn.execute("PRAGMA synchronous").fetchone()[0]
    return _SYNC_NAMES.get(int(value), str(value))


class SessiongateTurns:
    """sessiongate's SQLite store, called exactly as the turn service calls it."""

    label = "sessiongate"

    def __init__(self, path: Path, sync: SyncMode) -> None:
        self.path = path
        self.store = (
            SQLiteStore.open(path) if sync == "native" else SQLiteStore.open(path, synchronous=sync)
        )
        self.key = KeyRef("bench", "bench:turn-overhead")
        self.session_id = IdGenerator(SystemClock()).new()

    async def start(self) -> None:
        await self.store.create_key(self.key, self.session_id, datetime.now(UTC))

    @staticmethod
    def _user_meta(turn: int) -> dict[str, Any]:
        return {"turn_id": f"t{turn:08d}", "agent": "default"}

    @staticmethod
    def _assistant_meta(turn: int, context_messages: int) -> dict[str, Any]:
        # The keys the turn service records on every reply.
        return {
            "turn_id": f"t{turn:08d}",
            "model": "bench-model",
            "usage": {"input_tokens": 1200, "output_tokens": 90},
            "context": {"messages": context_messages, "tokens": 1300, "dropped": 0},
        }

    async def seed(self, n: int, texts: Texts) -> None:
        # append_message in a loop: the rows are exactly what a live conversation leaves.
        for i in range(n):
            is_user, content = texts.message(i)
            await self.store.append_message(
                self.session_id,
                role=Role.USER if is_user else Role.ASSISTANT,
                content=content,
                now=datetime.now(UTC),
                metadata=self._user_meta(i // 2)
                if is_user
                else self._assistant_meta(i // 2, CONTEXT_WINDOW),
            )

    async def turn(self, index: int, texts: Texts) -> int:
        store = self.store
        await store.append_message(
            self.session_id,
            role=Role.USER,
            content=texts.user(index),
            now=datetime.now(UTC),
            metadata=self._user_meta(index),
        )
        segment = await store.latest_segment(self.key)
        context = await store.thread_tail(segment, CONTEXT_WINDOW)
        await store.append_message(
            segment.session_id,
            role=Role.ASSISTANT,
            content=texts.assistant(index),
            now=datetime.now(UTC),
            metadata=self._assistant_meta(index, len(context)),
        )
        return len(context)

    def synchronous(self) -> str:
        return _pragma_sync(self.store.connection)

    async def close(self) -> None:
        await self.store.close()


def _agents_user_item(text: str) -> dict[str, Any]:
    # What Runner.run persists for a string input (traced from the installed SDK).
    return {"content": text, "role": "user"}


def _agents_assistant_item(index: int, text: str) -> dict[str, Any]:
    # What Runner.run persists for a plain assistant reply (a ResponseOutputMessage).
    return {
        "id": f"msg_{index:046x}",
        "content": [{"annotations": [], "text": text, "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    }


class AgentsSessionTurns:
    """openai-agents `SQLiteSession`, called in the order `Runner.run` calls it."""

    label = "openai-agents"

    def __init__(self, path: Path, sync: SyncMode, limit: int | None = None) -> None:
        from agents import SessionSettings, SQLiteSession

        session_class: type[SQLiteSession] = SQLiteSession
        if sync != "native":
            pragma = f"PRAGMA synchronous = {sync.upper()}"

            class LeveledSQLiteSession(SQLiteSession):
                """Same session; every connection it opens also gets the leveled pragma."""

                @staticmethod
                def _configure_connection(conn: sqlite3.Connection) -> None:
                    SQLiteSession._configure_connection(conn)
                    conn.execute(pragma)

            session_class = LeveledSQLiteSession
        self.path = path
        # limit=None is the SDK default: Runner then reads the whole history every turn.
        self.session = session_class(
            "bench-turn-overhead", str(path), session_settings=SessionSettings(limit=limit)
        )

    async def start(self) -> None:
        return None

    async def seed(self, n: int, texts: Texts) -> None:
        # One add_items call: the rows are exactly what add_items writes, only faster.
        items: list[Any] = []
        for i in range(n):
            is_user, content = texts.message(i)
            items.append(
                _agents_user_item(content) if is_user else _agents_assistant_item(i // 2, content)
            )
        await self.session.add_items(items)

    async def turn(self, index: int, texts: Texts) -> int:
        session = self.session
        # Runner: prepare_input_with_session (honours session_settings.limit)
        history = await session.get_items()
        new_input: list[Any] = [_agents_user_item(texts.user(index))]
        await session.add_items(new_input)
        # save_result_to_session, once the model has replied
        output: list[Any] = [_agents_assistant_item(1_000_000 + index, texts.assistant(index))]
        await session.add_items(output)
        return len(history)

    def synchronous(self) -> str:
        # The session keeps one connection per worker thread; they are configured alike.
        conn = sqlite3.connect(self.path)
        try:
            default = _pragma_sync(conn)
        finally:
            conn.close()
        live = list(getattr(self.session, "_connections", ()))
        if not live:
            return default
        try:
            return _pragma_sync(live[0])
        except sqlite3.ProgrammingError:
            return default

    async def close(self) -> None:
        self.session.close()


class LangGraphTurns:
    """LangGraph `SqliteSaver` checkpointing a `MessagesState` chat graph (no LLM)."""

    label = "langgraph"

    def __init__(self, path: Path, sync: SyncMode) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.path = path
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        if sync != "native":
            self.conn.execute(f"PRAGMA synchronous = {sync.upper()}")
        self.saver = SqliteSaver(self.conn)
        self._human = HumanMessage
        self._reply = ""

        def assistant(state: MessagesState) -> dict[str, Any]:
            return {"messages": [AIMessage(content=self._reply)]}

        builder = StateGraph(MessagesState)
        builder.add_node("assistant", assistant)
        builder.add_edge(START, "assistant")
        builder.add_edge("assistant", END)
        # Any: invoke()'s overloads are typed for MessagesState input, not plain dicts.
        self.graph: Any = builder.compile(checkpointer=self.saver)
        self.config: Any = {"configurable": {"thread_id": "bench-turn-overhead"}}

    async def start(self) -> None:
        return None

    async def seed(self, n: int, texts: Texts) -> None:
        from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

        # One invoke carrying n-1 messages; the node adds the n-th. Seeding turn by turn
        # would write O(n^2) bytes (each checkpoint holds the whole list), which is the
        # cost being measured, not something to pay 5,000 times before measuring it.
        messages: list[BaseMessage] = []
        for i in range(n - 1):
            is_user, content = texts.message(i)
            messages.append(HumanMessage(content=content) if is_user else AIMessage(content))
        self._reply = texts.assistant((n - 1) // 2)
        state = self.graph.invoke({"messages": messages}, self.config)
        assert len(state["messages"]) == n, len(state["messages"])

    async def turn(self, index: int, texts: Texts) -> int:
        self._reply = texts.assistant(index)
        state = self.graph.invoke(
            {"messages": [self._human(content=texts.user(index))]}, self.config
        )
        return len(state["messages"]) - 1  # the context the node saw: all but its reply

    def synchronous(self) -> str:
        return _pragma_sync(self.conn)

    async def close(self) -> None:
        self.conn.close()


@dataclass(frozen=True)
class StoreSpec:
    key: str
    label: str
    context_load: str
    factory: Callable[[Path, SyncMode], TurnStore]
    requires: str  # distribution name, for the version line
    seeds_like_turns: bool  # seeding writes the very rows turn-by-turn persistence writes
    long_byte_window: bool = False


STORES: tuple[StoreSpec, ...] = (
    StoreSpec(
        "sessiongate",
        "sessiongate",
        f"latest_segment + thread_tail({CONTEXT_WINDOW})",
        SessiongateTurns,
        "sessiongate",
        seeds_like_turns=True,
        long_byte_window=True,
    ),
    StoreSpec(
        "agents",
        "openai-agents SQLiteSession",
        "get_items() (whole history, Runner default)",
        AgentsSessionTurns,
        "openai-agents",
        seeds_like_turns=True,
    ),
    StoreSpec(
        "langgraph",
        "langgraph SqliteSaver",
        "invoke() returns the whole MessagesState",
        LangGraphTurns,
        "langgraph-checkpoint-sqlite",
        seeds_like_turns=False,
    ),
)


# -- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiskSize:
    live_bytes: int  # (page_count - freelist_count) * page_size: what the data occupies
    file_bytes: int  # database file + -wal file
    checkpointed: bool  # False: a reader blocked the TRUNCATE checkpoint


def disk_size(path: Path) -> DiskSize:
    """Checkpoint the WAL into the database (TRUNCATE) from a separate connection, then size
    it. Live pages rather than the file length: SQLite reuses freed pages (FTS5 merges free
    many), and a file that does not grow while reused pages fill is not writing nothing."""
    conn = sqlite3.connect(str(path))
    try:
        busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    wal = Path(f"{path}-wal")
    files = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return DiskSize((pages - free) * page_size, files, busy == 0)


def io_counters() -> tuple[int, int] | None:
    """(rchar, wchar) of this process, all threads: bytes passed through read()/pread() and
    write()/pwrite() system calls, whether the OS page cache or the disk served them
    (Linux /proc/self/io; None elsewhere). Memory-mapped I/O (SQLite's -shm) is not in it."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return None
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    return int(fields["rchar"]), int(fields["wchar"])


@dataclass
class Cell:
    store: str
    length: int
    turns_requested: int
    seed_seconds: float = 0.0
    turns: int = 0
    median_ns: int | None = None
    p95_ns: int | None = None
    mean_ns: int | None = None
    min_ns: int | None = None
    max_ns: int | None = None
    # Bytes over the same window as the timing: warm-up + timed turns.
    bytes_turns: int = 0
    bytes_per_turn: float | None = None
    file_bytes_per_turn: float | None = None
    # sessiongate only: the same measure over a longer window (see Plan.long_bytes_turns).
    long_bytes_turns: int = 0
    long_bytes_per_turn: float | None = None
    # (live bytes at the end - live bytes of the empty store) / (messages / 2). Only where
    # seeding wrote the same rows turn-by-turn persistence writes (not LangGraph).
    history_bytes_per_turn: float | None = None
    checkpoint_ok: bool = True
    context_messages_first: int | None = None
    context_messages_last: int | None = None
    history_at_start: int | None = None
    history_at_end: int | None = None
    skipped: str | None = None
    # Syscall I/O during the timed turns (see io_counters), per turn.
    read_bytes_per_turn: float | None = None
    write_bytes_per_turn: float | None = None
    io_read_total: int = 0
    io_write_total: int = 0
    samples_ns: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    turns: int  # timed turns per cell
    warmup: int  # untimed turns before them
    cell_budget_s: float  # cap on timed work per cell: a slow cell times fewer turns
    min_turns: int
    skip_turn_s: float  # a warm-up turn slower than this skips the cell altogether
    long_bytes_turns: int  # sessiongate: untimed turns until its byte window is this long


async def measure_store(
    spec: StoreSpec, plan: Plan, sync: SyncMode, texts: Texts, workdir: Path
) -> tuple[dict[int, Cell], str]:
    """Seed one conversation per length, then: size, warm-up, timed turns round-robin
    across the lengths, size again (and for sessiongate, more turns and a third size)."""
    cells = {n: Cell(spec.key, n, plan.turns) for n in LENGTHS}
    instances: dict[int, TurnStore] = {}
    done = dict.fromkeys(LENGTHS, 0)  # turns run since seeding, per length
    sync_seen = "?"

    async def one_turn(n: int) -> tuple[int, int]:
        started = time.perf_counter_ns()
        context = await instances[n].turn(done[n], texts)
        elapsed = time.perf_counter_ns() - started
        done[n] += 1
        return elapsed, context

    io_available = io_counters() is not None

    try:
        empty: dict[int, DiskSize] = {}
        seeded: dict[int, DiskSize] = {}
        for n in LENGTHS:
            inst = spec.factory(workdir / f"{spec.key}-{n}.db", sync)
            instances[n] = inst
            await inst.start()
            empty[n] = disk_size(inst.path)
            started = time.perf_counter()
            await inst.seed(n, texts)
            cells[n].seed_seconds = time.perf_counter() - started
            seeded[n] = disk_size(inst.path)
        # Warm up (caches, the WAL regrowing after the checkpoint, the SDK's thread pool)
        # and size each cell's turn count from its slowest warm-up turn.
        planned: dict[int, int] = {}
        for n in LENGTHS:
            slowest = max([(await one_turn(n))[0] for _ in range(plan.warmup)], default=0) / 1e9
            if slowest > plan.skip_turn_s:
                cells[n].skipped = f"too slow: {slowest:.1f} s/turn"
                planned[n] = 0
                continue
            affordable = int(plan.cell_budget_s / max(slowest, 1e-6))
            planned[n] = min(plan.turns, max(plan.min_turns, affordable))
            cells[n].history_at_start = n + 2 * done[n]
        sync_seen = instances[LENGTHS[0]].synchronous()
        gc.collect()
        for t in range(max(planned.values(), default=0)):
            for n in LENGTHS:
                if t >= planned[n]:
                    continue
                io_before = io_counters()
                elapsed, context = await one_turn(n)
                io_after = io_counters()
                cell = cells[n]
                cell.samples_ns.append(elapsed)
                if io_before and io_after:
                    cell.io_read_total += io_after[0] - io_before[0]
                    cell.io_write_total += io_after[1] - io_before[1]
                if cell.context_messages_first is None:
                    cell.context_messages_first = context
                cell.context_messages_last = context
        for n in LENGTHS:
            cell = cells[n]
            if cell.skipped:
                continue
            ordered = sorted(cell.samples_ns)
            cell.turns = len(ordered)
            cell.median_ns = int(statistics.median(ordered))
            cell.p95_ns = nearest_rank(ordered, 0.95)
            cell.mean_ns = int(statistics.fmean(ordered))
            cell.min_ns, cell.max_ns = ordered[0], ordered[-1]
            if io_available:
                cell.read_bytes_per_turn = cell.io_read_total / cell.turns
                cell.write_bytes_per_turn = cell.io_write_total / cell.turns
            after = disk_size(instances[n].path)
            cell.checkpoint_ok = seeded[n].checkpointed and after.checkpointed
            cell.bytes_turns = done[n]
            cell.bytes_per_turn = (after.live_bytes - seeded[n].live_bytes) / done[n]
            cell.file_bytes_per_turn = (after.file_bytes - seeded[n].file_bytes) / done[n]
            if spec.long_byte_window and plan.long_bytes_turns > done[n]:
                # sessiongate's FTS5 index merges its segments in bursts (and frees the
                # merged ones), so a window of a few dozen turns can land on or between
                # merges; a longer one averages over the cycle.
                while done[n] < plan.long_bytes_turns:
                    await one_turn(n)
                after = disk_size(instances[n].path)
                cell.checkpoint_ok = cell.checkpoint_ok and after.checkpointed
            if spec.long_byte_window:
                cell.long_bytes_turns = done[n]
                cell.long_bytes_per_turn = (after.live_bytes - seeded[n].live_bytes) / done[n]
            if spec.seeds_like_turns:
                messages = n + 2 * done[n]
                cell.history_bytes_per_turn = (after.live_bytes - empty[n].live_bytes) / (
                    messages / 2
                )
            cell.history_at_end = n + 2 * done[n]
    finally:
        for inst in instances.values():
            await inst.close()
        instances.clear()
        gc.collect()
    return cells, sync_seen


# -- reporting ----------------------------------------------------------------------------------


def fmt_ms(ns: int | None) -> str:
    if ns is None:
        return "—"
    ms = ns / 1e6
    if ms < 10:
        return f"{ms:.3f}"
    if ms < 100:
        return f"{ms:.2f}"
    return f"{ms:.1f}"


def fmt_bytes(value: float | None) -> str:
    if value is None:
        return "—"
    if abs(value) < 10_000:
        return f"{value:,.0f} B"
    if abs(value) < 10_000_000:
        return f"{value / 1024:,.1f} KiB"
    return f"{value / 1024 / 1024:,.1f} MiB"


def fmt_ratio(peer: float | None, base: float | None) -> str:
    if peer is None or base is None or base <= 0:
        return "—"
    ratio = peer / base
    return f"{ratio:,.1f}x" if ratio < 100 else f"{ratio:,.0f}x"


def cell_time(cell: Cell, which: Literal["median", "p95"]) -> str:
    if cell.skipped:
        return f"skipped ({cell.skipped})"
    value = cell.median_ns if which == "median" else cell.p95_ns
    text = fmt_ms(value)
    if cell.turns < cell.turns_requested:
        text += f" (n={cell.turns})"
    return text


def time_table(results: dict[str, dict[int, Cell]], short: dict[str, str]) -> str:
    keys = [s.key for s in STORES if s.key in results]
    headers = ["history"]
    for k in keys:
        headers += [f"{short[k]} median", f"{short[k]} p95"]
    headers += [f"{short[k]}/sessiongate" for k in keys if k != "sessiongate"]
    rows = []
    for n in LENGTHS:
        row = [f"{n:,}"]
        for k in keys:
            row += [cell_time(results[k][n], "median"), cell_time(results[k][n], "p95")]
        base = results.get("sessiongate", {}).get(n)
        for k in keys:
            if k == "sessiongate":
                continue
            peer = results[k][n]
            row.append(
                fmt_ratio(
                    peer.median_ns,
                    base.median_ns if base else None,
                )
            )
        rows.append(row)
    return render_table(headers, rows, right=set(range(1, len(headers))))


def bytes_table(results: dict[str, dict[int, Cell]], short: dict[str, str], window: int) -> str:
    keys = [s.key for s in STORES if s.key in results]
    headers = [
        "history",
        *(short[k] for k in keys),
        *(f"{short[k]}/sessiongate" for k in keys if k != "sessiongate"),
    ]
    rows = []
    for n in LENGTHS:
        row = [f"{n:,}"]
        for k in keys:
            cell = results[k][n]
            text = "skipped" if cell.skipped else fmt_bytes(cell.bytes_per_turn)
            if not cell.skipped and cell.bytes_turns != window:
                text += f" (n={cell.bytes_turns})"
            if not cell.checkpoint_ok:
                text += " (checkpoint blocked)"
            row.append(text)
        base = results.get("sessiongate", {}).get(n)
        for k in keys:
            if k == "sessiongate":
                continue
            row.append(
                fmt_ratio(results[k][n].bytes_per_turn, base.bytes_per_turn if base else None)
            )
        rows.append(row)
    return render_table(headers, rows, right=set(range(1, len(headers))))


def io_table(results: dict[str, dict[int, Cell]], short: dict[str, str]) -> str | None:
    keys = [s.key for s in STORES if s.key in results]
    if all(results[k][n].write_bytes_per_turn is None for k in keys for n in LENGTHS):
        return None
    headers = ["history"]
    for k in keys:
        headers += [f"{short[k]} written", f"{short[k]} read"]
    rows = []
    for n in LENGTHS:
        row = [f"{n:,}"]
        for k in keys:
            cell = results[k][n]
            row += [fmt_bytes(cell.write_bytes_per_turn), fmt_bytes(cell.read_bytes_per_turn)]
        rows.append(row)
    return render_table(headers, rows, right=set(range(1, len(headers))))


def history_bytes_table(results: dict[str, dict[int, Cell]], window: int) -> str:
    sg = results["sessiongate"]
    long_n = max(c.long_bytes_turns for c in sg.values())
    headers = [
        "history",
        f"sessiongate, {window} turns",
        f"sessiongate, {long_n} turns",
        "sessiongate, whole history",
    ]
    if "agents" in results:
        headers.append("agents, whole history")
    rows = []
    for n in LENGTHS:
        row = [
            f"{n:,}",
            fmt_bytes(sg[n].bytes_per_turn),
            fmt_bytes(sg[n].long_bytes_per_turn),
            fmt_bytes(sg[n].history_bytes_per_turn),
        ]
        if "agents" in results:
            row.append(fmt_bytes(results["agents"][n].history_bytes_per_turn))
        rows.append(row)
    return render_table(headers, rows, right=set(range(1, len(headers))))


@dataclass
class Target:
    name: str
    passed: bool
    detail: str


def evaluate_targets(sg: dict[int, Cell]) -> list[Target]:
    small, big = sg[LENGTHS[0]], sg[LENGTHS[-1]]
    targets: list[Target] = []
    if small.median_ns and big.median_ns:
        ratio = big.median_ns / small.median_ns
        targets.append(
            Target(
                f"median at {LENGTHS[-1]:,} within {TARGET_RATIO_10K_VS_10}x of median at "
                f"{LENGTHS[0]}",
                ratio <= TARGET_RATIO_10K_VS_10,
                f"{fmt_ms(big.median_ns)} ms / {fmt_ms(small.median_ns)} ms = {ratio:.2f}x",
            )
        )
        targets.append(
            Target(
                f"median at {LENGTHS[-1]:,} at most {TARGET_MEDIAN_10K_NS / 1e6:g} ms",
                big.median_ns <= TARGET_MEDIAN_10K_NS,
                f"{fmt_ms(big.median_ns)} ms",
            )
        )
    per_turn = [c.long_bytes_per_turn for c in sg.values() if c.long_bytes_per_turn]
    if len(per_turn) == len(LENGTHS) and min(per_turn) > 0:
        spread = max(per_turn) / min(per_turn)
        window = max(c.long_bytes_turns for c in sg.values())
        targets.append(
            Target(
                f"bytes per turn roughly constant across lengths (max/min ≤ "
                f"{TARGET_BYTES_SPREAD}x, over {window} turns)",
                spread <= TARGET_BYTES_SPREAD,
                " / ".join(fmt_bytes(b) for b in per_turn) + f" → spread {spread:.2f}x",
            )
        )
    return targets


# -- main ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer turns; under a minute")
    parser.add_argument("--turns", type=int, help="measured turns per store and length")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results here")
    parser.add_argument(
        "--sync",
        choices=["native", "normal", "full"],
        default="native",
        help="PRAGMA synchronous: each store's own default (native, the default), or the "
        "same level forced on all three",
    )
    parser.add_argument(
        "--stores",
        default="sessiongate,agents,langgraph",
        help="comma-separated subset of sessiongate,agents,langgraph",
    )
    parser.add_argument(
        "--agents-limit",
        type=int,
        metavar="N",
        help="give the agents session SessionSettings(limit=N) (not the SDK default), so "
        "Runner reads only the newest N items per turn",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary databases")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    if args.quick:
        plan = Plan(
            turns=20,
            warmup=2,
            cell_budget_s=3.0,
            min_turns=5,
            skip_turn_s=8.0,
            long_bytes_turns=200,
        )
    else:
        plan = Plan(
            turns=50,
            warmup=5,
            cell_budget_s=45.0,
            min_turns=10,
            skip_turn_s=60.0,
            long_bytes_turns=400,
        )
    if args.turns:
        plan = replace(plan, turns=args.turns, min_turns=min(plan.min_turns, args.turns))
    wanted = [s.strip() for s in args.stores.split(",") if s.strip()]
    specs = [s for s in STORES if s.key in wanted]
    columns = {s.key: s.key for s in specs}
    if args.agents_limit:
        limit = args.agents_limit
        columns["agents"] = f"agents[limit={limit}]"
        specs = [
            replace(
                s,
                label=f"{s.label} (limit={limit})",
                context_load=f"get_items() with SessionSettings(limit={limit})",
                factory=partial(AgentsSessionTurns, limit=limit),
            )
            if s.key == "agents"
            else s
            for s in specs
        ]
    if not specs or specs[0].key != "sessiongate":
        print("sessiongate must be among --stores", file=sys.stderr)
        return 2

    texts = Texts()
    user_len, assistant_len = texts.mean_lengths()
    workdir = Path(tempfile.mkdtemp(prefix="sessiongate-turn-overhead-"))
    results: dict[str, dict[int, Cell]] = {}
    sync_seen: dict[str, str] = {}
    missing: dict[str, str] = {}
    load_before = load_average()
    wall = time.perf_counter()
    try:
        for spec in specs:
            try:
                cells, sync_seen[spec.key] = await measure_store(
                    spec, plan, args.sync, texts, workdir
                )
            except ImportError as exc:
                missing[spec.key] = str(exc)
                continue
            results[spec.key] = cells
            print(
                f"measured {spec.label}: "
                + ", ".join(f"{n:,}: {cells[n].turns} turns" for n in LENGTHS)
                + f" ({time.perf_counter() - wall:.1f} s elapsed)",
                flush=True,
            )
    finally:
        if args.keep:
            print(f"databases kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - wall
    load_after = load_average()

    sg = results["sessiongate"]
    print()
    print(f"turn_overhead — {'quick' if args.quick else 'full'} run, {elapsed:.1f} s")
    print(
        f"machine: {os.cpu_count()} cores, {platform.machine()}, {platform.system()} "
        f"{platform.release()}; Python {platform.python_version()}; SQLite "
        f"{sqlite3.sqlite_version}; 1-min load average {load_before:.2f} before, "
        f"{load_after:.2f} after (the benchmark itself accounts for about 1; more means "
        "other processes shared the CPUs)"
    )
    print(
        "versions: "
        + ", ".join(f"{s.requires} {version_of(s.requires)}" for s in STORES if s.key in wanted)
        + f", langgraph {version_of('langgraph')}"
    )
    print(f"synchronous ({args.sync}): " + ", ".join(f"{k}={v}" for k, v in sync_seen.items()))
    print("turn = one user message + one assistant reply persisted, and the context loaded:")
    for spec in specs:
        print(f"  {spec.key:<11} {spec.context_load}")
    print(
        f"content: the same deterministic text for all stores (user ~{user_len} chars, "
        f"assistant ~{assistant_len} chars); sessiongate rows carry the turn service's metadata"
    )
    print(
        f"timed turns per cell: {plan.turns} (fewer where marked n=…), after {plan.warmup} "
        "untimed warm-up turns; the four lengths run round-robin within a store; history "
        "grows by 2 messages per turn from the listed length"
    )
    for key, why in missing.items():
        print(f"  {key}: not measured ({why})")
    print()
    print("Per-turn wall time, milliseconds (time.perf_counter_ns around the whole turn)")
    print(time_table(results, columns))
    print()
    window = plan.warmup + plan.turns
    print(
        "Bytes added to disk per turn: growth of the live pages ((page_count - freelist_count)"
        " x page_size, read after PRAGMA wal_checkpoint(TRUNCATE), so the -wal file is empty)"
        f" from just after seeding to after the {window} warm-up + timed turns, / {window}"
    )
    print(bytes_table(results, columns, window))
    print()
    print(
        "sessiongate bytes per turn three ways: the window above; a longer window (untimed "
        "turns added: its FTS5 index merges segments in bursts, so short windows are noisy); "
        "and the whole history, (live bytes - empty store) / (messages / 2), which is valid "
        "where seeding wrote the same rows turns write (sessiongate, agents; not langgraph)"
    )
    print(history_bytes_table(results, window))
    print()
    io = io_table(results, columns)
    if io is not None:
        print(
            "Syscall I/O per timed turn: bytes through write()/pwrite() and read()/pread() "
            "(Linux /proc/self/io wchar/rchar; page-cache hits count as reads; includes WAL "
            "frames and the WAL checkpoints that fell inside timed turns)"
        )
        print(io)
        print()
    targets = evaluate_targets(sg)
    print("Targets (sessiongate)")
    for target in targets:
        print(f"  [{'PASS' if target.passed else 'FAIL'}] {target.name}: {target.detail}")

    small, big = sg[LENGTHS[0]].median_ns, sg[LENGTHS[-1]].median_ns
    ratio = big / small if big and small else float("nan")
    if args.json:
        payload = {
            "mode": "quick" if args.quick else "full",
            "elapsed_seconds": round(elapsed, 2),
            "machine": {
                "cpus": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": load_after,
                "platform": platform.platform(),
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
            },
            "versions": {s.requires: version_of(s.requires) for s in STORES},
            "synchronous": {"mode": args.sync, **sync_seen},
            "agents_limit": args.agents_limit,
            "plan": asdict(plan),
            "byte_method": "bytes_per_turn: growth of (page_count - freelist_count) * page_size "
            "after PRAGMA wal_checkpoint(TRUNCATE), from just after seeding to after "
            "bytes_turns turns, / bytes_turns; file_bytes_per_turn: the same with the "
            "database + -wal file sizes",
            "results": {
                key: {str(n): asdict(c) for n, c in cells.items()} for key, cells in results.items()
            },
            "targets": [asdict(t) for t in targets],
            "turn_overhead_ratio_10k_vs_10": round(ratio, 4),
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nresults written to {args.json}")
    print(f"turn_overhead_ratio_10k_vs_10={ratio:.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
