"""Seed 001's `/api/health` and `/api/status`, in the shapes its client reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request

from sessiongate import __version__
from sessiongate.api.auth import CurrentUser
from sessiongate.service.engine import Engine

router = APIRouter(prefix="/api")


@router.get("/health")
async def api_health(user: CurrentUser, request: Request) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    open_sockets: dict[str, int] = request.app.state.open_sockets
    served: dict[str, set[str]] = request.app.state.served_keys
    total = await engine.sessions.count_keys()
    return {
        "status": "ok",
        "version": __version__,
        "timestamp": datetime.now(UTC).isoformat(),
        "connections": {name: open_sockets.get(name, 0) for name in ("claude", "codex")},
        # by_agent counts the keys each endpoint has served since this process started.
        "sessions": {
            "total": total,
            "by_agent": {name: len(served.get(name, ())) for name in ("claude", "codex")},
        },
    }


@router.get("/status")
async def api_status(user: CurrentUser) -> dict[str, Any]:
    return {
        "status": "running",
        "version": __version__,
        "health": "ok",
        "timestamp": datetime.now(UTC).isoformat(),
        "features": {
            "session_persistence": True,
            "segmented_lifecycle": True,
            "explicit_recall": True,
            "multi_turn_conversations": True,
            "openai_compatible": True,
        },
    }
