"""Configuration of one model (`[models.<name>]`): its provider, where it is, which
environment variable holds its key, its timeouts and retries."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field

from sessiongate.config.base import Duration, Section


class ModelConfig(Section):
    provider: Literal["openai", "anthropic", "offline", "command"] = "offline"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    command: list[str] = []
    connect_timeout: Duration = timedelta(seconds=10)
    read_timeout: Duration = timedelta(seconds=120)
    max_retries: int = Field(2, ge=0, le=10)
    #: The model's context window in tokens (unset: the table of known models in
    #: core/budgets.py, else 8192; the offline and command stand-ins have none).
    context_window: int | None = Field(None, ge=512, le=100_000_000)
