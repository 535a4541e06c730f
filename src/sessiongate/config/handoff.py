"""Configuration of seed 000's hybrid hand-off (`[agents.<name>.handoff]`) and of the
video tool it can run (`[tools.video]`) (DESIGN.md §9).

Kept apart so each file stays about one thing; `AgentConfig` in config/agents.py
and `ToolsConfig` in config/tools.py hold these sections.
"""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from sessiongate.config.base import Duration, Section
from sessiongate.core.handoff.intents import Intent

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: The longest pattern accepted (patterns run on every finished reply of the agent).
MAX_PATTERN_CHARS = 500


class HandoffConfig(Section):
    """`[agents.<name>.handoff]`: for an agent whose model cannot call tools, keep the
    promises its replies make ("let me draw that for you") by running the tool itself."""

    enabled: bool = True
    #: The control model of stage 2 (default: the agent's `control_model`).
    model: str | None = None
    #: Stage 2's answer must be at least this sure, or the reply stays as it is.
    min_confidence: float = Field(0.7, ge=0.0, le=1.0)
    #: How long stage 2 (the control model) may take.
    timeout: Duration = timedelta(seconds=20)
    #: How long stage 3 (the tool) may take.
    tool_timeout: Duration = timedelta(minutes=5)
    #: The tool that keeps each intent's promise (an intent with no tool is never
    #: detected), and for the primary user the tool that does instead.
    tools: dict[Intent, str] = {}
    tools_primary: dict[Intent, str] = {}
    #: Regular expressions (case-insensitive) per intent, added to the built-in ones;
    #: for the intents in `replace_patterns` they are used instead of them.
    patterns: dict[Intent, list[str]] = {}
    replace_patterns: list[Intent] = []
    #: When the patterns find nothing, a small classifier shipped with the package reads
    #: the reply for the built-in intents (not for those in `replace_patterns`).
    learned: bool = True
    #: The most of a search result appended to the reply.
    max_result_chars: int = Field(1500, ge=100, le=20_000)

    @field_validator("tools", "tools_primary")
    @classmethod
    def _tool_names(cls, value: dict[Intent, str]) -> dict[Intent, str]:
        for intent, name in value.items():
            if not _TOOL_NAME.fullmatch(name):
                raise ValueError(f"{intent}: {name!r} is not a tool name")
        return value

    @field_validator("patterns")
    @classmethod
    def _compile(cls, value: dict[Intent, list[str]]) -> dict[Intent, list[str]]:
        for intent, patterns in value.items():
            for pattern in patterns:
                if not pattern or len(pattern) > MAX_PATTERN_CHARS:
                    raise ValueError(f"{intent}: a pattern is 1-{MAX_PATTERN_CHARS} characters")
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{intent}: {pattern!r} is not a regex ({exc})") from None
        return value

    @model_validator(mode="after")
    def _something_to_do(self) -> HandoffConfig:
        if self.enabled and not (self.tools or self.tools_primary):
            raise ValueError(
                "a hand-off needs a tool for at least one intent: tools.image, tools.video"
                " or tools.search (and/or tools_primary.<intent>)"
            )
        for intent in self.replace_patterns:
            if not self.patterns.get(intent):
                raise ValueError(
                    f"replace_patterns names {intent!r} but patterns.{intent} is empty:"
                    " it would never match"
                )
        return self


class VideoToolConfig(Section):
    """`[tools.video]`: `video_generate` against an HTTP job API — submit the prompt,
    poll the job, fetch the video. The defaults follow OpenAI's `/v1/videos` shape."""

    #: The API's root (unset: no `video_generate` tool).
    base_url: str | None = None
    #: Sent as `model` in the submit body when set.
    model: str | None = None
    #: The environment variable holding the bearer key (unset: no Authorization header).
    api_key_env: str | None = None
    #: `POST` with `{"prompt", "model"?, …parameters}`; answers the job (JSON).
    submit_path: str = "/v1/videos"
    #: `GET`: the job's state (JSON). `{id}` is the job id.
    status_path: str = "/v1/videos/{id}"
    #: `GET`: the finished video's bytes.
    content_path: str = "/v1/videos/{id}/content"
    #: Where the job's id and state are in the JSON answers.
    id_field: str = "id"
    status_field: str = "status"
    #: States that mean done, and failed (anything else: still running).
    done_statuses: list[str] = ["completed", "succeeded", "done"]
    failed_statuses: list[str] = ["failed", "error", "cancelled", "canceled", "expired"]
    #: Extra fields of the submit body (`seconds`, `size`, …).
    parameters: dict[str, str | int | float | bool] = {}
    #: One HTTP request (submit, one poll, the download).
    request_timeout: Duration = timedelta(seconds=30)
    #: Between polls.
    poll_interval: Duration = timedelta(seconds=2)
    #: From submit to the video's last byte; a job still running then is given up.
    max_wait: Duration = timedelta(minutes=4)

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value.rstrip("/") if value else value

    @field_validator("submit_path", "status_path", "content_path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("a path starts with /")
        return value

    @field_validator("poll_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be more than 0")
        return value


def check_handoff(agent: str, handoff: HandoffConfig | None, models: set[str]) -> list[str]:
    """Cross-section checks for `config check` and start-up: the control model named
    must be defined."""
    if handoff is None or handoff.model is None or handoff.model in models:
        return []
    return [f"agents.{agent}.handoff.model: model {handoff.model!r} is not defined in [models]"]
