"""`sessiongate demo`: a scripted conversation through the real engine and a real SQLite
file, showing every kind of rotation, the chain, explicit recall and a revert."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.events import RotationEvent, TokenEvent
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller, ChainView
from sessiongate.service.turn.pipeline import InboundTurn, RecallRequest

DEMO_KEY = "agent:main:main"
DEMO_USER = Caller("demo")


def fresh_demo_database(data_dir: Path) -> Path:
    """The demo always starts from an empty file."""
    db_path = data_dir / "demo.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    return db_path


async def run_demo(db_path: Path, console: Console) -> Path:
    data_dir = db_path.parent
    settings = Settings(
        data_dir=data_dir,
        database={"url": f"sqlite:///{db_path}"},
        lifecycle={
            "timezone": "Europe/Berlin",
            "semantic": {"enabled": True, "threshold": 0.8, "min_messages": 4},
        },
    )
    clock = ManualClock(datetime(2026, 3, 2, 8, 0, tzinfo=UTC))
    engine = build_engine(settings, clock=clock)
    try:
        await _script(engine, clock, console)
        _show_chain(await engine.sessions.show(DEMO_KEY, DEMO_USER), console)
    finally:
        await engine.aclose()
    console.print(f"\nThe database is at [bold]{db_path}[/bold]; inspect it with any SQLite tool.")
    return db_path


async def _say(
    engine: Engine, console: Console, text: str, recall: RecallRequest | None = None
) -> None:
    console.print(f"[bold cyan]user>[/bold cyan] {escape(text)}")
    inbound = InboundTurn(DEMO_KEY, DEMO_USER, text, recall=recall)
    reply: list[str] = []
    async for event in engine.turns.run_turn(inbound):
        if isinstance(event, RotationEvent):
            console.print(
                f"  [yellow]rotation[/yellow] {event.reason}: "
                f"{_short(event.from_session_id)} → {_short(event.to_session_id)}"
                + (
                    f" (confidence {event.confidence:.2f} by {event.deciding_model})"
                    if event.confidence is not None
                    else ""
                )
            )
        elif isinstance(event, TokenEvent):
            reply.append(event.content)
        elif event.type == "error":
            console.print(f"  [red]error[/red] {event.code}: {event.message}")
    if reply:
        console.print(f"[green]assistant>[/green] {escape(''.join(reply).strip()[:110])}…")


async def _script(engine: Engine, clock: ManualClock, console: Console) -> None:
    console.print("No model is configured, so the offline stand-in answers; the lifecycle is real.")
    console.rule("1. A conversation about the garden")
    await _say(engine, console, "My tomato seedlings are leggy; should I repot the tomatoes?")
    clock.advance(timedelta(minutes=3))
    await _say(engine, console, "The tomato seedlings sit on a north window, is that enough light?")

    console.rule("2. /new: a hard cut to a new segment")
    clock.advance(timedelta(minutes=5))
    await _say(engine, console, "/new")
    await _say(engine, console, "Remember: the storage unit code is 4812.")

    console.rule("3. Thirteen idle hours later: idle rollover")
    clock.advance(timedelta(hours=13))
    await _say(engine, console, "Good morning! Planning a trip to Lisbon in May.")
    clock.advance(timedelta(minutes=2))
    await _say(engine, console, "Lisbon hotels near Alfama, any Lisbon neighbourhood tips?")

    console.rule("4. A topic shift the control model judges new: semantic rollover")
    clock.advance(timedelta(minutes=2))
    await _say(engine, console, "Which pastries should I try there?")

    console.rule("5. That split was a misfire: revert it")
    segment, _ = await engine.sessions.revert(DEMO_KEY, DEMO_USER)
    console.print(
        f"  [yellow]rotation[/yellow] revert: continuation {_short(segment.session_id)} continues "
        + " + ".join(_short(s) for s in segment.continues)
    )
    await _say(engine, console, "And is a day trip from Lisbon to Sintra worth it?")
    _, preview = await engine.turns.preview_context(DEMO_KEY, DEMO_USER)
    sources = sorted({_short(m.source.split(":")[0]) for m in preview.messages})
    console.print(
        f"  context for the next turn: {len(preview.messages)} messages from segments "
        + " + ".join(sources)
        + " (the split is healed; nothing was copied or rewritten)"
    )

    console.rule("6. Crossing the 04:00 day boundary (Europe/Berlin)")
    clock.set(datetime(2026, 3, 3, 3, 1, tzinfo=UTC))  # 04:01 in Berlin, 6 h idle
    await _say(engine, console, "New day. What was the storage unit code again?")

    console.rule("7. Explicit recall pulls an archived fragment, with its rationale")
    fragments = await engine.sessions.recall(
        DEMO_KEY, DEMO_USER, "storage unit code", "the user asks for a code given earlier"
    )
    for fragment in fragments[:2]:
        console.print(
            f"  fragment {_short(fragment.session_id)} #{fragment.seq} "
            f"score {fragment.score:.2f}: {escape(fragment.content[:70])!r}"
        )
    await _say(
        engine,
        console,
        "Please remind me of the storage unit code.",
        recall=RecallRequest("storage unit code", "the user asks for a code given earlier"),
    )
    latest = (await engine.sessions.show(DEMO_KEY, DEMO_USER)).latest
    messages = await engine.store.list_messages(latest.session_id)
    recorded = next(m.metadata["recall"] for m in reversed(messages) if "recall" in m.metadata)
    console.print(f"  recorded in the turn's metadata: {escape(str(recorded[0]))}")


def _show_chain(view: ChainView, console: Console) -> None:
    reasons = {r.to_session_id: r.reason.value for r in view.rotations if not r.in_place}
    table = Table(title=f"The chain of {view.key.key}")
    for column in ("#", "session_id", "status", "made by", "parents", "messages"):
        table.add_column(column)
    for index, segment in enumerate(view.segments, start=1):
        table.add_row(
            str(index),
            _short(segment.session_id),
            segment.status.value,
            reasons.get(segment.session_id, "first"),
            ", ".join(_short(p) for p in segment.parent_ids) or "-",
            str(segment.message_count),
        )
    console.print(table)


def _short(session_id: str) -> str:
    """The random tail of a UUIDv7: ids made in the same millisecond share their head."""
    return "…" + session_id[-8:]
