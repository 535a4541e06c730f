"""`GET /v1/tools?agent=`: what the caller may use with an agent."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.service.engine import Engine

router = APIRouter(prefix="/v1")


@router.get("/tools")
async def list_tools(
    user: CurrentUser,
    request: Request,
    agent: str | None = Query(None, max_length=64),
) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    return {"tools": await engine.turns.offered_tools(agent, caller_for(user))}
