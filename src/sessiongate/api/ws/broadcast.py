"""A turn reaches every WebSocket open on its key, in this process and in the others
(DESIGN.md §11: several devices on one conversation).

A socket *watches* the key its `ready` frame named and every key its own frames have
used. While a turn runs on a key, the other sockets watching it receive:

- `{"type":"user_message","session_id":<key>,"turn_id","content","device_id",
  "transport","timestamp"}` once the turn holds its key (the user's message as sent);
- then the very frames the sending socket gets (`message` chunks, `rotation`, tool steps,
  `complete` or `error`), each with `session_id` (the key) and `turn_id` added and without
  the sender's `frame` number.

The sending socket's own frames are exactly what they were before broadcasting existed,
and a turn keeps being relayed to the others when its sender disconnects half-way.

Turns that no WebSocket started (REST, the OpenAI-compatible API, `/chat`, a delegated
agent) are broadcast once they end (after-turn): `user_message`, `rotation`s, the whole
reply as one `message`, then `complete` (or `error`), read back from the store.

Across processes (PostgreSQL, `store/postgres/fanout.py`): the frames a process relays
are gathered for COALESCE_SECONDS and sent as one NOTIFY per key and burst, a JSON
envelope `{"v":1,"o":<process>,"k":<owner/key>,"f":[frames]}`; an envelope over the
NOTIFY limit (a long chunk, a long user message, a large tool result) is cut into pieces
`{"v":1,"o","k","c":<id>,"i":<index>,"n":<count>,"p":<text>}` that the receivers put
back together (notifications of one channel arrive in order). Turns that ended elsewhere
travel as small markers, those of one burst in one envelope
`{"v":1,"o","m":[[<owner/key>, {turn_id, session_id, status, error, rotations}], …]}`,
and a receiver with a socket on such a key reads the turn's messages from the store.
A receiver with no socket on a key ignores its frames and markers after reading the key.

The frames themselves are built in api/ws/broadcast_frames.py, the envelopes and pieces
in api/ws/broadcast_wire.py; this module keeps the sockets, the live relays and the
queue to the other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from sessiongate.api.ws.broadcast_frames import Frame, finished_frames
from sessiongate.api.ws.broadcast_wire import Assembler, encode, group_envelopes
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message
from sessiongate.service.turn.handle import FinishedTurn

log = logging.getLogger("sessiongate.api")

#: Frames of one burst are gathered this long before they go to the other processes.
COALESCE_SECONDS = 0.02
#: Frames waiting for the other processes; past this they are dropped (and logged).
OUTBOX_LIMIT = 10_000
#: Seconds between two warnings about failing NOTIFYs.
WARN_EVERY = 30.0
#: Tries of one NOTIFY (the pool busy, the server restarting) before it is given up.
NOTIFY_ATTEMPTS = 3


class Watcher(Protocol):
    def deliver(self, frame: Frame) -> None:
        """Queue `frame` for this socket; never waits."""
        ...


class Fanout(Protocol):
    """The channel to the other processes (store/postgres/fanout.py)."""

    async def notify(self, payload: str) -> None: ...

    async def listen(self, receive: Callable[[str], None], gap: Callable[[], None]) -> None: ...

    async def stop(self) -> None: ...


# -- the hub ---------------------------------------------------------------------------


class TurnRelay:
    """One live turn's frames, from the socket that started it to everyone else."""

    def __init__(self, hub: TurnBroadcast, storage_id: str, source: Watcher | None) -> None:
        self.hub = hub
        self.storage_id = storage_id
        self.source = source

    def send(self, frame: Frame) -> None:
        self.hub.publish(self.storage_id, frame, source=self.source)


class TurnMessages(Protocol):
    """A finished turn's stored messages and its segment's size (service/broadcast_data.py)."""

    async def turn_messages(
        self, session_id: object, turn_id: str
    ) -> tuple[list[Message], int]: ...


