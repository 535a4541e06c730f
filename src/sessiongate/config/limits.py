"""Configuration of request and resource limits (`[limits]`): sizes of messages, bodies,
headers, frames, replies, attachments and artifacts; slow-client deadlines; how long
turn outcomes and events are kept for retries and replays."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

from sessiongate.config.base import Duration, Section


class LimitsConfig(Section):
    max_content_chars: int = Field(100_000, ge=1, le=10_000_000)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    max_recall_results: int = Field(20, ge=1, le=200)
    #: A reply longer than this is cut, kept and marked `truncated` (and the model's
    #: stream is closed), so one runaway reply never bloats every later turn.
    max_reply_chars: int = Field(200_000, ge=100, le=50_000_000)
    #: Request line plus headers, in bytes, and how many headers: over either → 431,
    #: before any handler or authentication runs.
    max_header_bytes: int = Field(16_384, ge=1024, le=1_048_576)
    max_header_count: int = Field(100, ge=8, le=1000)
    #: A client must finish sending its headers within this time, and must keep its body
    #: arriving with no gap longer than `body_timeout`.
    header_timeout: Duration = timedelta(seconds=10)
    body_timeout: Duration = timedelta(seconds=30)
    #: How long a turn's outcome is kept for retries with its `Idempotency-Key`.
    idempotency_retention: Duration = timedelta(hours=24)
    #: A finished turn's events stay readable again (GET /v1/turns/{id}/events, a
    #: socket's `resume`) this long, in this process; at most `turn_replay_turns` of them
    #: are kept (the oldest dropped first), so memory stays bounded.
    turn_replay_retention: Duration = timedelta(minutes=10)
    turn_replay_turns: int = Field(1000, ge=0, le=1_000_000)
    #: WebSocket: the largest frame (bytes) and the deepest JSON nesting a frame may hold;
    #: a frame over either gets an error frame and the socket stays open.
    ws_max_frame_bytes: int = Field(1_048_576, ge=1024, le=64 * 1_048_576)
    ws_max_json_depth: int = Field(32, ge=2, le=1000)
    #: WebSocket frames waiting behind a running turn, per socket; one more is refused
    #: with an error frame naming it.
    ws_max_queued_frames: int = Field(64, ge=1, le=10_000)
    #: The largest file a tool may keep as an artifact (an image, audio), in bytes.
    max_artifact_bytes: int = Field(25 * 1_048_576, ge=1024, le=1_073_741_824)
    #: Images sent with a turn (`attachments`): how many, and the largest one (decoded
    #: bytes). Turn routes accept bodies large enough for them on top of max_body_bytes.
    max_attachments: int = Field(1, ge=0, le=16)
    max_attachment_bytes: int = Field(5 * 1_048_576, ge=1024, le=64 * 1_048_576)
    #: A tool call whose arguments are longer than this is not run (an error result tells
    #: the model) and only their head is kept; calls past `max_tool_calls_per_step` in one
    #: model step are answered the same way (agents/tool_steps.py).
    max_tool_argument_chars: int = Field(100_000, ge=1_000, le=10_000_000)
    max_tool_calls_per_step: int = Field(32, ge=1, le=1_000)
    #: Session keys one user may own, and segments one key may hold: one more (a turn on
    #: a new key, a rotation, an import) is refused with 409 `key_limit_reached` /
    #: `segment_limit_reached` and nothing is stored (core/session_caps.py).
    max_keys_per_user: int = Field(1000, ge=1, le=10_000_000)
    max_segments_per_key: int = Field(10_000, ge=1, le=10_000_000)
    #: Valid memory items one user may keep (DESIGN.md §13): one more (the API, the
    #: memory_save tool, extraction, an import) is refused with 409
    #: `memory_limit_reached`. Superseded items (their history) do not count.
    max_memory_items_per_user: int = Field(1000, ge=1, le=1_000_000)
    #: The body of `POST /v1/import` (an export file), read as it arrives, in place of
    #: max_body_bytes: over it → 413 `payload_too_large`.
    max_import_bytes: int = Field(64 * 1_048_576, ge=1024, le=4 * 1_073_741_824)

    @property
    def ws_transport_max_bytes(self) -> int:
        """What the WebSocket server itself accepts per message (beyond it, the socket is
        closed with 1009): well above `ws_max_frame_bytes`, so a frame a little too large
        gets an error frame and the socket stays open."""
        return max(4 * self.ws_max_frame_bytes, 16 * 1_048_576)
