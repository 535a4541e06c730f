"""The ASGI application: one engine, every transport."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response

from sessiongate import __version__
from sessiongate.api import artifacts, rest, tools, turn_events, web
from sessiongate.api import compactions as compactions_api
from sessiongate.api import hooks as hooks_api
from sessiongate.api import memory as memory_api
from sessiongate.api import modes as modes_api
from sessiongate.api import notes as notes_api
from sessiongate.api import pins as pins_api
from sessiongate.api import speech as speech_api
from sessiongate.api import tasks as tasks_api
from sessiongate.api.auth import current_user
from sessiongate.api.compat import builderos, desktop, lifehub
from sessiongate.api.errors import install_error_handlers
from sessiongate.api.limits import BodyLimitMiddleware
from sessiongate.api.metrics import GatewayMetrics
from sessiongate.api.openai import chat as openai_chat
from sessiongate.api.openai import conversations as openai_conversations
from sessiongate.api.openai import responses as openai_responses
from sessiongate.api.ws import socket as websocket
from sessiongate.core.segments import RotationRecord
from sessiongate.errors import Forbidden
from sessiongate.service.engine import Engine
from sessiongate.service.turn.handle import TurnOutcome
from sessiongate.service.warning_sound import WarningSounds
from sessiongate.service.window_discovery import WindowDiscovery

log = logging.getLogger("sessiongate.turns")


def log_turn(outcome: TurnOutcome) -> None:
    # Content never reaches the log: only ids, outcome and timings.
    if not log.isEnabledFor(logging.INFO):
        return
    first = outcome.first_token_seconds
    log.info(
        "turn",
        extra={
            "key": outcome.key,
            "turn_id": outcome.turn_id,
            "agent": outcome.agent,
            "model": outcome.model,
            "status": outcome.status,
            "error": outcome.error_code,
            "seconds": round(outcome.seconds, 4),
            "first_token_seconds": None if first is None else round(first, 4),
        },
    )


def log_rotation(record: RotationRecord) -> None:
    log.info(
        "rotation",
        extra={
            "key": record.key.storage_id,
            "reason": record.reason.value,
            "from_session_id": record.from_session_id,
            "to_session_id": record.to_session_id,
            "confidence": record.confidence,
            "deciding_model": record.deciding_model,
            "in_place": record.in_place,
        },
    )


#: What a page on an allowed origin may read of an answer beyond the basic headers.
CORS_EXPOSED = [
    "X-Session-Key",
    "X-Context-Compacted",
    "X-Memory-Changed",
    "X-Hosted-Tools-Dropped",
    "Retry-After",
]


def install_cors(app: FastAPI, origins: list[str]) -> None:
    """`[server] cors_origins`: pages on those origins may call every route from a
    browser, preflight included. Added last, so it is the outermost layer: refusals
    (401, 413, …) carry the headers too and a page can read why. No cookies are involved
    (keys travel in `Authorization`), so credentials are not allowed."""
    if not origins:
        return
    app.add_middleware(
        CORSMiddleware,
        allow_origins=origins,
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        allow_headers=["*"],
        expose_headers=CORS_EXPOSED,
        max_age=600,
    )


def create_app(engine: Engine, *, close_engine: bool = True) -> FastAPI:
    """`close_engine=False` leaves the engine open at shutdown (the caller owns it)."""
    metrics = GatewayMetrics()
    engine.sessions.on_rotation(metrics.rotation)
    engine.turns.on_turn(metrics.turn)
    engine.turns.compactor.on_compaction(metrics.compaction)
    engine.turns.on_turn(log_turn)
    if engine.turns.quotas is not None:
        engine.turns.quotas.on_refusal(metrics.quota_refused)
    engine.sessions.on_rotation(log_rotation)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await engine.start()  # PostgreSQL connects here, on the server's event loop
        discovery = window_discovery(engine)  # models' windows, asked in the background
        app.state.window_discovery = discovery
        if engine.hooks is not None:
            await engine.hooks.start()  # the webhook sender: served gateways only, not the CLI
        if engine.artifacts is not None and engine.artifacts.copies is not None:
            await engine.artifacts.copies.start()  # the WebDAV copies' sender, likewise
        if engine.retention is not None:
            engine.retention.start_schedule()  # idle keys: at start-up, then every interval
        yield
        if engine.retention is not None:
            await engine.retention.stop_schedule()
        if discovery is not None:
            await discovery.aclose()
        # Graceful stop: cancelled turns keep their partial replies as `interrupted`.
        await engine.turns.aclose()
        await sockets.aclose()  # relays of those turns end, then the broadcast stops
        if engine.hooks is not None:
            await engine.hooks.stop()  # attempts cut short are given back to the queue
        if engine.artifacts is not None and engine.artifacts.copies is not None:
            await engine.artifacts.copies.stop()  # the same for WebDAV copies
        if close_engine:
            await engine.tools.aclose()
            await engine.close_models()
            await engine.store.close()
        metrics.process_stopped()

    app = FastAPI(
        title="sessiongate",
        version=__version__,
        summary="Durable, well-defined conversation sessions for AI assistants.",
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.open_sockets = {}
    app.state.warning_sounds = WarningSounds(engine.artifacts)  # seed 004's, on UNSAFE
    sockets = websocket.install(app, engine)  # the broadcast and seed 001's endpoint rules
    install_error_handlers(app)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=engine.settings.limits.max_body_bytes,
        turn_max_bytes=engine.settings.turn_body_bytes,
    )
    install_cors(app, engine.settings.server.cors_origins)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    metrics_token = engine.settings.server.metrics_token

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        # Counts by key and agent say who is active: an admin's key, or the scraper's
        # own token, and nobody else.
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        presented = token.strip()
        if not (
            metrics_token
            and scheme.lower() == "bearer"
            and hmac.compare_digest(presented.encode(), metrics_token.encode())
        ):
            user = await current_user(request)
            if not user.admin:
                raise Forbidden("/metrics needs an admin's API key or server.metrics_token")
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    app.include_router(rest.router)
    app.include_router(compactions_api.router)
    app.include_router(pins_api.router)
    app.include_router(openai_chat.router)
    app.include_router(openai_responses.router)
    app.include_router(openai_conversations.router)
    app.include_router(websocket.router)
    app.include_router(builderos.router)
    app.include_router(tools.router)
    app.include_router(lifehub.router)
    app.include_router(desktop.router)
    app.include_router(artifacts.router)
    app.include_router(notes_api.router)
    app.include_router(memory_api.router)
    app.include_router(tasks_api.router)
    app.include_router(modes_api.router)
    app.include_router(speech_api.router)
    app.include_router(hooks_api.router)
    app.include_router(turn_events.router)
    app.include_router(web.router)
    return app


def window_discovery(engine: Engine) -> WindowDiscovery | None:
    """Start asking the model servers for their context windows (docs/working_set.md);
    turns never wait for it."""
    agents = engine.turns.agents
    if not isinstance(agents, MutableMapping):
        return None
    discovery = WindowDiscovery(engine.settings, agents)
    discovery.start()
    return discovery
