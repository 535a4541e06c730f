"""`POST /v1/audio/speech`: OpenAI's text-to-speech endpoint on the gateway's voices.

The body is OpenAI's: `{input, voice?, response_format?, speed?, model?, instructions?,
stream_format?}`. `voice` names a `[voices]` entry (default: the default agent's voice,
else the first configured); `model` and `instructions` are accepted and ignored (the voice
decides the engine); any other field is refused, as OpenAI refuses unknown arguments.
`input` is 1-4,096 characters, OpenAI's limit. The answer is the audio itself:

- `wav` (the default): one complete file, its sizes filled in;
- `pcm`: OpenAI's raw 24 kHz 16-bit mono, streamed sentence by sentence, so the first
  audio leaves as soon as the first sentence is synthesised;
- `mp3`, `opus`, `aac`, `flac`: encoded when this host has an encoder (speech/encode.py),
  else 400 `unsupported_format`.

Auth required, like every /v1 route. Nothing is kept: this is not a turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Literal

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser
from sessiongate.errors import InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.speech import NothingToSpeak, NoVoice, SpeechFailed, SpeechService
from sessiongate.speech.base import SpeechError
from sessiongate.speech.encode import (
    MEDIA_TYPES,
    PCM_RATE,
    UnsupportedFormat,
    available_formats,
    encode,
    encoder_for,
)
from sessiongate.speech.sentences import speakable
from sessiongate.speech.wav import to_pcm16_mono

router = APIRouter(prefix="/v1")
log = logging.getLogger("sessiongate.speech")

#: OpenAI's limit on `input`.
MAX_INPUT_CHARS = 4096


class SpeechBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    input: str
    voice: str | None = Field(None, max_length=64)
    response_format: str = Field("wav", max_length=16)
    speed: float | None = Field(None, ge=0.25, le=4.0)
    #: Accepted for OpenAI's clients and ignored: the voice decides the engine.
    model: str | None = Field(None, max_length=200)
    instructions: str | None = Field(None, max_length=4096)
    stream_format: Literal["audio"] | None = None


class InputTooLong(InvalidInput):
    code = "input_too_long"


@router.post("/audio/speech")
async def create_speech(body: SpeechBody, user: CurrentUser, request: Request) -> Response:
    engine: Engine = request.app.state.engine
    if not body.input.strip():
        raise NothingToSpeak("input is empty")
    if len(body.input) > MAX_INPUT_CHARS:
        raise InputTooLong(f"input may hold at most {MAX_INPUT_CHARS} characters")
    speech = engine.speech
    if speech is None:
        raise NoVoice("this gateway has no voices configured ([voices.<name>])")
    voice = speech.resolve(body.voice)
    fmt = body.response_format
    if fmt not in MEDIA_TYPES:
        raise UnsupportedFormat(
            f"response_format {fmt[:16]!r} is not one of {', '.join(MEDIA_TYPES)};"
            f" this gateway can answer {', '.join(available_formats())}"
        )
    argv = encoder_for(fmt)  # 400 unsupported_format when this host has no encoder for it
    text = speakable(body.input)
    if not text:
        raise NothingToSpeak("input has no words to speak")
    headers = {"X-Voice": voice, "Cache-Control": "no-store"}
    if fmt == "pcm":
        return await _pcm_stream(speech, voice, text, body.speed, headers)
    try:
        audio = await speech.synthesize(voice, text, speed=body.speed)
        data = audio.to_wav()
        if argv is not None:
            async with asyncio.timeout(speech.voices[voice].timeout.total_seconds()):
                data = await encode(data, argv)
    except TimeoutError:
        raise SpeechFailed(SpeechError("speech_timeout", "encoding took too long")) from None
    except SpeechError as exc:
        raise SpeechFailed(exc) from None
    headers["X-Audio-Duration-Ms"] = str(audio.duration_ms)
    return Response(data, media_type=MEDIA_TYPES[fmt], headers=headers)


async def _pcm_stream(
    speech: SpeechService, voice: str, text: str, speed: float | None, headers: dict[str, str]
) -> Response:
    """The first sentence is synthesised before the answer starts, so a failure is still
    an error status; a failure after it ends the stream early (and is logged)."""
    pieces = speech.sentences(voice, text, speed=speed)
    try:
        first = to_pcm16_mono(await anext(pieces), PCM_RATE)
    except SpeechError as exc:
        await pieces.aclose()
        raise SpeechFailed(exc) from None

    async def body() -> AsyncIterator[bytes]:
        try:
            yield first
            async for piece in pieces:
                yield to_pcm16_mono(piece, PCM_RATE)
        except SpeechError as exc:
            log.warning("speech stream cut short", extra={"voice": voice, "error": exc.code})
        finally:
            await pieces.aclose()

    headers["X-Sample-Rate"] = str(PCM_RATE)
    return StreamingResponse(body(), media_type=MEDIA_TYPES["pcm"], headers=headers)
