"""Spoken replies part by part (issue 10: "long replies are spoken sentence by sentence so
the first audio is ready before the whole text is synthesised").

The grouping itself (pure): the first sentence alone, then at least a second of sound per
part, never more than 64 parts, nothing lost or reordered. The order holds when keeping
a part is slower than speaking (a slow disk, stood in for), and a part that cannot be
kept ends the speaking with its error. Then through a real gateway on
loopback with real espeak-ng (piper in one test): `audio_part` events after `end`, in
order, before the final `audio`; each part a WAV of its own sentences; the parts played
back to back are the whole reply; a one-sentence reply has no parts; a voice that breaks
or stalls on the second sentence keeps part 0 and ends with an `audio` error; parts never
reach a non-streaming answer; a WebSocket gets them as frames.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
import wave
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import httpx
import numpy as np
import pytest
from websockets.sync.client import connect

from sessiongate.config.voice import VoiceConfig
from sessiongate.core.events import AudioEvent, AudioPartEvent
from sessiongate.core.keys import KeyRef
from sessiongate.models.base import ReplyModel, WireMessage
from sessiongate.service.agents import AgentProfile
from sessiongate.service.artifacts import ArtifactService, ArtifactTooLarge
from sessiongate.service.speech import SpeechService
from sessiongate.service.speech_parts import MAX_PARTS, MIN_PART_MS, PartGrouper
from sessiongate.service.turn.handle import InboundTurn, TurnHandle
from sessiongate.speech.espeak import EspeakEngine
from sessiongate.speech.sentences import speakable, split_sentences
from sessiongate.speech.wav import PcmAudio, concat
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway
from tests.support.helpers import ScriptedModel
from tests.test_speech import check_speech, needs_espeak

#: Ten sentences, each long enough to be its own piece and over a second of speech.
LONG_REPLY = (
    "Here is the plan for your Saturday morning in the city."
    " The market opens at eight, so leave the house a little before then."
    " Bring the blue bags, because the stalls no longer hand out plastic ones."
    " The baker on the corner sells out of rye bread by about ten."
    " After that, the library returns are due, two novels and a cookbook."
    " Your sister asked whether you could pick up the cake for Sunday."
    " The cake shop closes early on Saturdays, at noon sharp."
    " Lunch could be at the new noodle place next to the station."
    " It rained there last weekend, so an umbrella is a good idea."
    " Enjoy the day, and tell me if anything changes."
)
SHORT_REPLY = "Sure, I have added milk to your shopping list."
#: The marker words make the wrapped espeak-ng fail or hang on the second sentence.
BREAKING_REPLY = (
    "This first sentence is spoken without any trouble at all."
    " The second one breaks the engine, on purpose."
    " A third sentence is never reached by the voice."
)
STALLING_REPLY = BREAKING_REPLY.replace("breaks", "stalls")
PIPER_REPLY = (
    "Good morning, the kettle is on and the news is quiet."
    " Your first meeting is at ten, in the small room."
    " Nothing else needs you before lunch."
)


# -- the grouping, pure -----------------------------------------------------------------


def _audio(milliseconds: int, fill: int = 1) -> PcmAudio:
    # 1 kHz mono 16-bit: a millisecond is one frame; `fill` tells sentences apart.
    return PcmAudio(1000, 1, 2, fill.to_bytes(2, "little") * milliseconds)


def _group(durations: Sequence[int], **limits: int) -> list[PcmAudio]:
    grouper = PartGrouper(len(durations), **limits)
    parts: list[PcmAudio] = []
    for number, duration in enumerate(durations):
        ready = grouper.add(_audio(duration, number + 1))
        if ready is not None:
            assert ready.index == len(parts)
            parts.append(ready.audio)
    last = grouper.finish()
    if last is not None:
        assert last.index == len(parts)
        parts.append(last.audio)
    return parts


def test_the_first_sentence_is_a_part_alone_and_later_parts_hold_a_second() -> None:
    parts = _group([500, 400, 400, 400, 2000, 100])
    assert [p.duration_ms for p in parts] == [500, 1200, 2000, 100]
    # Nothing lost or reordered: the parts back to back are the sentences back to back.
    whole = concat([_audio(d, n + 1) for n, d in enumerate([500, 400, 400, 400, 2000, 100])])
    assert concat(parts) == whole
    assert MIN_PART_MS == 1000


def test_one_sentence_has_no_parts_and_two_have_two() -> None:
    assert _group([3000]) == []
    assert _group([]) == []
    assert [p.duration_ms for p in _group([3000, 50])] == [3000, 50]


@pytest.mark.parametrize("count", [2, 63, 64, 65, 66, 127, 128, 129, 500])
def test_a_long_reply_never_has_more_than_the_bound(count: int) -> None:
    durations = [1500 + (n % 7) * 100 for n in range(count)]
    parts = _group(durations)
    assert 2 <= len(parts) <= MAX_PARTS
    assert parts[0].duration_ms == durations[0]
    assert sum(p.frame_count for p in parts) == sum(durations)
    if count <= MAX_PARTS:
        assert len(parts) == count  # each sentence is over a second: a part each
    # A tighter bound holds too; the last part takes what the bound leaves over.
    assert len(_group(durations, max_parts=5)) <= 5
    with pytest.raises(ValueError, match="max_parts"):
        PartGrouper(3, max_parts=1)


# -- the order, with keeping slower than speaking ---------------------------------------


@dataclass(frozen=True)
class _Kept:
    artifact_id: str


class SlowArtifacts:
    """Stands in for the artifact store where keeping is slow (a slow disk): every save
    takes `seconds`; save number `fail_at` (0-based) fails as too large."""

    def __init__(self, seconds: float, fail_at: int | None = None) -> None:
        self.seconds = seconds
        self.fail_at = fail_at
        self.saved: list[bytes] = []

    async def save(
        self, owner: str, data: bytes, media_type: str, *, key: str | None, turn_id: str | None
    ) -> _Kept:
        number = len(self.saved)
        self.saved.append(data)
        await asyncio.sleep(self.seconds)
        if number == self.fail_at:
            raise ArtifactTooLarge("over the limit")
        return _Kept(f"a{number}")


async def _speak_slowly(artifacts: SlowArtifacts) -> list[AudioEvent | AudioPartEvent]:
    voice = VoiceConfig(provider="espeak", timeout=timedelta(seconds=30))
    service = SpeechService(
        {"normal": EspeakEngine()}, {"normal": voice}, {}, {}, cast(ArtifactService, artifacts)
    )
    handle = TurnHandle("turn-1")
    handle.reply_text = LONG_REPLY
    await service.speak(
        cast(AgentProfile, SimpleNamespace(voice="normal")),
        cast(InboundTurn, SimpleNamespace(route=None)),
        KeyRef("alice", "parts:slow"),
        handle,
    )
    got = [e for e in handle.journal if isinstance(e, AudioEvent | AudioPartEvent)]
    assert len(got) == len(handle.journal)
    return got


@needs_espeak
async def test_the_whole_waits_for_every_part_however_slow_keeping_is() -> None:
    events = await _speak_slowly(SlowArtifacts(0.15))
    assert [e.type for e in events] == ["audio_part"] * 10 + ["audio"]
    assert [e.part for e in events if isinstance(e, AudioPartEvent)] == list(range(10))
    final = events[-1]
    assert isinstance(final, AudioEvent) and final.error is None


@needs_espeak
async def test_a_part_that_cannot_be_kept_ends_the_speaking_with_its_error() -> None:
    artifacts = SlowArtifacts(0.15, fail_at=1)
    events = await _speak_slowly(artifacts)
    assert [e.type for e in events] == ["audio_part", "audio"]
    final = events[-1]
    assert isinstance(final, AudioEvent)
    assert (final.error, final.artifact_id) == ("audio_too_large", None)
    assert len(artifacts.saved) == 2  # no more parts, and no whole, after the failure


# -- through a real gateway -------------------------------------------------------------


def _reply(messages: Sequence[WireMessage]) -> str:
    content = str(messages[-1]["content"])
    return {
        "long": LONG_REPLY,
        "short": SHORT_REPLY,
        "breaking": BREAKING_REPLY,
        "stalling": STALLING_REPLY,
        "piper": PIPER_REPLY,
    }[content]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("speech-parts")
    # espeak-ng behind a wrapper that fails, or hangs, on the sentence with the marker.
    wrapper = path / "flaky-espeak"
    wrapper.write_text(
        "#!/bin/sh\n"
        'text=$(cat)\ncase "$text" in\n'
        "  *breaks*) echo 'engine broke' >&2; exit 1;;\n"
        "  *stalls*) exec sleep 5;;\n"
        "esac\n"
        'printf "%s" "$text" | exec espeak-ng "$@"\n'
    )
    wrapper.chmod(0o755)
    settings = gateway_settings(
        path,
        voices={
            "normal": {"provider": "espeak", "voice": "en-us"},
            "flaky": {"provider": "espeak", "binary": str(wrapper), "timeout": "1500ms"},
            "lexi": {"provider": "piper"},
        },
        agents={
            # Every test user may name every agent here (core/agent_access.py).
            "defaults": {"model": "scripted", "users": ["*"]},
            "main": {"voice": "normal"},
            "flaky": {"voice": "flaky"},
            "neural": {"voice": "lexi"},
        },
    )
    models: dict[str, ReplyModel] = {"scripted": ScriptedModel("scripted", _reply)}
    with running_gateway(settings, models) as gateway:
        yield gateway


def _client(gw: Gateway) -> httpx.Client:
    return httpx.Client(base_url=gw.url, timeout=60)


def spoken_turn(
    gw: Gateway, key: str, content: str, agent: str = "main"
) -> list[tuple[str, dict[str, Any]]]:
    with _client(gw) as client:
        answer = client.post(
            f"/v1/sessions/{key}/messages",
            json={"content": content, "speak": True, "agent": agent},
            headers=gw.auth("alice"),
        )
    assert answer.status_code == 200, answer.text
    return parse_sse(answer.text)


def after_end(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """What came after `end`: parts then one `audio`, and nothing else anywhere."""
    kinds = [kind for kind, _ in events]
    assert kinds.count("end") == 1 and kinds.count("audio") == 1, kinds
    tail = events[kinds.index("end") + 1 :]
    assert [kind for kind, _ in tail] == ["audio_part"] * (len(tail) - 1) + ["audio"], kinds
    assert "audio_part" not in kinds[: kinds.index("end")]
    return tail


def fetch_wav(gw: Gateway, url: str, user: str = "alice") -> bytes:
    with _client(gw) as client:
        got = client.get(url, headers=gw.auth(user))
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "audio/wav"
    return got.content


def frames_of(wav: bytes) -> np.ndarray[Any, np.dtype[np.int16]]:
    with wave.open(io.BytesIO(wav)) as reader:
        return np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2")


@needs_espeak
def test_a_long_reply_arrives_part_by_part_then_whole(gw: Gateway) -> None:
    events = spoken_turn(gw, "parts:long", "long")
    tail = after_end(events)
    parts, audio = [data for _, data in tail[:-1]], tail[-1][1]
    sentences = split_sentences(speakable(LONG_REPLY))
    assert len(sentences) == 10
    # Every sentence is over a second of espeak-ng speech: one part each, in order.
    assert [p["part"] for p in parts] == list(range(10))
    assert all(p["voice"] == "normal" and p["media_type"] == "audio/wav" for p in parts)
    assert len({p["artifact_id"] for p in parts} | {audio["artifact_id"]}) == 11
    total_ms = 0
    pcm = []
    for part, sentence in zip(parts, sentences, strict=True):
        assert part["url"] == f"/v1/artifacts/{part['artifact_id']}"
        wav = fetch_wav(gw, part["url"])
        seconds = check_speech(wav, sentence)  # header, length of its own text, not silence
        assert abs(seconds * 1000 - part["duration_ms"]) <= 1
        assert part["duration_ms"] >= MIN_PART_MS
        total_ms += part["duration_ms"]
        pcm.append(frames_of(wav))
    whole = fetch_wav(gw, audio["url"])
    check_speech(whole, LONG_REPLY)
    assert audio["error"] is None
    # espeak-ng has no gap between sentences: the parts are the whole, sample for sample.
    assert abs(audio["duration_ms"] - total_ms) <= len(parts)  # each part rounded to 1 ms
    assert np.array_equal(np.concatenate(pcm), frames_of(whole))
    # The parts belong to the key's owner alone and go with the key.
    with _client(gw) as client:
        assert client.get(parts[3]["url"], headers=gw.auth("bob")).status_code == 404
        assert client.delete("/v1/sessions/parts:long", headers=gw.auth("alice")).status_code == 204
        assert client.get(parts[3]["url"], headers=gw.auth("alice")).status_code == 404


@needs_espeak
def test_the_first_part_is_sent_before_the_rest_is_synthesised(gw: Gateway) -> None:
    """Read as a stream: the first part is on the wire, after `end`, before the final
    audio is (what a player needs to start early)."""
    seen: dict[str, float] = {}
    body = {"content": "long", "speak": True}
    with (
        _client(gw) as client,
        client.stream(
            "POST", "/v1/sessions/parts:timing/messages", json=body, headers=gw.auth("alice")
        ) as answer,
    ):
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("event: "):
                seen.setdefault(line[7:], time.perf_counter())
    assert seen["end"] <= seen["audio_part"] < seen["audio"]


@needs_espeak
def test_a_one_sentence_reply_has_no_parts(gw: Gateway) -> None:
    tail = after_end(spoken_turn(gw, "parts:short", "short"))
    assert len(tail) == 1
    check_speech(fetch_wav(gw, tail[0][1]["url"]), SHORT_REPLY)


@needs_espeak
@pytest.mark.parametrize(
    ("content", "code"), [("breaking", "speech_failed"), ("stalling", "speech_timeout")]
)
def test_a_voice_failing_midway_keeps_the_parts_sent(gw: Gateway, content: str, code: str) -> None:
    started = time.perf_counter()
    events = spoken_turn(gw, f"parts:{content}", content, agent="flaky")
    assert time.perf_counter() - started < 5  # the voice's 1.5 s timeout, not the stall
    tail = after_end(events)
    assert [kind for kind, _ in tail] == ["audio_part", "audio"]
    part, audio = tail[0][1], tail[1][1]
    assert part["part"] == 0 and part["voice"] == "flaky"
    check_speech(fetch_wav(gw, part["url"]), split_sentences(BREAKING_REPLY)[0])
    assert audio == {
        "artifact_id": None,
        "url": None,
        "voice": "flaky",
        "duration_ms": None,
        "media_type": None,
        "error": code,
        "type": "audio",
    }
    # The reply itself stands, whole.
    reply = "".join(data["content"] for kind, data in events if kind == "token")
    assert reply == (BREAKING_REPLY if content == "breaking" else STALLING_REPLY)


@needs_espeak
def test_parts_stay_out_of_a_json_answer_and_come_as_websocket_frames(gw: Gateway) -> None:
    with _client(gw) as client:
        answer = client.post(
            "/v1/sessions/parts:json/messages",
            json={"content": "long", "stream": False, "speak": True},
            headers=gw.auth("alice"),
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["reply"] == LONG_REPLY and body["audio"]["error"] is None
    assert not [name for name in body if "part" in name]
    check_speech(fetch_wav(gw, body["audio"]["url"]), LONG_REPLY)
    with connect(f"{gw.ws_url}/v1/ws?session_id=parts:ws", open_timeout=5) as ws:
        ws.send(gw.keys["alice"])
        assert ws.recv(timeout=5) == "authenticated"
        assert json.loads(ws.recv(timeout=5))["type"] == "ready"
        ws.send(json.dumps({"content": "long", "speak": True}))
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] != "audio":
            frames.append(json.loads(ws.recv(timeout=30)))
    kinds = [f["type"] for f in frames]
    done = kinds.index("complete")
    assert kinds[done + 1 :] == ["audio_part"] * 10 + ["audio"]
    assert [f["part"] for f in frames[done + 1 : -1]] == list(range(10))
    check_speech(fetch_wav(gw, frames[done + 1]["url"]), split_sentences(LONG_REPLY)[0])


def test_piper_parts_carry_the_pause_between_sentences(gw: Gateway) -> None:
    """piper leaves 200 ms between sentences: each part after the first starts with it,
    so the parts back to back are still exactly the whole reply."""
    tail = after_end(spoken_turn(gw, "parts:piper", "piper", agent="neural"))
    parts, audio = [data for _, data in tail[:-1]], tail[-1][1]
    sentences = split_sentences(PIPER_REPLY)
    assert [p["part"] for p in parts] == [0, 1, 2] and len(sentences) == 3
    pcm = [frames_of(fetch_wav(gw, p["url"])) for p in parts]
    for wav, sentence in zip(pcm, sentences, strict=True):
        assert len(wav) / 22050 >= len(sentence) / 40
        assert math.sqrt(float(np.mean(wav.astype(np.float64) ** 2))) > 300
    gap = 22050 * 200 // 1000
    for later in pcm[1:]:
        assert not later[:gap].any()  # the pause, as exact silence
        assert later[gap:].any()
    whole = frames_of(fetch_wav(gw, audio["url"]))
    assert np.array_equal(np.concatenate(pcm), whole)
    assert abs(audio["duration_ms"] - sum(p["duration_ms"] for p in parts)) <= len(parts)


@needs_espeak
def test_a_part_too_large_to_keep_ends_the_speaking_with_the_parts_before_it(
    tmp_path: Path,
) -> None:
    """Keeping a part fails (over `limits.max_artifact_bytes`): the parts before it stand,
    the engine stops, and the final `audio` says why."""
    short = "Short and sweet, just one line."
    long = (
        "This second sentence goes on and on, with clause after clause, about the weather,"
        " the trains, the shopping, the garden, the neighbours and their noisy dog, so that"
        " its audio alone is far larger than the limit this gateway keeps."
    )
    reply = f"{short} {long} And a last sentence that is never spoken."
    settings = gateway_settings(
        tmp_path,
        voices={"normal": {"provider": "espeak", "voice": "en-us"}},
        agents={"defaults": {"model": "scripted"}, "main": {"voice": "normal"}},
        limits={"max_body_bytes": 65536, "max_artifact_bytes": 200_000},
    )
    models: dict[str, ReplyModel] = {"scripted": ScriptedModel("scripted", lambda _: reply)}
    with running_gateway(settings, models) as small:
        tail = after_end(spoken_turn(small, "parts:big", "anything"))
        assert [kind for kind, _ in tail] == ["audio_part", "audio"]
        part, audio = tail[0][1], tail[1][1]
        wav = fetch_wav(small, part["url"])
        assert len(wav) <= 200_000
        check_speech(wav, short)
        assert (audio["error"], audio["artifact_id"]) == ("audio_too_large", None)
