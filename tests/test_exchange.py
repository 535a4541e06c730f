"""Export and import of a key's chain as JSON Lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import pytest
from starlette.requests import ClientDisconnect

from sessiongate.api.limits import BodyTooLarge, import_lines
from sessiongate.api.schemas import segment_json
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ImportFormatError, KeyExists, SessionGateError
from sessiongate.service import session_exchange
from sessiongate.service.engine import Engine
from sessiongate.service.sessions import Caller
from sessiongate.store.exchange import MAX_LINE_BYTES
from sessiongate.store.export_format import export_lines
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import ALICE
from tests.support.helpers import collect

KEY = "chat:alice"
REF = KeyRef("alice", KEY)


async def build_history(engine: Engine, clock: ManualClock) -> list[str]:
    await collect(engine, "first segment about otters")
    await collect(engine, "/new")
    await collect(engine, "second segment about beavers")
    clock.advance(timedelta(days=1))
    await collect(engine, "third segment about badgers")
    return list(await engine.sessions.export(KEY, ALICE))


async def test_export_import_round_trip(engine: Engine, clock: ManualClock) -> None:
    lines = await build_history(engine, clock)
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[0] == "key" and kinds.count("segment") == 3 and kinds.count("rotation") == 2
    await engine.sessions.delete(KEY, ALICE)
    assert await engine.store.get_key(REF) is None

    record = await engine.sessions.import_chain(lines, Caller("carol"))
    assert record.owner == "carol"
    again = list(await engine.sessions.export(KEY, Caller("carol")))
    strip = [json.loads(line) for line in again]
    original = [json.loads(line) for line in lines]
    original[0]["owner"] = "carol"
    assert strip == original
    # The imported chain obeys the live rules: archived segments stay immutable.
    view = await engine.sessions.show(KEY, Caller("carol"))
    assert [s.status.value for s in view.segments] == ["archived", "archived", "latest"]
    events = await collect(engine, "a new turn after import", caller=Caller("carol"))
    assert events[-1].type == "end"


async def test_import_into_existing_key_is_refused(engine: Engine, clock: ManualClock) -> None:
    lines = await build_history(engine, clock)
    with pytest.raises(KeyExists):
        await engine.sessions.import_chain(lines, ALICE)


def mutate(lines: list[str], index: int, **changes: object) -> list[str]:
    data = json.loads(lines[index])
    data.update(changes)
    copy = list(lines)
    copy[index] = json.dumps(data)
    return copy


@pytest.mark.parametrize(
    ("breaker", "line", "fragment"),
    [
        (lambda ls: [*ls[:3], "{not json", *ls[3:]], 4, "line 4"),
        (lambda ls: ls[1:], 1, "key header"),
        (lambda ls: mutate(ls, 2, seq=7), 3, "out of order"),
        (lambda ls: mutate(ls, 2, role="wizard"), 3, "role"),
        (lambda ls: mutate(ls, 1, session_id="not-a-uuid"), 2, "UUIDv7"),
        (lambda ls: mutate(ls, 0, key="bad key"), 1, "session key"),
        (lambda ls: mutate(ls, 2, content=123), 3, "content"),
        (lambda ls: mutate(ls, 2, unexpected=True), 3, "unexpected"),
        (lambda ls: [*ls, ls[1]], None, "line"),
        (lambda ls: [ls[0]], 2, "no segments"),
        (lambda ls: [], 1, "empty"),
    ],
)
async def test_broken_export_lines_name_the_line_and_write_nothing(
    engine: Engine,
    clock: ManualClock,
    breaker: Callable[[list[str]], list[str]],
    line: int | None,
    fragment: str,
) -> None:
    lines = await build_history(engine, clock)
    await engine.sessions.delete(KEY, ALICE)
    broken = breaker(lines)
    with pytest.raises(ImportFormatError) as info:
        await engine.sessions.import_chain(broken, ALICE)
    if line is not None:
        assert info.value.line == line
        assert f"line {line}:" in info.value.message
    assert fragment.lower() in info.value.message.lower()
    assert isinstance(engine.store, SQLiteStore)  # SQLite only (conftest._SQLITE_ONLY)
    assert engine.store.connection.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert await engine.store.get_key(REF) is None


async def test_the_first_segment_is_first_in_the_export_as_show_and_the_api_say(
    engine: Engine, clock: ManualClock
) -> None:
    lines = await build_history(engine, clock)
    segments = [json.loads(line) for line in lines if json.loads(line)["type"] == "segment"]
    assert [s["created_reason"] for s in segments] == ["first", "manual", "idle"]
    view = await engine.sessions.show(KEY, ALICE)
    assert [s.created_reason_name for s in view.segments] == ["first", "manual", "idle"]
    assert [segment_json(s)["created_reason"] for s in view.segments] == [
        "first",
        "manual",
        "idle",
    ]


async def test_an_older_export_with_null_for_the_first_segment_still_imports(
    engine: Engine, clock: ManualClock
) -> None:
    lines = await build_history(engine, clock)
    await engine.sessions.delete(KEY, ALICE)
    older = mutate(lines, 1, created_reason=None)  # how exports wrote it before
    assert json.loads(older[1])["type"] == "segment"
    await engine.sessions.import_chain(older, ALICE)
    again = list(await engine.sessions.export(KEY, ALICE))
    assert again == lines


async def test_only_the_first_segment_may_say_first(engine: Engine, clock: ManualClock) -> None:
    lines = await build_history(engine, clock)
    await engine.sessions.delete(KEY, ALICE)
    later = next(i for i, line in enumerate(lines) if i > 1 and '"segment"' in line)
    with pytest.raises(ImportFormatError) as info:
        await engine.sessions.import_chain(mutate(lines, later, created_reason="first"), ALICE)
    assert info.value.line == later + 1 and "first segment" in info.value.message
    assert await engine.store.get_key(REF) is None


async def test_a_set_title_travels_with_the_export_and_older_exports_have_none(
    engine: Engine, clock: ManualClock
) -> None:
    await build_history(engine, clock)
    await engine.sessions.set_title(KEY, ALICE, "  Animals by the river ")
    lines = list(await engine.sessions.export(KEY, ALICE))
    assert json.loads(lines[0])["title"] == "Animals by the river"
    await engine.sessions.delete(KEY, ALICE)
    await engine.sessions.import_chain(lines, ALICE)
    assert (await engine.sessions.show(KEY, ALICE)).title == "Animals by the river"

    # An export from before titles: no `title` in its header, the automatic title after.
    await engine.sessions.delete(KEY, ALICE)
    header = json.loads(lines[0])
    del header["title"]
    await engine.sessions.import_chain([json.dumps(header), *lines[1:]], ALICE)
    view = await engine.sessions.show(KEY, ALICE)
    assert view.key.title is None and view.title == "first segment about otters"
    assert json.loads((await engine.sessions.export(KEY, ALICE))[0])["title"] is None

    await engine.sessions.delete(KEY, ALICE)
    for bad in ("", "two\nlines", "x" * 201, 7):
        with pytest.raises(ImportFormatError) as info:
            await engine.sessions.import_chain(mutate(lines, 0, title=bad), ALICE)
        assert info.value.line == 1 and "title" in info.value.message
    assert await engine.store.get_key(REF) is None


async def test_invalid_utf8_line_is_rejected(engine: Engine, clock: ManualClock) -> None:
    lines = [line.encode() for line in await build_history(engine, clock)]
    await engine.sessions.delete(KEY, ALICE)
    lines[2] = b'{"type": "message", "content": "\xff\xfe"}'
    with pytest.raises(ImportFormatError) as info:
        await engine.sessions.import_chain(lines, ALICE)
    assert info.value.line == 3
    assert await engine.store.get_key(REF) is None


async def test_an_import_read_from_a_request_body_as_it_arrives_round_trips(
    engine: Engine, clock: ManualClock
) -> None:
    """The API's path: the body's chunks, split into lines as they come (lines cut across
    chunks, CRLF endings), parsed one at a time; too long a line is refused by number."""
    lines = await build_history(engine, clock)
    await engine.sessions.delete(KEY, ALICE)
    body = "\r\n".join(lines).encode()

    async def chunks(size: int) -> AsyncIterator[bytes]:
        for start in range(0, len(body), size):
            yield body[start : start + size]

    record = await engine.sessions.import_chain(
        import_lines(None, chunks(7), 10 * len(body)), ALICE
    )
    assert record.key == KEY
    assert list(await engine.sessions.export(KEY, ALICE)) == lines
    with pytest.raises(BodyTooLarge):
        await engine.sessions.import_chain(
            import_lines(None, chunks(64), len(body) - 1), ALICE, key="copy"
        )
    with pytest.raises(BodyTooLarge):  # announced too large: refused before reading
        await engine.sessions.import_chain(
            import_lines(str(len(body)), chunks(64), len(body) - 1), ALICE, key="copy"
        )
    assert await engine.store.get_key(KeyRef("alice", "copy")) is None

    async def one_long_line() -> AsyncIterator[bytes]:
        yield lines[0].encode() + b"\n"
        for _ in range(MAX_LINE_BYTES // 65536 + 2):
            yield b"x" * 65536  # never a newline: refused once past the line limit

    with pytest.raises(ImportFormatError) as info:
        await engine.sessions.import_chain(
            import_lines(None, one_long_line(), 64 * MAX_LINE_BYTES), ALICE, key="copy"
        )
    assert info.value.line == 2 and "too long" in info.value.message

    async def cut_short() -> AsyncIterator[bytes]:
        yield body[:100]
        raise ClientDisconnect

    with pytest.raises(SessionGateError) as left:  # a 4xx nobody reads, never a 500
        await engine.sessions.import_chain(
            import_lines(None, cut_short(), len(body)), ALICE, key="copy"
        )
    assert left.value.code == "body_incomplete"
    assert await engine.store.get_key(KeyRef("alice", "copy")) is None


async def test_a_streamed_export_pages_through_messages_and_equals_the_whole_one(
    engine: Engine, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_exchange, "EXPORT_PAGE", 3)  # many pages from a short chain
    await build_history(engine, clock)
    for n in range(5):
        await collect(engine, f"more badgers {n}")
    whole = list(export_lines(await engine.store.export_chain(REF)))
    streamed = [line async for line in await engine.sessions.export_stream(KEY, ALICE)]
    assert streamed == whole
    assert sum(json.loads(line)["type"] == "message" for line in streamed) == 16


async def test_a_streamed_export_is_a_snapshot_of_when_it_began(
    engine: Engine, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_exchange, "EXPORT_PAGE", 1)
    before = await build_history(engine, clock)
    lines = await engine.sessions.export_stream(KEY, ALICE)
    first = [await anext(lines), await anext(lines)]
    # A turn and a rotation land while the export is half read.
    await collect(engine, "a turn during the export")
    await collect(engine, "/new")
    rest = [line async for line in lines]
    assert first + rest == before
