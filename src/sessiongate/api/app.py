"""The ASGI application: one engine, every transport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import Response

from sessiongate import __version__
from sessiongate.api import openai_compat, rest, seed_compat, websocket
from sessiongate.api.auth import current_user
from sessiongate.api.errors import install_error_handlers
from sessiongate.api.limits import BodyLimitMiddleware
from sessiongate.api.metrics import GatewayMetrics
from sessiongate.service.engine import Engine


def create_app(engine: Engine, *, close_engine: bool = True) -> FastAPI:
    """`close_engine=False` leaves the engine open at shutdown (the caller owns it)."""
    metrics = GatewayMetrics()
    engine.sessions.on_rotation(metrics.rotation)
    engine.turns.on_turn(metrics.turn)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        # Graceful stop: cancelled turns keep their partial replies as `interrupted`.
        await engine.turns.aclose()
        if close_engine:
            await engine.close_models()
            await engine.store.close()

    app = FastAPI(
        title="sessiongate",
        version=__version__,
        summary="Durable, well-defined conversation sessions for AI assistants.",
        lifespan=lifespan,
    )
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.served_keys = {}
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=engine.settings.limits.max_body_bytes)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        await current_user(request)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    app.include_router(rest.router)
    app.include_router(openai_compat.router)
    app.include_router(websocket.router)
    app.include_router(seed_compat.router)
    return app
