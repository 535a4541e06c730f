"""The formats `POST /v1/audio/speech` can answer, from the WAV every engine makes.

`wav` and `pcm` are always there (`pcm` as OpenAI defines it: 24 kHz signed 16-bit
little-endian mono, no header). The others need an encoder program on this host, looked
up on PATH at each request (installing one needs no restart): `mp3` with `lame` or
`ffmpeg`, `opus` (Ogg Opus) with `opusenc` or `ffmpeg`, `aac` (ADTS) and `flac` with
`ffmpeg`. A format without one is refused with 400 `unsupported_format`, naming the
formats this host has.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil

from sessiongate.errors import InvalidInput
from sessiongate.speech.base import SpeechError

#: OpenAI's `response_format` values and what each is served as.
MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
}
#: OpenAI's `pcm`: the rate every `pcm` answer is resampled to.
PCM_RATE = 24_000

_FFMPEG = ["-hide_banner", "-loglevel", "error", "-nostdin", "-f", "wav", "-i", "pipe:0"]
#: Per format, the encoders tried in order: (program, arguments after it). Each reads a
#: WAV file on stdin and writes the encoded file on stdout.
ENCODERS: dict[str, list[tuple[str, list[str]]]] = {
    "mp3": [
        ("lame", ["--quiet", "-b", "64", "-", "-"]),
        ("ffmpeg", [*_FFMPEG, "-c:a", "libmp3lame", "-b:a", "64k", "-f", "mp3", "pipe:1"]),
    ],
    "opus": [
        ("opusenc", ["--quiet", "--bitrate", "32", "-", "-"]),
        ("ffmpeg", [*_FFMPEG, "-c:a", "libopus", "-b:a", "32k", "-f", "ogg", "pipe:1"]),
    ],
    "aac": [("ffmpeg", [*_FFMPEG, "-c:a", "aac", "-b:a", "64k", "-f", "adts", "pipe:1"])],
    "flac": [("ffmpeg", [*_FFMPEG, "-c:a", "flac", "-f", "flac", "pipe:1"])],
}


class UnsupportedFormat(InvalidInput):
    code = "unsupported_format"


def encoder_for(fmt: str) -> list[str] | None:
    """The argv that encodes `fmt` here (None: wav or pcm, which need none)."""
    if fmt in ("wav", "pcm"):
        return None
    for program, arguments in ENCODERS.get(fmt, []):
        found = shutil.which(program)
        if found is not None:
            return [found, *arguments]
    raise UnsupportedFormat(
        f"response_format {fmt!r} is not available on this gateway;"
        f" it can answer {', '.join(available_formats())}"
    )


def available_formats() -> list[str]:
    return ["wav", "pcm"] + [
        fmt
        for fmt, encoders in ENCODERS.items()
        if any(shutil.which(program) for program, _ in encoders)
    ]


async def encode(wav: bytes, argv: list[str]) -> bytes:
    """Run one encoder over a WAV file; the process is killed if the caller gives up."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        raise SpeechError("speech_failed", "the audio encoder cannot start") from None
    try:
        try:
            stdout, _ = await process.communicate(wav)
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            stdout = b""  # it exited before reading its input: a failed run
            await process.wait()
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(process.wait())
    if process.returncode != 0 or not stdout:
        raise SpeechError("speech_failed", f"the audio encoder exited with {process.returncode}")
    return stdout
