"""Speaking: the `Speaker` a turn calls after `end` when it was sent with `speak: true`,
and the synthesis behind `POST /v1/audio/speech` (DESIGN.md §9).

Which voice: the turn's active mode's `voice` (`[modes.<name>] voice`), else the agent's
`voice`, else none (the `audio` event then says `error: "no_voice"`).

A reply is spoken sentence by sentence (speech/sentences.py): its Markdown taken off, cut
to the voice's `max_chars` after a whole sentence, each piece one engine call. While the
rest is still being synthesised, each group of sentences (speech_parts.py: the first
sentence alone, then about a second of sound or more) is kept as a WAV artifact of the
turn's key and announced by an `audio_part` event, so a player starts early. Then the
pieces are joined into one WAV, kept as an artifact too (all of them erased with the
key), and announced by the `audio` event `{artifact_id, url, voice, duration_ms,
media_type}`: the contract (DESIGN.md §9). A reply of one sentence has no parts.
Speaking never fails a turn: whatever goes wrong (engine missing or crashing, timeout,
the artifact too large) becomes an `audio` event with `error` and a log line, and the
reply stands as it was stored; parts already sent stand too.

Bounded: each voice runs at most `max_concurrent` engine calls at once, and one reply or
request gets `timeout` in all, waiting for the engine included.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing, suppress

from sessiongate.config.routing import ModeConfig
from sessiongate.config.voice import VoiceConfig
from sessiongate.core.artifacts import Artifact
from sessiongate.core.events import AudioEvent, AudioPartEvent
from sessiongate.core.keys import KeyRef
from sessiongate.errors import InvalidInput, SessionGateError
from sessiongate.service.agents import AgentProfile, pick_agent
from sessiongate.service.artifacts import ArtifactService, ArtifactTooLarge
from sessiongate.service.speech_parts import PartGrouper, ReadyPart
from sessiongate.service.turn.handle import InboundTurn, TurnHandle
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
            artifact, audio = await self._speak_in_parts(name, ref, handle)
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

    async def _speak_in_parts(
        self, voice: str, ref: KeyRef, handle: TurnHandle
    ) -> tuple[Artifact, PcmAudio]:
        """The reply synthesised sentence by sentence, an `audio_part` sent as each group
        of sentences is ready (speech_parts.py decides the groups), then the whole kept as
        one artifact. Raises on any failure; parts made before it are still sent."""
        artifacts = self.artifacts
        if artifacts is None:  # before any engine call: no part could be kept either
            raise SpeechError("speech_failed", "this gateway keeps no artifacts")
        limit = self.voices[voice].max_chars
        text = await asyncio.to_thread(prepare, handle.reply_text or "", limit)
        pieces = split_sentences(text)
        if not pieces:
            raise SpeechError("nothing_to_speak", "the reply has no words to speak")
        grouper = PartGrouper(len(pieces))
        heard: list[PcmAudio] = []
        # Parts are kept (a file written and synced, a row) by a task of their own, in
        # order, while the engine goes on with the next sentences: keeping ten parts one
        # after the other between engine calls would hold the whole reply up by as many
        # disk syncs.
        ready: asyncio.Queue[ReadyPart | None] = asyncio.Queue()
        keeper = asyncio.create_task(_keep_parts(artifacts, ready, voice, ref, handle))
        try:
            async with aclosing(self._spoken(voice, pieces)) as spoken:
                async for audio in spoken:
                    if keeper.done():
                        break  # a part could not be kept: its error is raised below
                    heard.append(audio)
                    if (part := grouper.add(audio)) is not None:
                        ready.put_nowait(part)
            if (last := grouper.finish()) is not None:
                ready.put_nowait(last)
        except asyncio.CancelledError:
            keeper.cancel()
            raise
        except Exception:
            # The engine failed: the parts it made before are still kept and sent.
            ready.put_nowait(None)
            with suppress(Exception):
                await keeper
            raise
        ready.put_nowait(None)
        await keeper  # raises what failed while keeping a part
        whole = concat(heard)
        kept = await artifacts.save(
            ref.owner, whole.to_wav(), WAV_MEDIA_TYPE, key=ref.name, turn_id=handle.turn_id
        )
        return kept, whole

    # -- synthesis -------------------------------------------------------------------

    async def synthesize(self, voice: str, text: str, *, speed: float | None = None) -> PcmAudio:
        """All of `text`, sentence by sentence, as one stream; SpeechError on failure."""
        parts = [part async for part in self.sentences(voice, text, speed=speed)]
        return concat(parts)

    def sentences(
        self, voice: str, text: str, *, speed: float | None = None
    ) -> AsyncGenerator[PcmAudio, None]:
        """Each sentence's audio as soon as it is ready (the first one early), every piece
        after the first led by the engine's pause between sentences. The whole stream
        gets the voice's `timeout`; running out is SpeechError `speech_timeout`."""
        return self._spoken(voice, split_sentences(text), speed=speed)

    async def _spoken(
        self, voice: str, pieces: list[str], *, speed: float | None = None
    ) -> AsyncGenerator[PcmAudio, None]:
        """`sentences`, for text already cut into pieces. The voice's `timeout` is a
        deadline on the wall clock: time the caller spends between pieces counts against
        it too."""
        engine = self.engines[voice]
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


async def _keep_parts(
    artifacts: ArtifactService,
    ready: asyncio.Queue[ReadyPart | None],
    voice: str,
    ref: KeyRef,
    handle: TurnHandle,
) -> None:
    """Each part, as it comes, kept as an artifact of the turn's key and announced, until
    None; the first failure ends it (and, through the caller, the speaking)."""
    while (part := await ready.get()) is not None:
        kept = await artifacts.save(
            ref.owner, part.audio.to_wav(), WAV_MEDIA_TYPE, key=ref.name, turn_id=handle.turn_id
        )
        handle.emit(
            AudioPartEvent(
                part.index,
                kept.artifact_id,
                f"/v1/artifacts/{kept.artifact_id}",
                voice,
                part.audio.duration_ms,
                WAV_MEDIA_TYPE,
            )
        )


def _failure_code(exc: Exception) -> tuple[str, bool]:
    """The `audio` event's `error`, and whether the failure is one the gateway expects."""
    if isinstance(exc, SpeechError):
        return exc.code, True
    if isinstance(exc, ArtifactTooLarge):
        return "audio_too_large", True
    return "speech_failed", isinstance(exc, SessionGateError)
