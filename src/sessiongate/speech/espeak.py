"""The `espeak` provider: espeak-ng (Debian's package), one process per call.

The text goes in on stdin (never on the command line, so nothing in it can be read as an
option), SSML off, and the WAV comes back on stdout. A process that outlives the call
(timeout, cancellation) is killed and reaped before the call returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil

from sessiongate.speech.base import SpeechError
from sessiongate.speech.wav import parse_wav

log = logging.getLogger("sessiongate.speech")

#: espeak-ng's own default, in words per minute; `speed` scales it.
DEFAULT_WPM = 175
DEFAULT_VOICE = "en-us"
#: What espeak-ng may print on stderr that reaches the log.
_STDERR_LIMIT = 300


class EspeakEngine:
    sentence_gap_ms = 0  # espeak-ng ends every utterance with its own pause

    def __init__(
        self, *, voice: str | None = None, speed: float = 1.0, binary: str = "espeak-ng"
    ) -> None:
        self.voice = voice or DEFAULT_VOICE
        self.binary = binary
        self.speed = speed
        self.name = f"espeak:{self.voice}"

    def available(self) -> bool:
        return shutil.which(self.binary) is not None

    async def synthesize(self, text: str, *, speed: float | None = None) -> bytes:
        program = shutil.which(self.binary)
        if program is None:
            raise SpeechError("voice_unavailable", f"{self.binary} is not installed")
        wpm = max(80, min(450, round(DEFAULT_WPM * (speed or self.speed))))  # espeak-ng's range
        argv = [program, "--stdout", "--stdin", "-b", "1", "-v", self.voice, "-s", str(wpm)]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise SpeechError("voice_unavailable", f"{self.binary} cannot start: {exc}") from None
        try:
            try:
                stdout, stderr = await process.communicate(text.encode("utf-8"))
            except (BrokenPipeError, ConnectionResetError, RuntimeError):
                # It exited before reading its input (asyncio reports a write to the
                # closed pipe as one of these, depending on the race): a failed run.
                stdout, stderr = b"", b""
                await process.wait()
        finally:
            if process.returncode is None:  # cancelled or timed out: never leave it running
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with contextlib.suppress(Exception):
                    await asyncio.shield(process.wait())
        if process.returncode != 0 or not stdout:
            log.warning(
                "espeak-ng failed",
                extra={
                    "voice": self.voice,
                    "exit_code": process.returncode,
                    "stderr": stderr.decode("utf-8", "replace")[:_STDERR_LIMIT],
                },
            )
            raise SpeechError("speech_failed", f"espeak-ng exited with {process.returncode}")
        audio = parse_wav(stdout)
        if not audio.frames:
            raise SpeechError("speech_failed", "espeak-ng produced no audio")
        return audio.to_wav()

    async def aclose(self) -> None:
        return None  # nothing outlives a call