class TurnBroadcast:
    def __init__(self, stored: TurnMessages, fanout: Fanout | None = None) -> None:
        self.stored = stored
        self.fanout = fanout
        #: Tells this process's envelopes from the others' (its own come back too).
        self.origin = secrets.token_hex(6)
        self._rooms: dict[str, set[Watcher]] = {}
        #: Turns relayed live by a socket of this process: not broadcast again at their end.
        self._live: set[str] = set()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue(OUTBOX_LIMIT)
        self._sender: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._assembler = Assembler()
        self._chunk_ids = itertools.count()
        self._listening = False
        self._retrying: asyncio.Task[None] | None = None
        self._warned_at = 0.0
        self._dropped = 0

    # -- sockets ------------------------------------------------------------------------

    async def watch(self, watcher: Watcher, storage_id: str) -> None:
        """From now on `watcher` gets the frames of turns on `storage_id`."""
        self._rooms.setdefault(storage_id, set()).add(watcher)
        if self.fanout is None or self._listening:
            return
        try:
            await self.fanout.listen(self._receive, self._assembler.clear)
            self._listening = True
        except Exception as exc:  # the database is away: this process's sockets still work
            self._warn(f"cannot LISTEN for other processes' turns ({type(exc).__name__}); retrying")
            if self._retrying is None or self._retrying.done():
                self._retrying = asyncio.get_running_loop().create_task(self._listen_later())

    async def _listen_later(self) -> None:
        assert self.fanout is not None
        delay = 0.1
        while not self._listening and self._rooms:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            try:
                await self.fanout.listen(self._receive, self._assembler.clear)
                self._listening = True
            except Exception:
                continue

    def unwatch(self, watcher: Watcher, storage_id: str | None = None) -> None:
        """Stop sending `watcher` one key's frames (`storage_id`), or every key's."""
        rooms = [storage_id] if storage_id is not None else list(self._rooms)
        for room in rooms:
            members = self._rooms.get(room)
            if members is not None:
                members.discard(watcher)
                if not members:
                    del self._rooms[room]

    def relay(self, storage_id: str, turn_id: str, source: Watcher | None) -> TurnRelay:
        """A live turn started by `source`: its frames go through the returned relay."""
        self._live.add(turn_id)
        return TurnRelay(self, storage_id, source)

    def keep(self, task: asyncio.Task[Any]) -> None:
        """Track a relay's task, so shutdown waits for it."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def publish(self, storage_id: str, frame: Frame, *, source: Watcher | None) -> None:
        self._deliver(storage_id, frame, source)
        if self.fanout is not None:
            self._post({"k": storage_id, "f": frame})

    def _deliver(self, storage_id: str, frame: Frame, source: Watcher | None) -> None:
        for watcher in list(self._rooms.get(storage_id, ())):
            if watcher is not source:
                watcher.deliver(frame)

    # -- turns that no socket started ------------------------------------------------------

    async def finished(self, turn: FinishedTurn) -> None:
        """After-turn listener: broadcast a turn no socket of this process relayed."""
        if turn.turn_id in self._live:
            self._live.discard(turn.turn_id)
            return
        if turn.session_id is None:
            return  # it never held its key (refused or cancelled while waiting): no turn
        storage_id = KeyRef(turn.owner, turn.key).storage_id
        marker = {
            "turn_id": turn.turn_id,
            "session_id": turn.session_id,
            "status": turn.status,
            "error": turn.error_code,
            "rotations": list(turn.rotations),
        }
        if self.fanout is not None:
            self._post({"k": storage_id, "d": marker})
        if storage_id in self._rooms:
            await self._deliver_finished(storage_id, marker)

    async def _deliver_markers(self, markers: list[tuple[str, dict[str, Any]]]) -> None:
        for storage_id, marker in markers:  # one after another: a key's turns stay in order
            await self._deliver_finished(storage_id, marker)

    async def _deliver_finished(self, storage_id: str, marker: dict[str, Any]) -> None:
        try:
            frames = await self._finished_frames(storage_id, marker)
        except Exception:
            log.exception("could not read back turn %s for its broadcast", marker.get("turn_id"))
            return
        for frame in frames:
            self._deliver(storage_id, frame, None)

    async def _finished_frames(self, storage_id: str, marker: dict[str, Any]) -> list[Frame]:
        key = KeyRef.from_storage_id(storage_id).name
        turn_id = str(marker["turn_id"])
        mine, count = await self.stored.turn_messages(marker.get("session_id"), turn_id)
        return finished_frames(key, turn_id, marker, mine, count)

    # -- the other processes -------------------------------------------------------------

    def _post(self, item: dict[str, Any]) -> None:
        try:
            self._outbox.put_nowait(item)
        except asyncio.QueueFull:
            self._dropped += 1
            self._warn(f"{self._dropped} broadcast frames dropped: the database is too slow")
            return
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_loop())

    async def _send_loop(self) -> None:
        while True:
            first = await self._outbox.get()
            await asyncio.sleep(COALESCE_SECONDS)  # let the burst gather
            items = [first]
            while not self._outbox.empty():
                items.append(self._outbox.get_nowait())
            for envelope in group_envelopes(items, self.origin):
                await self._notify(envelope)

    async def _notify(self, envelope: dict[str, Any]) -> None:
        assert self.fanout is not None
        for payload in encode(envelope, next(self._chunk_ids)):
            for attempt in range(NOTIFY_ATTEMPTS):
                try:
                    await self.fanout.notify(payload)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if attempt + 1 == NOTIFY_ATTEMPTS:
                        self._warn(f"a broadcast to the other processes failed: {exc!r:.200}")
                        return  # the rest of this envelope would not fit together either
                    await asyncio.sleep(0.05 * 2**attempt)

    def _warn(self, message: str) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning(message)

    def _receive(self, payload: str) -> None:
        """A notification from the channel (ours come back too: skipped)."""
        try:
            envelope = orjson.loads(payload)
            if (
                not isinstance(envelope, dict)
                or envelope.get("v") != 1
                or envelope.get("o") == self.origin
            ):
                return
            key = envelope.get("k")
            if key is not None and key not in self._rooms:
                return  # frames of a key nobody here watches (markers carry no `k`)
            if "p" in envelope:
                whole = self._assembler.feed(envelope)
                if whole is None:
                    return
                envelope = whole
            for frame in envelope.get("f") or ():
                self._deliver(str(key), frame, None)
            wanted = [(k, m) for k, m in envelope.get("m") or () if k in self._rooms]
            if wanted:
                task = asyncio.get_running_loop().create_task(self._deliver_markers(wanted))
                self.keep(task)
        except Exception:  # a malformed payload must not break the listener
            log.exception("ignored a malformed broadcast payload")

    async def aclose(self) -> None:
        """Let running relays end, send what is waiting (briefly), stop listening."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        deadline = time.monotonic() + 2
        while not self._outbox.empty() and time.monotonic() < deadline:
            if self._sender is None or self._sender.done():
                break
            await asyncio.sleep(0.01)
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
            self._sender = None
        for task in [*self._tasks, *([self._retrying] if self._retrying else [])]:
            task.cancel()
        if self.fanout is not None:
            await self.fanout.stop()
            self._listening = False
