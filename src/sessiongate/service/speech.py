"""Speaking: the `Speaker` a turn calls after `end` when it was sent with `speak: true`,
and the synthesis behind `POST /v1/audio/speech` (DESIGN.md §9).

Which voice: the turn's active mode's `voice` (`[modes.<name>] voice`), else the agent's
`voice`, else none (the `audio` event then says `error: "no_voice"`).

A reply is spoken sentence by sentence (speech/sentences.py): its Markdown taken off, cut
to the voice's `max_chars` after a whole sentence, each piece one engine call. The pieces
are joined into one WAV, kept as an artifact of the turn's key (erased with it), and
announced by one `audio` event `{artifact_id, url, voice, duration_ms, media_type}`.
Speaking never fails a turn: whatever goes wrong (engine missing or crashing, timeout,
the artifact too large) becomes an `audio` event with `error` and a log line, and the
reply stands as it was stored.

Bounded: each voice runs at most `max_concurrent` engine calls at once, and one reply or
request gets `timeout` in all, waiting for the engine included.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator, Mapping

from sessiongate.config_routing import ModeConfig
from sessiongate.config_voice import VoiceConfig
from sessiongate.core.events import AudioEvent
from sessiongate.core.keys import KeyRef
from sessiongate.errors import InvalidInput, SessionGateError
from sessiongate.service.agents import AgentProfile, pick_agent
from sessiongate.service.artifacts import ArtifactService, ArtifactTooLarge
from sessiongate.service.turn_handle import InboundTurn, TurnHandle
from sessiongate.speech.base import WAV_MEDIA_TYPE, SpeechEngine, SpeechError
from sessiongate.speech.sentences import prepare, split_sentences
from sessiongate.speech.wav import PcmAudio, concat, parse_wav, silence

log = logging.getLogger("sessiongate.speech")

#: The HTTP status of each SpeechError code, when a request (not a turn) fails.
_STATUS = {"voice_unavailable": 503, "speech_timeout": 504}


class UnknownVoice(InvalidInput):
    code = "unknown_voice"


class NoVoice(InvalidInput):
    code = "no_voice"


class NothingToSpeak(InvalidInput):
    code = "empty_input"


class SpeechFailed(SessionGateError):
    """A SpeechError on its way to an HTTP client: 502, or 503 / 504."""

    status = 502

    def __init__(self, error: SpeechError) -> None:
        super().__init__(error.message, code=error.code)
        self.status = _STATUS.get(error.code, 502)


class SpeechService:
    def __init__(
        self,
        engines: Mapping[str, SpeechEngine],
        voices: Mapping[str, VoiceConfig],
        modes: Mapping[str, ModeConfig],
        agents: Mapping[str, AgentProfile],
        artifacts: ArtifactService | None,
    ) -> None:
        self.engines = dict(engines)
        self.voices = dict(voices)
        self.modes = modes
        self.artifacts = artifacts
        #: `POST /v1/audio/speech` without `voice`: the default agent's voice, else the
        #: first configured one.
        default_agent = pick_agent(dict(agents), None) if agents else None
        self.default_voice = (default_agent.voice if default_agent else None) or next(
            iter(self.engines), None
        )
        # Semaphores belong to an event loop (the CLI bootstraps on one, serves on another).
        self._slots: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()

    # -- which voice -----------------------------------------------------------------

    def voice_for(self, agent: AgentProfile, inbound: InboundTurn) -> str | None:
        """The active mode's voice, else the agent's, else None."""
        mode = inbound.route.mode if inbound.route is not None else None
        if mode is not None:
            configured = self.modes.get(mode)
            if configured is not None and configured.voice is not None:
                return configured.voice
        return agent.voice

    def resolve(self, name: str | None) -> str:
        """A request's `voice`: a configured voice, or the default one."""
        if not self.engines:
            raise NoVoice("this gateway has no voices configured ([voices.<name>])")
        chosen = name if name is not None else self.default_voice
        if chosen not in self.engines:
            raise UnknownVoice(f"no voice named {name!r} is configured")
        return chosen

    # -- the Speaker port ------------------------------------------------------------

    async def speak(
        self, agent: AgentProfile, inbound: InboundTurn, ref: KeyRef, handle: TurnHandle
    ) -> None:
        name = self.voice_for(agent, inbound)
        if name is None or name not in self.engines:
            handle.emit(AudioEvent(None, None, name or "", None, error="no_voice"))
            return
        try:
            limit = self.voices[name].max_chars
            text = await asyncio.to_thread(prepare, handle.reply_text or "", limit)
            if not text:
                raise SpeechError("nothing_to_speak", "the reply has no words to speak")
            audio = await self.synthesize(name, text)
            if self.artifacts is None:
                raise SpeechError("speech_failed", "this gateway keeps no artifacts")
            artifact = await self.artifacts.save(
                ref.owner, audio.to_wav(), WAV_MEDIA_TYPE, key=ref.name, turn_id=handle.turn_id
            )
        except asyncio.CancelledError:
            raise  # the turn itself was cancelled or ran out of time
        except Exception as exc:
            code, expected = _failure_code(exc)
            log.log(
                logging.WARNING if expected else logging.ERROR,
                "speaking a reply failed",
                exc_info=not expected,  # a bug: its traceback, never raised into the turn
                extra={"voice": name, "turn_id": handle.turn_id, "error": code},
            )
            handle.emit(AudioEvent(None, None, name, None, error=code))
            return
        handle.emit(
            AudioEvent(
                artifact.artifact_id,
                f"/v1/artifacts/{artifact.artifact_id}",
                name,
                audio.duration_ms,
                media_type=WAV_MEDIA_TYPE,
            )
        )

    # -- synthesis -------------------------------------------------------------------

    async def synthesize(self, voice: str, text: str, *, speed: float | None = None) -> PcmAudio:
        """All of `text`, sentence by sentence, as one stream; SpeechError on failure."""
        parts = [part async for part in self.sentences(voice, text, speed=speed)]
        return concat(parts)

    async def sentences(
        self, voice: str, text: str, *, speed: float | None = None
    ) -> AsyncGenerator[PcmAudio, None]:
        """Each sentence's audio as soon as it is ready (the first one early), every piece
        after the first led by the engine's pause between sentences. The whole stream
        gets the voice's `timeout`; running out is SpeechError `speech_timeout`."""
        engine = self.engines[voice]
        pieces = split_sentences(text)
        if not pieces:
            raise SpeechError("nothing_to_speak", "there are no words to speak")
        slots = self._slots_for(voice)
        deadline = asyncio.get_running_loop().time() + self.voices[voice].timeout.total_seconds()
        first: PcmAudio | None = None
        for piece in pieces:
            try:
                async with asyncio.timeout_at(deadline):
                    async with slots:
                        audio = parse_wav(await engine.synthesize(piece, speed=speed))
            except TimeoutError:
                raise SpeechError(
                    "speech_timeout", f"the voice {voice!r} did not finish within its timeout"
                ) from None
            if first is None:
                first = audio
            elif engine.sentence_gap_ms:
                gap = silence(audio, engine.sentence_gap_ms)
                audio = PcmAudio(
                    audio.sample_rate, audio.channels, audio.sample_width, gap + audio.frames
                )
            yield audio

    def _slots_for(self, voice: str) -> asyncio.Semaphore:
        per_loop = self._slots.setdefault(asyncio.get_running_loop(), {})
        if voice not in per_loop:
            per_loop[voice] = asyncio.Semaphore(self.voices[voice].max_concurrent)
        return per_loop[voice]

    async def aclose(self) -> None:
        for engine in self.engines.values():
            try:
                await engine.aclose()
            except Exception:  # one engine's failure must not keep the others open
                log.warning("closing a speech engine failed", exc_info=True)


def _failure_code(exc: Exception) -> tuple[str, bool]:
    """The `audio` event's `error`, and whether the failure is one the gateway expects."""
    if isinstance(exc, SpeechError):
        return exc.code, True
    if isinstance(exc, ArtifactTooLarge):
        return "audio_too_large", True
    return "speech_failed", isinstance(exc, SessionGateError)
