"""WebSocket chat: `/v1/ws`, and seed 001's `/api/claude/ws` and `/api/codex/ws`.

Protocol: the first text frame is the API key (`authenticated`, or
`error:invalid_api_key` and close; silence for `server.ws_auth_timeout` closes). Then a
`ready` frame with the key's history. Each client frame `{"content", "session_id"?,
"device_id"?}` runs one turn, answered by `message` chunks and one `complete`; a bad frame
gets an `error` frame and the connection stays open (on seed 001's endpoints a frame with
empty content is skipped instead, as its server did: api/ws/frames.py).

Frames are read as they arrive, whatever a turn is doing, so the connection's keep-alive
never waits behind a queue of turns: each frame is checked at once (size, JSON, nesting),
then queued for its turn (at most `limits.ws_max_queued_frames` per socket; one more is
answered `queue_full`). Turns on one socket run one at a time, in order.

Every turn frame carries `event_id` (`<turn_id>.<seq>`, the SSE id of that event); a
frame `{"type":"resume","turn_id","after"}` sends a turn's frames after that seq again
(api/ws/resume.py), in a task of its own, so the socket's other traffic goes on.

Seed 001's endpoints (service/seed_endpoints.py): without `?session_id=` the socket opens
on the key its user last used on that endpoint; a key created through the other one is
refused (`wrong_endpoint`); api/ws/keys.py chooses the key a frame lands on. Every socket
sees the turns other devices run on the keys it watches (api/ws/broadcast.py), in this
process and across workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import MutableMapping
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from sessiongate.api.auth import caller_for
from sessiongate.api.ws.broadcast import TurnRelay
from sessiongate.api.ws.broadcast_frames import (
    Frame,
    broadcast_copy,
    now_iso,
    user_message_frame,
)
from sessiongate.api.ws.frames import FrameError, parse_frame, seed_skips
from sessiongate.api.ws.keys import SocketKeys
from sessiongate.api.ws.link import GONE, SocketLink, SocketServices, install
from sessiongate.api.ws.render import event_id, history_within, render
from sessiongate.api.ws.resume import MAX_RESUMES, is_resume, open_resume
from sessiongate.core.content import validate_content
from sessiongate.core.events import StartEvent
from sessiongate.core.keys import SEED_ENDPOINTS, KeyRef
from sessiongate.core.quotas import QuotaExceeded
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.idempotency import RepeatedTurn, idempotent_request
from sessiongate.service.turn.pipeline import InboundTurn, TurnHandle

# `install` and `SocketServices` live beside the socket's outbound side; the app and the
# seed routes find them here, with the endpoints.
__all__ = ["ChatSocket", "SocketServices", "install", "router"]

router = APIRouter()
POLICY_VIOLATION = 1008
#: The `ready` frame carries at most this share of the frame limit in history; older
#: messages are paged through REST (`history_complete: false` says so).
HISTORY_SHARE = 2
#: A socket's key is checked again, before a frame is taken, when its last check is older
#: than this: a key revoked, rotated or erased meanwhile (by the CLI, another worker or an
#: admin) stops working on sockets already open, at the cost of one lookup per interval.
RECHECK_KEY_SECONDS = 5.0


class ChatSocket(SocketLink):
    """One connection: authenticate, announce, then read frames and run their turns."""

    def __init__(self, ws: WebSocket, endpoint: str, agent: str | None, label: str) -> None:
        services: SocketServices = ws.app.state.sockets
        super().__init__(ws, services.broadcast)
        self.endpoint = endpoint
        self.label = label
        self.engine: Engine = ws.app.state.engine
        self.limits = self.engine.settings.limits
        # One agent-selection rule for `ready` and every turn on this socket; which agent
        # the caller runs is settled once it has authenticated (service/agent_access.py).
        self.requested_agent = agent
        self.agent = self.engine.turns.agent(None)
        self.seed = services.seed
        self.keys = SocketKeys(self.engine, services.seed, endpoint, ws.query_params)
        #: Turns this socket follows again after `resume` frames, each in its own task.
        self._resumes: set[asyncio.Task[None]] = set()
        self._token = ""
        self._key_checked_at = 0.0

    async def run(self) -> None:
        await self.ws.accept()
        try:
            user = await self._authenticate()
        except (WebSocketDisconnect, RuntimeError):
            return
        if user is None:
            return
        try:
            self.agent = await self.engine.turns.usable_agent(
                caller_for(user), self.requested_agent
            )
        except SessionGateError as exc:  # an agent this user may not run
            await self._error(exc.code, exc.message)
            await self.ws.close(POLICY_VIOLATION, exc.code)
            return
        # Like seed 001, count a connection once it has authenticated.
        gauge = self.ws.app.state.metrics.websockets.labels(self.endpoint)
        open_sockets: dict[str, int] = self.ws.app.state.open_sockets
        gauge.inc()
        open_sockets[self.endpoint] = open_sockets.get(self.endpoint, 0) + 1
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(self.limits.ws_max_queued_frames)
        worker: asyncio.Task[None] | None = None
        writer: asyncio.Task[None] | None = None
        try:
            try:
                key = await self.keys.default_key(user)
            except SessionGateError as exc:  # a bad mode, channel or device in the URL
                await self._error(exc.code, exc.message)
                await self.ws.close(POLICY_VIOLATION, exc.code)
                return
            # Watch first, so no turn falls between the history read and the watching.
            await self._watch(user, key)
            await self._ready(user, key)
            loop = asyncio.get_running_loop()
            writer = loop.create_task(self._write_broadcasts())
            worker = loop.create_task(self._run_turns(user, key, queue))
            await self._read_frames(user, queue)
        except GONE:
            return  # the client went away; a turn already started runs to its end
        finally:
            self._gone = True
            self.hub.unwatch(self)
            for task in (worker, writer, *self._resumes):
                if task is not None:
                    # Frames still queued belong to a client that left: they never started.
                    # A turn already started is relayed to the others by its own task.
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            gauge.dec()
            open_sockets[self.endpoint] -= 1

    async def _authenticate(self) -> User | None:
        timeout = self.engine.settings.server.ws_auth_timeout.total_seconds()
        try:
            frame = await asyncio.wait_for(self.ws.receive(), timeout)
        except TimeoutError:
            await self.ws.close(POLICY_VIOLATION, "authentication timeout")
            return None
        if frame["type"] == "websocket.disconnect":
            return None
        token = (frame.get("text") or "").strip()
        user = await self.engine.users.authenticate(token) if token else None
        if user is None:
            await self.ws.send_text("error:invalid_api_key")
            await self.ws.close(POLICY_VIOLATION, "invalid api key")
            return None
        self._token = token
        self._key_checked_at = time.monotonic()
        await self.ws.send_text("authenticated")
        return user

    async def _key_still_valid(self, user: User) -> bool:
        """False (after an error frame and a close) when the socket's key no longer names
        its user; checked at most every RECHECK_KEY_SECONDS."""
        now = time.monotonic()
        if now - self._key_checked_at < RECHECK_KEY_SECONDS:
            return True
        current = await self.engine.users.authenticate(self._token)
        if current is not None and current.name == user.name:
            self._key_checked_at = now
            return True
        await self._error("invalid_api_key", "this API key was revoked or replaced")
        await self.ws.close(POLICY_VIOLATION, "api key revoked")
        return False

    async def _ready(self, user: User, key: str) -> None:
        history: list[dict[str, Any]] = []
        latest_session_id = None
        complete = True
        try:
            ref = caller_for(user).key(key)
            segment, messages = await self.engine.sessions.history(ref, self.agent.memory_window)
            latest_session_id = segment.session_id if segment else None
            history, complete = history_within(
                messages, self.limits.ws_max_frame_bytes // HISTORY_SHARE
            )
        except SessionGateError:
            pass  # a bad key in the URL is reported when a message uses it
        await self._send(
            {
                "type": "ready",
                "session_id": key,
                "latest_session_id": latest_session_id,
                "agent": self.agent.name,
                "content": f"{self.label} connected (session-persistent)",
                "history": history,
                "history_complete": complete,
                "timestamp": now_iso(),
            }
        )

    async def _read_frames(self, user: User, queue: asyncio.Queue[dict[str, Any]]) -> None:
        """Read every frame as it comes; check it now, queue it for its turn (a `resume`
        starts at once, beside the turns)."""
        received = 0
        while True:
            frame = await self.ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            if not await self._key_still_valid(user):
                return
            received += 1
            try:
                data = self._check(frame)
                if is_resume(data):
                    self._resume(user, data, received)
                    continue
                if self.endpoint in SEED_ENDPOINTS and seed_skips(data):
                    continue  # seed 001's server said nothing to an empty message
            except FrameError as exc:
                await self._error(exc.code, exc.message, frame_number=received)
                continue
            try:
                queue.put_nowait({**data, "_frame": received})
            except asyncio.QueueFull:
                await self._error(
                    "queue_full",
                    f"{queue.maxsize} messages are already waiting on this connection;"
                    " this one was not run — send it again after a `complete`",
                    frame_number=received,
                )

    def _check(self, frame: MutableMapping[str, Any]) -> dict[str, Any]:
        text = frame.get("text")
        if text is None:
            raise FrameError("invalid_frame", "send JSON text frames")
        return parse_frame(
            text, max_bytes=self.limits.ws_max_frame_bytes, max_depth=self.limits.ws_max_json_depth
        )

    def _resume(self, user: User, data: dict[str, Any], frame_number: int) -> None:
        """Follow a turn again in a task of its own (api/ws/resume.py), or FrameError."""
        if len(self._resumes) >= MAX_RESUMES:
            raise FrameError(
                "too_many_resumes",
                f"this connection already follows {MAX_RESUMES} resumed turns;"
                " send it again when one has ended",
            )
        turn_id, frames = open_resume(self.engine.turn_journal, user.name, data, frame_number)

        async def send_resumed() -> None:
            try:
                async for frame in frames:
                    await self._send(frame)
            except GONE:
                self._gone = True
            finally:
                self._resuming.remove(turn_id)

        self._resuming.append(turn_id)

        task = asyncio.get_running_loop().create_task(send_resumed())
        self._resumes.add(task)
        task.add_done_callback(self._resumes.discard)

    async def _run_turns(self, user: User, default_key: str, queue: asyncio.Queue[Any]) -> None:
        while True:
            data = await queue.get()
            try:
                await self._turn(user, default_key, data)
            except GONE:
                return
            if self._gone:
                return  # frames still queued belong to a client that left

    async def _turn(self, user: User, default_key: str, data: dict[str, Any]) -> None:
        frame_number = data.pop("_frame")
        requested = data.get("session_id")
        key = default_key if requested is None else requested
        device_id = data.get("device_id")
        if not isinstance(key, str) or (device_id is not None and not isinstance(device_id, str)):
            await self._error(
                "invalid_frame", "session_id and device_id must be strings", frame_number
            )
            return
        content = data.get("content")
        if not isinstance(content, str):
            await self._error("invalid_content", "content must be a string", frame_number)
            return
        speak = data.get("speak", False)
        if not isinstance(speak, bool):
            await self._error("invalid_frame", "speak must be true or false", frame_number)
            return
        metadata = {"device_id": device_id[:200]} if device_id else {}
        agent = self.agent.name
        decision = None
        caller = caller_for(user)
        try:
            if requested is None and self.keys.routed:
                # Routed per frame: a mode unlocked (or expired) since the socket opened
                # counts from the next message on.
                decision = await self.keys.route(user, data.get("mode"))
                key, agent = decision.key, decision.agent
            ref = caller.key(key, write=True)
            if self.keys.unsettled(ref):
                # Bad content is refused before the binding is looked up.
                validate_content(content, self.engine.sessions.max_content_chars)
                await self.keys.check_endpoint(ref)
            inbound = InboundTurn(
                key,
                caller,
                content,
                agent=agent,
                metadata={**metadata, "transport": self.endpoint},
                route=decision,
                speak=speak,
            )
            await self._watch(user, key)
            handle = await self._start(inbound, user.name, data.get("client_message_id"))
        except SessionGateError as exc:
            wait = exc.retry_after if isinstance(exc, QuotaExceeded) else None
            await self._error(exc.code, exc.message, frame_number, wait)
            return
        if isinstance(handle, RepeatedTurn):  # a retried frame: its turn was broadcast
            relay: TurnRelay = _QuietRelay(self.hub, ref.storage_id, self)
        else:
            relay = self.hub.relay(ref.storage_id, handle.turn_id, self)
        # The turn's frames are relayed by a task of their own: a client that leaves
        # half-way cancels this worker, never the relay, so the others see the turn end.
        task = asyncio.get_running_loop().create_task(
            self._relay(handle, ref, relay, frame_number, content, metadata.get("device_id"))
        )
        self.hub.keep(task)
        await asyncio.shield(task)

    async def _start(self, inbound: InboundTurn, owner: str, message_id: object) -> TurnHandle:
        """The frame's turn; with a `client_message_id`, run once (service/idempotency.py),
        counted against the quotas only when it runs here (a replay or a join is free)."""
        inbound = await self.engine.turns.admit(inbound, count=False)
        fields = {"key": inbound.key, "agent": inbound.agent, "content": inbound.content}
        idempotent = idempotent_request(owner, None, message_id, f"ws:{self.endpoint}", fields)
        if idempotent is None or self.engine.idempotency is None:
            return self.engine.turns.start_turn(await self.engine.turns.admit(inbound))

        async def count() -> None:
            nonlocal inbound
            inbound = await self.engine.turns.admit(inbound)

        return await self.engine.idempotency.run(
            idempotent,
            lambda resumed: self.engine.turns.start_turn(replace(inbound, resumes=resumed)),
            count,
        )

    async def _relay(
        self,
        handle: TurnHandle,
        ref: KeyRef,
        relay: TurnRelay,
        frame_number: int,
        content: str,
        device_id: str | None,
    ) -> None:
        key = ref.name
        started = False
        seq = 0
        async for event in handle.events():
            seq += 1
            if isinstance(event, StartEvent):
                # The turn holds its key (created if new): now it counts as used here.
                started = True
                self.seed.record(ref, self.endpoint)
                relay.send(
                    user_message_frame(key, handle.turn_id, content, device_id, self.endpoint)
                )
                continue
            frame = render(event, key)
            if frame is None:
                continue
            frame["event_id"] = event_id(handle.turn_id, seq)
            if started:
                relay.send(broadcast_copy(frame, key, handle.turn_id))
            if frame["type"] in ("complete", "error"):
                frame["frame"] = frame_number  # which client frame this turn answered
            if not self._gone:
                try:
                    await self._send(frame)
                except GONE:
                    self._gone = True


class _QuietRelay(TurnRelay):
    """Relays nothing: for a retried frame whose turn the other sockets already saw."""

    def send(self, frame: Frame) -> None:
        pass


@router.websocket("/v1/ws")
async def v1_socket(ws: WebSocket) -> None:
    await ChatSocket(ws, "v1", None, "sessiongate").run()


@router.websocket("/api/claude/ws")
async def claude_socket(ws: WebSocket) -> None:
    agent = ws.app.state.engine.settings.compat.claude_agent
    await ChatSocket(ws, "claude", agent, "Claude Agent").run()


@router.websocket("/api/codex/ws")
async def codex_socket(ws: WebSocket) -> None:
    agent = ws.app.state.engine.settings.compat.codex_agent
    await ChatSocket(ws, "codex", agent, "Codex Agent").run()
