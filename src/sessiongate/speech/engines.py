"""Building each `[voices.<name>]` entry's engine at start-up.

Nothing slow happens here: no process, no model, no connection. A voice whose program or
package is missing still builds (a warning is logged): the gateway serves, and speaking
with that voice answers `voice_unavailable` until it is installed. What would make every
call fail for a configuration reason (an unset `api_key_env` variable) stops start-up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from sessiongate.config.models import ModelConfig
from sessiongate.config.voice import VoiceConfig
from sessiongate.errors import ConfigError
from sessiongate.models.retry import PLACEHOLDER_KEY, api_key_for
from sessiongate.speech.base import SpeechEngine
from sessiongate.speech.espeak import EspeakEngine
from sessiongate.speech.openai_speech import DEFAULT_MODEL, OpenAISpeechEngine
from sessiongate.speech.piper import PiperEngine

log = logging.getLogger("sessiongate.speech")


def build_speech_engine(
    name: str, config: VoiceConfig, models: Mapping[str, ModelConfig]
) -> SpeechEngine:
    engine: EspeakEngine | PiperEngine | OpenAISpeechEngine
    if config.provider == "espeak":
        engine = EspeakEngine(voice=config.voice, speed=config.speed, binary=config.binary)
    elif config.provider == "piper":
        engine = PiperEngine(voice=config.voice, speed=config.speed)
    else:
        engine = _openai(name, config, models)
    if not engine.available():
        log.warning(
            "voice %s cannot speak here: %s is not installed (scripts/speech.sh)",
            name,
            engine.name,
        )
    return engine


def _openai(
    name: str, config: VoiceConfig, models: Mapping[str, ModelConfig]
) -> OpenAISpeechEngine:
    timeout = config.timeout.total_seconds()
    if config.model is not None:
        model = models[config.model]  # check_voices made sure it exists
        return OpenAISpeechEngine(
            model=config.speech_model or model.model or DEFAULT_MODEL,
            voice=config.voice,
            speed=config.speed,
            base_url=model.base_url or None,
            api_key=api_key_for(config.model, model),
            timeout=min(timeout, model.read_timeout.total_seconds()),
            connect_timeout=model.connect_timeout.total_seconds(),
            max_retries=min(model.max_retries, 1),
        )
    key = PLACEHOLDER_KEY
    if config.api_key_env:
        key = os.environ.get(config.api_key_env, "").strip()
        if not key:
            raise ConfigError(
                f"voices.{name}.api_key_env: environment variable {config.api_key_env} is not set"
            )
    return OpenAISpeechEngine(
        model=config.speech_model or DEFAULT_MODEL,
        voice=config.voice,
        speed=config.speed,
        base_url=config.base_url,
        api_key=key,
        timeout=timeout,
    )


def build_speech_engines(
    voices: Mapping[str, VoiceConfig], models: Mapping[str, ModelConfig]
) -> dict[str, SpeechEngine]:
    return {name: build_speech_engine(name, config, models) for name, config in voices.items()}
