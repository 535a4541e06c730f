"""The lifecycle stage of a turn: `/new`, then the temporal rules, then (when eligible)
the control model's topic-shift judgement — at most one rotation, applied under the
key's lock before the user message is committed (lifecycle contract, DESIGN.md §2)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sessiongate.core.context import is_stand_in
from sessiongate.core.control import TopicJudge, resolve_control_chain
from sessiongate.core.events import RotationEvent
from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import (
    LifecycleAction,
    LifecyclePolicy,
    manual_action,
    parse_new_command,
    semantic_action,
    semantic_eligible,
    temporal_action,
)
from sessiongate.core.segments import RotationRecord, Segment, SessionKeyRecord
from sessiongate.errors import ModelError
from sessiongate.service.agents import AgentProfile
from sessiongate.service.sessions import SessionService

#: How many recent messages the control model sees when judging a topic shift.
JUDGE_WINDOW = 6


class RotationStage:
    def __init__(self, sessions: SessionService, judges: Mapping[str, TopicJudge]) -> None:
        self.sessions = sessions
        self.judges = judges

    async def rotate(
        self,
        ref: KeyRef,
        record: SessionKeyRecord,
        agent: AgentProfile,
        segment: Segment,
        content: str,
        now: datetime,
    ) -> tuple[Segment, list[RotationRecord], str]:
        """The segment the turn lands in, the rotations made, and the content left once
        a `/new` prefix is taken off."""
        sessions = self.sessions
        rotations: list[RotationRecord] = []
        policy = sessions.policy_for(record)
        command = parse_new_command(content)
        if command is not None:
            segment, rotation = await sessions.apply(ref, segment, manual_action(policy), now)
            return segment, [rotation], command.rest
        action = temporal_action(segment, now, policy)
        if action is None:
            action = await self._semantic_decision(
                ref, record, agent, segment, content, now, policy
            )
        if action is not None:
            segment, rotation = await sessions.apply(ref, segment, action, now)
            rotations.append(rotation)
        return segment, rotations, content

    async def _semantic_decision(
        self,
        ref: KeyRef,
        record: SessionKeyRecord,
        agent: AgentProfile,
        segment: Segment,
        content: str,
        now: datetime,
        policy: LifecyclePolicy,
    ) -> LifecycleAction | None:
        if not semantic_eligible(segment, now, policy, record.last_semantic_rotation_at):
            return None
        # The reply model is deliberately not consulted here (lifecycle contract §5).
        override = record.overrides.get("control_model")
        chain = resolve_control_chain(
            override if override in agent.listed_models else None,
            agent.control_model,
            agent.control_fallback_models,
        )
        tail = await self.sessions.thread_tail(ref, segment, JUDGE_WINDOW, remember=False)
        # What the offline stand-in said is no part of the topic (core/context.py).
        recent = [m.content for m in tail if not is_stand_in(m)]
        for candidate in chain:
            judge = self.judges.get(candidate.model)
            if judge is None:
                continue
            try:
                confidence = await judge.judge_topic_shift(recent, content)
            except ModelError:
                continue  # the next link of the chain decides
            return semantic_action(
                confidence, judge.name, segment, now, policy, record.last_semantic_rotation_at
            )
        return None


def rotation_event(record: RotationRecord) -> RotationEvent:
    return RotationEvent(
        from_session_id=record.from_session_id,
        to_session_id=record.to_session_id,
        reason=record.reason.value,
        confidence=record.confidence,
        deciding_model=record.deciding_model,
        in_place=record.in_place,
    )
