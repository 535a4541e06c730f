"""The one internal event stream of a turn. Every transport renders these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class StartEvent:
    session_key: str
    session_id: str
    turn_id: str
    type: Literal["start"] = "start"


@dataclass(frozen=True, slots=True)
class RotationEvent:
    from_session_id: str
    to_session_id: str
    reason: str
    confidence: float | None = None
    deciding_model: str | None = None
    in_place: bool = False
    type: Literal["rotation"] = "rotation"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # The wire names are `from` and `to` (DESIGN.md §5).
        data["from"] = data.pop("from_session_id")
        data["to"] = data.pop("to_session_id")
        return data


@dataclass(frozen=True, slots=True)
class RouteEvent:
    """A routed turn (no key named): which agent and key the route picked, and why a
    requested mode did or did not count (DESIGN.md §8)."""

    agent: str
    session_key: str
    mode: str | None
    requested_mode: str | None
    #: matched, mode_active, mode_not_enabled, mode_locked or mode_unknown.
    reason: str
    #: The index of the configured route that matched (None: the built-in table).
    rule: int | None = None
    type: Literal["route"] = "route"


@dataclass(frozen=True, slots=True)
class ClassificationEvent:
    """The safety gate's verdict, before the reply model (seed 004)."""

    label: str
    marker: str
    confidence: float
    deciding_model: str
    type: Literal["classification"] = "classification"


@dataclass(frozen=True, slots=True)
class ActionEvent:
    """`actions = "client"`: the script for the client to run where the desktop is."""

    language: str
    script: str
    type: Literal["action"] = "action"


@dataclass(frozen=True, slots=True)
class ActionResultEvent:
    """`actions = "sandbox"`: how the script ran on the gateway host."""

    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    killed: bool
    reason: str | None = None
    #: The script that ran (also kept in the assistant message's metadata).
    script: str = ""
    type: Literal["action_result"] = "action_result"


@dataclass(frozen=True, slots=True)
class HandoffEvent:
    """Seed 000's hybrid hand-off after a reply of a model that cannot call tools: what
    the reply promised, which tool ran, and how it went (DESIGN.md §9)."""

    intent: str
    tool: str | None
    confidence: float | None
    #: done, failed, skipped (low confidence or no clear intent)
    status: str
    artifact_id: str | None = None
    message: str | None = None
    type: Literal["handoff"] = "handoff"


@dataclass(frozen=True, slots=True)
class AudioEvent:
    """`speak: true`: the reply as speech, kept as an artifact; after `end`."""

    artifact_id: str | None
    url: str | None
    voice: str
    duration_ms: int | None
    media_type: str | None = None
    #: Why no audio came (the reply stands regardless): an error code, else None.
    error: str | None = None
    type: Literal["audio"] = "audio"


@dataclass(frozen=True, slots=True)
class AudioPartEvent:
    """`speak: true` on a reply of several parts: one group of sentences as speech, kept as
    an artifact, sent as soon as it is ready so a client can start playing before the
    whole reply is synthesised. Parts come in order, before the final `audio` event (which
    still carries the whole reply); a reply of one part has none."""

    #: 0-based, in playing order.
    part: int
    artifact_id: str
    url: str
    voice: str
    duration_ms: int
    media_type: str
    type: Literal["audio_part"] = "audio_part"


@dataclass(frozen=True, slots=True)
class PlanEvent:
    """plan_execute: the validated plan, before any step runs (seed 002's `plan`)."""

    plan: list[dict[str, Any]]
    type: Literal["plan"] = "plan"


@dataclass(frozen=True, slots=True)
class ToolStartEvent:
    call_id: str
    name: str
    input: dict[str, Any] | str
    type: Literal["tool_start"] = "tool_start"


@dataclass(frozen=True, slots=True)
class ToolEndEvent:
    call_id: str
    name: str
    #: What the tool returned, capped like the model's view of it.
    output: str
    #: ok, error or interrupted.
    status: str
    duration_ms: int
    type: Literal["tool_end"] = "tool_end"


