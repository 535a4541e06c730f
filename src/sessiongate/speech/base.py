"""The speech engine port: text in, a WAV file out.

Every engine answers the same format, whatever it is underneath: a complete RIFF/WAVE
file of signed 16-bit little-endian PCM (`wave` reads it; its sizes are right, even when
the engine itself wrote a streaming header). The sample rate is the engine's own
(espeak-ng and the shipped piper voice: 22,050 Hz; an OpenAI-compatible server: whatever
it answers, OpenAI's is 24,000 Hz); one channel for the local engines.

Lifecycle: an engine is built from its `[voices.<name>]` entry at start-up without
touching anything slow (no process started, no model loaded, no connection made), loads
what it needs at its first `synthesize`, and is released with `aclose()` at shutdown.
A failure is a `SpeechError` with a stable code, never the engine's own exception.
"""

from __future__ import annotations

from typing import Protocol

#: What `synthesize` answers.
WAV_MEDIA_TYPE = "audio/wav"


class SpeechError(Exception):
    """Synthesis failed. `code` is what an `audio` event's `error` or an HTTP error says:

    - `voice_unavailable`: the engine cannot run here (program or voice package missing)
    - `speech_failed`: the engine ran and failed (exit status, server error, no audio)
    - `bad_audio`: what came back is not audio the gateway can read
    - `speech_timeout`: no audio within the voice's `timeout`
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SpeechEngine(Protocol):
    #: `provider:voice`, for logs and the bench (never a secret).
    name: str
    #: Silence put between sentences synthesised one by one (espeak-ng ends each
    #: utterance with its own pause; piper and most servers do not).
    sentence_gap_ms: int

    async def synthesize(self, text: str, *, speed: float | None = None) -> bytes:
        """`text` (one sentence or a few) as a WAV file, or SpeechError. `speed` (0.25-4.0,
        1.0 the engine's normal pace) replaces the voice's configured one."""
        ...

    async def aclose(self) -> None:
        """Release what the engine holds (HTTP clients, loaded models). Idempotent."""
        ...
