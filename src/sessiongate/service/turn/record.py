"""What a turn writes down about itself: the metadata stored with its user message, and
the two summaries of a finished turn — `FinishedTurn` for the work that runs after it
(hooks, task extraction, the WebSocket broadcast) and `TurnOutcome` for metrics.

Pure: everything is built from what the turn already holds, so the pipeline in
service/turn/pipeline.py only decides *when* to record, never *what*."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RecallFragment, RotationRecord
from sessiongate.service.conversation.plan import ClientPlan
from sessiongate.service.turn.handle import FinishedTurn, InboundTurn, TurnHandle, TurnOutcome
from sessiongate.service.turn.safety_gate import Verdict


def user_message_metadata(
    inbound: InboundTurn,
    turn_id: str,
    agent_name: str,
    rotations: Sequence[RotationRecord],
    fragments: Sequence[RecallFragment],
    verdict: Verdict | None,
    plan: ClientPlan | None,
) -> dict[str, Any]:
    """The user message's metadata: the turn, its agent and mode, the rotation that
    preceded it, what was recalled and why (DESIGN.md §2.4), the safety verdict, and what
    an OpenAI client's plan adds. The client's own metadata comes first, so the
    gateway's fields win."""
    metadata: dict[str, Any] = {**inbound.metadata, "turn_id": turn_id}
    metadata["agent"] = agent_name
    if inbound.route is not None and inbound.route.mode is not None:
        metadata["mode"] = inbound.route.mode
    if rotations:
        metadata["rotation"] = rotations[-1].reason.value
    if fragments:
        metadata["recall"] = [
            {
                "key": f.key,
                "session_id": f.session_id,
                "message_id": f.message_id,
                "score": f.score,
                "rationale": f.rationale,
            }
            for f in fragments
        ]
    if verdict is not None:
        metadata["classification"] = verdict.metadata()
    if plan is not None:
        metadata.update(plan.user_metadata)
    return metadata


def finished_turn(
    inbound: InboundTurn, ref: KeyRef, agent_name: str, handle: TurnHandle
) -> FinishedTurn:
    """The ended turn as the after-turn listeners see it."""
    return FinishedTurn(
        owner=ref.owner,
        key=ref.name,
        agent=agent_name,
        turn_id=handle.turn_id,
        status=handle.status,
        session_id=handle.session_id,
        user_text=inbound.content,
        reply_text=handle.reply_text,
        rotations=tuple(handle.rotations),
        primary=inbound.caller.primary,
        mode=inbound.route.mode if inbound.route is not None else None,
        error_code=handle.error_code,
        offline=handle.offline,
    )


def turn_outcome(ref: KeyRef, agent_name: str, handle: TurnHandle, seconds: float) -> TurnOutcome:
    """How the turn ended and how long it took, for the `on_turn` listeners (metrics)."""
    return TurnOutcome(
        agent=agent_name,
        status=handle.status,
        seconds=seconds,
        key=ref.storage_id,
        turn_id=handle.turn_id,
        model=handle.model,
        first_token_seconds=handle.first_token_seconds,
        error_code=handle.error_code,
    )