@dataclass(frozen=True, slots=True)
class ContextLogEvent:
    """plan_execute: every step's action and result, after the worker ran them."""

    log: list[dict[str, Any]]
    type: Literal["context_log"] = "context_log"


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """A compaction of the working set (docs/working_set.md): `covers` is
    `{first_seq, last_seq, count}`; `status` `done`, `waited` (the turn waited for it),
    `failed`, or for a carry-over `pending` (the turn stopped waiting and went on
    without it)."""

    compaction_id: str | None
    covers: dict[str, int]
    tokens_before: int
    tokens_after: int
    model: str | None
    status: str
    #: The previous segment when this is the summary a rotation carries over
    #: (service/carry_over.py): `covers` counts that segment's messages.
    carried_from: str | None = None
    type: Literal["compaction"] = "compaction"


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """Memory extraction changed the user's memory items (DESIGN.md §13,
    docs/memory.md): each change is `{op, memory_id, text}` — `add` (the new item),
    `update` (the new item, and `supersedes`: the one it replaced, now invalid) or
    `delete` (the item invalidated, with the text it had). Announced by the first turn
    on the key after the extraction ran (extraction runs after a turn, for the next one),
    as a compaction is."""

    changes: list[dict[str, Any]]
    type: Literal["memory"] = "memory"


@dataclass(frozen=True, slots=True)
class ContextTrimmedEvent:
    """Messages of the thread this turn's model does not see, raw or summarised:
    `dropped` of them, the oldest, and why (`budget`: the model's window)."""

    dropped: int
    reason: str
    type: Literal["context_trimmed"] = "context_trimmed"


@dataclass(frozen=True, slots=True)
class TokenEvent:
    content: str
    type: Literal["token"] = "token"


@dataclass(frozen=True, slots=True)
class ReasoningEvent:
    """A piece of the model's reasoning, apart from the answer. Emitted only for a turn
    whose transport asked for it (the Responses API's reasoning items,
    `TurnHandle.reasoning_events`); other transports never see it."""

    content: str
    #: The upstream's signature of the reasoning block that ends here (Anthropic).
    signature: str | None = None
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True, slots=True)
class EndEvent:
    message_id: str | None
    message_count: int
    usage: dict[str, int] = field(default_factory=dict)
    #: complete, or truncated (the reply reached `limits.max_reply_chars` and was cut,
    #: or the model stopped at its output token limit: metadata `stop_reason: length`).
    status: str = "complete"
    type: Literal["end"] = "end"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    code: str
    message: str
    #: The HTTP-style status of the error that ended the turn (404, 409, 502, 504, …),
    #: so a transport answers with the error's own status and keeps no table of codes.
    status: int = 502
    type: Literal["error"] = "error"


TurnEvent = (
    StartEvent
    | RotationEvent
    | RouteEvent
    | ClassificationEvent
    | ActionEvent
    | ActionResultEvent
    | HandoffEvent
    | AudioEvent
    | AudioPartEvent
    | PlanEvent
    | ToolStartEvent
    | ToolEndEvent
    | ContextLogEvent
    | CompactionEvent
    | MemoryEvent
    | ContextTrimmedEvent
    | TokenEvent
    | ReasoningEvent
    | EndEvent
    | ErrorEvent
)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def event_to_dict(event: TurnEvent) -> dict[str, Any]:
    """The wire form. Events are flat, so a shallow copy of the fields is enough (and far
    cheaper than `dataclasses.asdict`, which deep-copies: this runs once per token)."""
    if isinstance(event, RotationEvent):
        return event.to_dict()
    names = _FIELD_NAMES.get(type(event))
    if names is None:
        names = _FIELD_NAMES[type(event)] = tuple(f.name for f in fields(event))
    return {name: getattr(event, name) for name in names}
