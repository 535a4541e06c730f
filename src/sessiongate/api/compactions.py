"""The working set's compactions over REST (docs/working_set.md): a key's records with
their summaries, a compaction now (`/compact` with instructions), a revert."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.rest import Owner, engine_of, writable
from sessiongate.core.working_set import CompactionRecord, in_force
from sessiongate.errors import Conflict

router = APIRouter(prefix="/v1")


class CompactBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    instructions: Annotated[str | None, Field(max_length=2000)] = None
    agent: Annotated[str | None, Field(max_length=200)] = None


def record_json(record: CompactionRecord) -> dict[str, Any]:
    return {
        "compaction_id": record.compaction_id,
        "session_id": record.session_id,
        "covers": {
            "first_seq": record.first_seq,
            "last_seq": record.last_seq,
            "count": record.count,
        },
        "summary": record.summary,
        "model": record.model,
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
        "created_at": record.created_at.isoformat(),
        "previous_compaction_id": record.previous_compaction_id,
        "instructions": record.instructions,
        "reverted": record.reverted,
    }


@router.get("/sessions/{key}/compactions")
async def list_compactions(
    key: str, user: CurrentUser, request: Request, owner: Owner = None
) -> dict[str, Any]:
    engine = engine_of(request)
    segment = await engine.sessions.latest(key, caller_for(user), owner=owner)
    records = await engine.turns.compactor.records(segment.session_id, fresh=True)
    current = in_force(records)
    return {
        "session_id": segment.session_id,
        "in_force": None if current is None else current.compaction_id,
        "compactions": [record_json(r) for r in records],
    }


@router.post("/sessions/{key}/compact")
async def compact_now(
    key: str,
    body: CompactBody,
    user: CurrentUser,
    request: Request,
    owner: Owner = None,
) -> dict[str, Any]:
    writable(key, user, owner)
    engine = engine_of(request)
    caller = caller_for(user)
    segment = await engine.sessions.latest(key, caller)
    agent = await engine.turns.usable_agent(caller, body.agent)
    compactor = engine.turns.compactor
    budget = agent.context_budget
    if budget is None or agent.working_set.compaction == "off" or not compactor.enabled:
        raise Conflict(
            "this agent's context is not compacted (compaction off, or no model window)",
            code="compaction_unavailable",
        )
    record = await compactor.compact(
        segment.session_id,
        agent,
        budget,
        instructions=body.instructions,
        start_after=segment.cleared_after_seq,
    )
    if record is None:
        raise Conflict("nothing to compact: the thread is short", code="nothing_to_compact")
    return {"compaction": record_json(record)}


@router.post("/sessions/{key}/compactions/{compaction_id}/revert")
async def revert_compaction(
    key: str,
    compaction_id: str,
    user: CurrentUser,
    request: Request,
    owner: Owner = None,
) -> dict[str, Any]:
    writable(key, user, owner)
    engine = engine_of(request)
    segment = await engine.sessions.latest(key, caller_for(user))
    record = await engine.turns.compactor.revert(segment.session_id, compaction_id)
    return {"compaction": record_json(record)}
