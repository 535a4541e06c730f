"""The `openai` provider: any OpenAI-compatible `POST /v1/audio/speech` server (OpenAI,
openedai-speech, Kokoro-FastAPI, LocalAI, …) through the official SDK's `audio.speech`.

WAV is always asked for (`response_format = "wav"`), so every provider hands the gateway
the same thing to join, measure and keep. The answer is read as a stream and refused past
`max_bytes`, so a misbehaving server cannot fill memory. Server text never reaches a
client: failures become a `SpeechError` with a fixed message, the detail (redacted) goes
to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from sessiongate.models.retry import PLACEHOLDER_KEY, redact
from sessiongate.speech.base import SpeechError
from sessiongate.speech.wav import parse_wav

log = logging.getLogger("sessiongate.speech")

DEFAULT_VOICE = "alloy"
DEFAULT_MODEL = "tts-1"
#: The most bytes one answer may hold (about 20 minutes of 24 kHz 16-bit mono).
DEFAULT_MAX_BYTES = 64 * 1_048_576


class OpenAISpeechEngine:
    sentence_gap_ms = 150

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        voice: str | None = None,
        speed: float = 1.0,
        base_url: str | None = None,
        api_key: str = PLACEHOLDER_KEY,
        timeout: float = 60.0,
        connect_timeout: float = 10.0,
        max_retries: int = 1,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.model = model
        self.voice = voice or DEFAULT_VOICE
        self.speed = speed
        self.base_url = base_url
        self.name = f"openai:{model}:{self.voice}"
        self._key = api_key
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._max_retries = max_retries
        self._max_bytes = max_bytes
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def available(self) -> bool:
        return True  # a server is only known to be up by asking it

    def _client_for_loop(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        # A client belongs to the loop it was made on (the CLI bootstraps on one loop and
        # serves on the next): a new loop gets a new client.
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self._key,
                base_url=self.base_url,
                timeout=openai.Timeout(self._timeout, connect=self._connect_timeout),
                max_retries=self._max_retries,
            )
            self._loop = loop
        return self._client

    async def synthesize(self, text: str, *, speed: float | None = None) -> bytes:
        import openai

        client = self._client_for_loop()
        try:
            async with client.audio.speech.with_streaming_response.create(
                model=self.model,
                voice=self.voice,
                input=text,
                response_format="wav",
                speed=speed or self.speed,
            ) as response:
                body = bytearray()
                async for piece in response.iter_bytes():
                    body += piece
                    if len(body) > self._max_bytes:
                        raise SpeechError(
                            "bad_audio",
                            f"the speech server answered more than {self._max_bytes} bytes",
                        )
        except SpeechError:
            raise
        except openai.APITimeoutError:
            raise SpeechError(
                "speech_timeout", "the speech server did not answer in time"
            ) from None
        except openai.APIConnectionError as exc:
            self._log("unreachable", exc)
            raise SpeechError("speech_failed", "the speech server could not be reached") from None
        except openai.APIStatusError as exc:
            self._log(f"HTTP {exc.status_code}", exc)
            raise SpeechError(
                "speech_failed", f"the speech server answered HTTP {exc.status_code}"
            ) from None
        except Exception as exc:  # a body that breaks off, a transport error
            self._log("failed", exc)
            raise SpeechError("speech_failed", "the speech server's answer broke off") from None
        audio = parse_wav(bytes(body))
        if not audio.frames:
            raise SpeechError("speech_failed", "the speech server answered no audio")
        return audio.to_wav()

    def _log(self, what: str, exc: BaseException) -> None:
        log.warning(
            "speech server %s",
            what,
            extra={"voice": self.name, "detail": redact(f"{type(exc).__name__}: {exc}", self._key)},
        )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(RuntimeError):  # its loop is gone (the CLI's first loop)
                await client.close()
