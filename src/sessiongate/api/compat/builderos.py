"""Seed 001's `/api/health` and `/api/status`, in the shapes its client reads.

Both answer without a key (DESIGN.md §11), with or without one the same: counts and
constants only, never a user's name, a key's name or anything said in a turn. The key
counts are read once and reused until this process changes them (so they are current
right after a turn) or a second passes (service/seed_endpoints.py): polling them costs
little whoever polls. With several
workers the connection counts are every worker's, read from the WebSocket gauge the
workers share for `/metrics` (also at most once a second).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from sessiongate import __version__
from sessiongate.api.metrics import GatewayMetrics
from sessiongate.api.ws.socket import SocketServices
from sessiongate.core.keys import SEED_ENDPOINTS

router = APIRouter(prefix="/api")
GAUGE = "sessiongate_websocket_connections"
#: Seconds the workers' summed connection counts are reused.
SHARED_COUNTS_TTL = 1.0
_shared: dict[str, tuple[float, dict[str, int]]] = {}


def connections(request: Request) -> dict[str, int]:
    """Open WebSockets per seed endpoint: this process's, or every worker's."""
    metrics: GatewayMetrics = request.app.state.metrics
    folder = metrics.multiprocess_dir
    if folder is None:
        open_sockets: dict[str, int] = request.app.state.open_sockets
        return {name: open_sockets.get(name, 0) for name in SEED_ENDPOINTS}
    cached = _shared.get(folder)
    if cached is not None and time.monotonic() - cached[0] <= SHARED_COUNTS_TTL:
        return dict(cached[1])
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
    counts = dict.fromkeys(SEED_ENDPOINTS, 0)
    for family in registry.collect():
        if family.name == GAUGE:
            for sample in family.samples:
                endpoint = sample.labels.get("endpoint")
                if endpoint in counts:
                    counts[endpoint] = int(sample.value)
    _shared[folder] = (time.monotonic(), counts)
    return dict(counts)


@router.get("/health")
async def api_health(request: Request) -> dict[str, Any]:
    sockets: SocketServices = request.app.state.sockets
    counts = await sockets.seed.counts()
    return {
        "status": "ok",
        "version": __version__,
        "timestamp": datetime.now(UTC).isoformat(),
        # The WebSockets open now, per seed endpoint (every worker's).
        "connections": connections(request),
        # Every key, all users together; by_agent: the keys each endpoint created.
        "sessions": {
            "total": counts["total"],
            "by_agent": {name: counts[name] for name in SEED_ENDPOINTS},
        },
    }


@router.get("/status")
async def api_status() -> dict[str, Any]:
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
            "multi_device_broadcast": True,
            "openai_compatible": True,
        },
    }
