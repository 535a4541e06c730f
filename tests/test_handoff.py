"""Seed 000's hybrid hand-off (DESIGN.md §9): the pure rules of its four stages, the
service with stand-in models and tools, floors on the written corpora, and seed 000's
testing checklist end to end.

The end-to-end tests run the real gateway on loopback with the OpenAI adapter talking to a
local server that speaks OpenAI's wire (tests/support/handoff_wire.py) for the mode's reply
model (which cannot call tools), the control model, the primary user's main agent (which
can) and an OpenAI-compatible images API; and a local video job API
(tests/support/video_jobs.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from sessiongate.agents.registry import ToolRegistry
from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext, ToolFailed
from sessiongate.config import Settings, load_settings
from sessiongate.config.handoff import HandoffConfig
from sessiongate.core.events import HandoffEvent
from sessiongate.core.handoff.classification import (
    HandoffRequest,
    classifier_messages,
    decide,
    parse_request,
)
from sessiongate.core.handoff.guards import guarded
from sessiongate.core.handoff.intents import (
    INTENTS,
    artifact_in,
    artifact_link,
    failure_note,
    prompt_argument,
    result_text,
    tools_for,
)
from sessiongate.core.handoff.learned import (
    FEATURES,
    LABELS,
    WEIGHTS_FILE,
    encode,
    from_document,
    shipped,
)
from sessiongate.core.handoff.lexicon import STRUCTURAL_PATTERNS, WORD_CUES, WORDS
from sessiongate.core.handoff.patterns import (
    DEFAULT_CUES,
    DEFAULT_PATTERNS,
    SEED_PATTERNS,
    IntentPatterns,
    patterns_for,
)
from sessiongate.core.handoff.structure import Structure
from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.errors import ConfigError, ModelError
from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, ToolSpec
from sessiongate.service.agents import AgentProfile, build_profiles
from sessiongate.service.handoff import HandoffService, prepare
from sessiongate.service.turn.handle import TurnHandle
from tests.support.fake_providers import FakeCall
from tests.support.gateway import Gateway, parse_sse, running_gateway
from tests.support.handoff_wire import ChatAnswer, HandoffWire, handoff_wire
from tests.support.helpers import ScriptedModel
from tests.support.video_jobs import MP4, VideoJobs, video_jobs

DATA = Path(__file__).parent / "data"
PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
    b"\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)
ARTIFACT = "0190a1b2-c3d4-7e5f-8a9b-0123456789ab"


# --- stage 1: patterns -------------------------------------------------------------------


def test_seed_patterns_are_the_defaults_first_and_match_what_the_seed_meant() -> None:
    for intent in INTENTS:
        assert DEFAULT_PATTERNS[intent][: len(SEED_PATTERNS[intent])] == SEED_PATTERNS[intent]
    stage1 = patterns_for(INTENTS, {})
    assert stage1.match("Let me create an image of a red fox for you.") == ("image",)
    assert stage1.match("Here\u2019s the picture you asked for!") == ("image",)
    assert stage1.match("I'll generate a video of the waves.") == ("video",)
    assert stage1.match("Let me search the web for that.") == ("search",)
    assert stage1.match("I'll MAKE A PICTURE and then search the internet.") == (
        "image",
        "search",
    )
    assert stage1.match("Paris is the capital of France.") == ()
    assert stage1.match("") == ()


def test_patterns_extend_the_defaults_or_replace_them_per_intent() -> None:
    extended = patterns_for(["image", "video"], {"image": [r"\bpaint you\b"]})
    assert extended.intents == ("image", "video")
    assert extended.match("I'll paint you something lovely") == ("image",)
    assert extended.match("let me draw a picture") == ("image",)
    replaced = patterns_for(["image"], {"image": [r"\bpaint you\b"]}, replace=["image"])
    assert replaced.match("let me draw a picture") == ()
    assert replaced.match("I'll paint you one") == ("image",)
    # An intent without a tool is never matched.
    assert patterns_for(["search"], {}).match("let me draw a picture") == ()


def test_guards_drop_a_match_framed_as_no_promise() -> None:
    stage1 = patterns_for(INTENTS, {}, learned=False)  # the guards: patterns only
    not_promises = [
        "Sadly I cannot draw a picture of your house.",  # refusal
        "I'm not able to render videos, sorry.",  # the refusal inside the match
        "I drew a picture of your house last week, remember?",  # the past
        "You could draw a picture of the house with charcoal.",  # advice
        "Would you like me to draw a picture of the house?",  # a question
        "Let me paint you a picture: a white house, a red door, a crooked chimney.",
        "Picture this: a white house by the sea.",
        "Drawing a picture of a house is harder than it looks.",  # gerund as subject
        "I'll make a picture frame for the hallway this weekend.",  # compound noun
    ]
    for text in not_promises:
        assert stage1.match(text) == (), text
    # A refusal and a promise in one reply: the guarded match is skipped, the next counts.
    assert stage1.match("I can't sing, but let me draw a picture of the house for you.") == (
        "image",
    )
    # "look up who won last night" is about the past, the act is not.
    assert stage1.match("Let me look up who won the race last night.") == ("search",)
    # The guard only says no: the same words without their frame still match.
    text = "sadly i cannot draw a picture of your house."
    start = text.index("draw")
    assert guarded(text, start, text.index(" of"))
    assert not guarded(text.replace("sadly i cannot ", "let me "), 0, 20)
    # An operator's own patterns are never guarded.
    own = patterns_for(["image"], {"image": [r"cannot draw"]}, replace=["image"])
    assert own.match("I cannot draw.") == ("image",)


def test_structure_finds_promises_by_word_and_frame() -> None:
    # Phrasings none of the corpora hold: a word of the intent's class with a
    # commitment frame before it, after it, or in the next sentence.
    stage1 = patterns_for(INTENTS, {}, learned=False)  # the structure alone
    promises = {
        "image": [
            "Ooh, I love that idea \u2014 sketching it out for you now!",
            "Give me two ticks and I'll have your comic strip ready.",
            "Your new profile pic is in the works, one moment.",
            "Time for some art: I'm designing a crest for your family.",
            "Okay, I'm generating that now: a neon-lit ramen shop at midnight.",
            "Let me try my hand at a portrait of your grandma.",
            "Drafting a floor plan sketch now.",
            "Creating your emoji pack now!",
            "On it! A storyboard for the first scene.",
        ],
        "video": [
            "I'm stitching your clips into a recap reel now.",
            "Making your slides move \u2014 animating the intro now!",
            "Rolling camera! A short film of the cat napping is on its way.",
            "Hold on, turning your trip photos into a slideshow with music.",
            "Alright, animating the solar system now so you can see the orbits.",
        ],
        "search": [
            "Let me pull up the latest numbers on that.",
            "Quick lookup coming right up!",
            "I'm scouring the web for a cheaper flight.",
            "Doing a quick search for open pharmacies now.",
            "Hunting down the source of that quote for you now.",
            "I\u2019ll find out what the current rules are.",
        ],
    }
    for intent, texts in promises.items():
        for text in texts:
            assert intent in stage1.match(text), (intent, text)
    not_promises = [
        "Let me think about what the video should show.",  # a verb that makes nothing
        "I'm looking at the picture again and I still see the rabbit.",
        "Here's the thing about photos: they freeze a moment.",  # an idiom
        "I'm going to bed now, but the pictures were lovely.",  # another clause
        "I'll look at the photos you sent tomorrow.",  # the user's
        "Let me draw your attention to the second line.",  # an idiom of the verb
        "Let me map out your week: Monday gym, Tuesday rest.",
        "Honestly, drawing is a skill like any other.",  # a gerund as the subject
        "Googling symptoms at 2 a.m. is never a good idea.",  # ... past an abbreviation
        "I'll put together a picture-perfect itinerary for you.",  # half of a compound
        "I'm watching a video about sourdough right now.",
        "I'd love to animate something for you, but I can't.",  # a wish taken back
        "If I could browse, I'd check the opening hours for you.",  # a condition
        "I'm rooting for your short film at the festival!",
        "I'll wait for you to send the picture.",
    ]
    for text in not_promises:
        assert stage1.match(text) == (), text
    # A guarded word does not hide the next one: the photo is the user's, the video not.
    assert stage1.match("I'll turn the photo you sent into a video.") == ("video",)


def test_stage_one_is_fast_on_a_long_reply() -> None:
    stage1 = patterns_for(INTENTS, {})
    reply = "Here is a long answer about gardening and the weather in spring. " * 300
    started = time.perf_counter()
    for _ in range(20):
        assert stage1.match(reply) == ()
    per_reply = (time.perf_counter() - started) / 20
    assert per_reply < 0.05  # ~19,000 characters; an ordinary reply takes microseconds


# --- stage 2: the control model's answer -------------------------------------------------


def test_parse_request_reads_exactly_the_object_asked_for() -> None:
    good = '{"tool": "image", "prompt": "a red fox at dawn", "confidence": 0.92}'
    assert parse_request(good) == HandoffRequest("image", "a red fox at dawn", 0.92)
    assert parse_request(f"  \n{good}\n") == HandoffRequest("image", "a red fox at dawn", 0.92)
    assert parse_request(f"```json\n{good}\n```") == HandoffRequest(
        "image", "a red fox at dawn", 0.92
    )
    assert parse_request('{"tool": null, "prompt": "", "confidence": 1}') == HandoffRequest(
        None, "", 1.0
    )
    for bad in (
        "",
        "null",
        "[]",
        "image",
        f"Sure! {good}",
        good + good,
        '{"tool": "image", "prompt": "x"}',
        '{"tool": "image", "prompt": "x", "confidence": 0.9, "why": "it says so"}',
        '{"tool": "music", "prompt": "x", "confidence": 0.9}',
        '{"tool": "image_generate", "prompt": "x", "confidence": 0.9}',
        '{"tool": "image", "prompt": "   ", "confidence": 0.9}',
        '{"tool": "image", "prompt": 5, "confidence": 0.9}',
        '{"tool": "image", "prompt": "x", "confidence": "high"}',
        '{"tool": "image", "prompt": "x", "confidence": true}',
        '{"tool": "image", "prompt": "x", "confidence": 1.5}',
        '{"tool": "image", "prompt": "x", "confidence": -0.1}',
        '{"tool": "image", "prompt": "x", "confidence": NaN}',
        '{"tool": "image", "prompt": "' + "x" * 5000 + '", "confidence": 0.9}',
        "[" * 5000,
    ):
        assert parse_request(bad) is None, bad


@given(st.text(max_size=300))
def test_parse_request_never_raises(text: str) -> None:
    found = parse_request(text)
    assert found is None or isinstance(found, HandoffRequest)


@given(
    st.sampled_from([*INTENTS, None]),
    st.text(min_size=1, max_size=200).filter(str.strip),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_parse_request_round_trips_every_valid_answer(
    tool: Any, prompt: str, confidence: float
) -> None:
    text = json.dumps({"confidence": confidence, "tool": tool, "prompt": prompt})
    assert parse_request(text) == HandoffRequest(tool, prompt.strip(), confidence)


def test_decide_acts_only_when_sure_and_a_tool_is_configured() -> None:
    tools: dict[Any, str] = {"image": "image_generate"}
    sure = HandoffRequest("image", "a fox", 0.7)
    assert decide(sure, tools, 0.7).act and decide(sure, tools, 0.7).tool == "image_generate"
    unsure = decide(HandoffRequest("image", "a fox", 0.69), tools, 0.7)
    assert (unsure.act, unsure.reason) == (False, "low_confidence")
    other = decide(HandoffRequest("video", "waves", 0.99), tools, 0.7)
    assert (other.act, other.reason) == (False, "no_tool_for_intent")
    assert decide(HandoffRequest(None, "", 0.99), tools, 0.7).reason == "no_promise"


def test_the_primary_user_gets_its_own_tools() -> None:
    tools: dict[Any, str] = {"image": "image_generate", "search": "web__search"}
    primary: dict[Any, str] = {"image": "agent__main"}
    assert tools_for(tools, primary, primary=False) == tools
    assert tools_for(tools, primary, primary=True) == {
        "image": "agent__main",
        "search": "web__search",
    }


def test_the_prompt_names_every_intent_and_carries_the_exchange() -> None:
    messages = classifier_messages("Let me draw it. " + "x" * 5000, "draw a fox", INTENTS)
    assert messages[0]["role"] == "system"
    assert '"image" or "video" or "search"' in messages[0]["content"]
    assert messages[1]["content"].startswith("User: draw a fox\n\nAssistant: Let me draw it.")
    assert "[…]" in messages[1]["content"] and len(messages[1]["content"]) < 2000


def test_the_prompt_argument_of_a_tool() -> None:
    def schema(*names: str, required: Sequence[str] = ()) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {n: {"type": "string"} for n in names},
            "required": list(required),
        }

    assert prompt_argument(schema("prompt")) == "prompt"
    assert prompt_argument(schema("limit", "query")) == "query"
    assert prompt_argument(schema("request")) == "request"
    assert prompt_argument(schema("subject", required=["subject"])) == "subject"
    assert prompt_argument(schema("a", "b", required=["a", "b"])) is None
    assert prompt_argument({"type": "object"}) is None


# --- stage 4: what is appended -----------------------------------------------------------


def test_what_is_appended() -> None:
    assert artifact_link("image", ARTIFACT) == f"\n\n[image](/v1/artifacts/{ARTIFACT})"
    assert artifact_link("video", ARTIFACT) == f"\n\n[video](/v1/artifacts/{ARTIFACT})"
    assert artifact_in(f"Here it is: /v1/artifacts/{ARTIFACT} enjoy") == ARTIFACT
    assert artifact_in("no link here /v1/artifacts/../etc") is None
    assert failure_note("image", "error: the image service answered HTTP 500.") == (
        "\n\n(I could not make the image: the image service answered HTTP 500)"
    )
    assert failure_note("search", "") == "\n\n(I could not search the web: the tool failed)"
    assert len(failure_note("video", "x" * 1000)) < 360
    assert result_text("  one\ntwo  ", 100) == "\n\none\ntwo"
    long = "\n".join(f"line {i} with some words" for i in range(200))
    cut = result_text(long, 300)
    assert len(cut) <= 305 and cut.endswith(" …") and "\nline" in cut
    assert result_text("   ", 100) == ""


# --- configuration -----------------------------------------------------------------------


def test_handoff_config_is_checked() -> None:
    HandoffConfig(tools={"image": "image_generate"})
    for bad, words in (
        ({}, "needs a tool"),
        ({"tools": {"music": "x"}}, "music"),
        ({"tools": {"image": "no spaces allowed"}}, "not a tool name"),
        ({"tools": {"image": "x"}, "patterns": {"image": ["(unclosed"]}}, "not a regex"),
        ({"tools": {"image": "x"}, "replace_patterns": ["image"]}, "never match"),
        ({"tools": {"image": "x"}, "min_confidence": 1.5}, "less than or equal"),
    ):
        with pytest.raises(ValidationError, match=words):
            HandoffConfig(**bad)
    assert HandoffConfig(enabled=False).enabled is False  # switched off: nothing needed


def _profiles(**agent: Any) -> dict[str, AgentProfile]:
    settings = Settings(
        models={"control": {"provider": "offline"}},
        agents={"lexi": {"model": "offline", **agent}},
    )
    return build_profiles(settings)


def test_a_handoff_that_cannot_work_refuses_to_start(tmp_path: Path) -> None:
    handoff = {"tools": {"image": "image_generate"}}
    models: dict[str, Any] = {"offline": ScriptedModel("offline"), "control": ScriptedModel()}
    with pytest.raises(ConfigError, match="needs a control model"):
        prepare(_profiles(handoff=handoff)["lexi"], models)
    with pytest.raises(ConfigError, match="cannot call tools"):
        prepare(_profiles(handoff=handoff, tools=["x"], control_model="control")["lexi"], models)
    slow = _profiles(handoff={**handoff, "tool_timeout": "20m"}, control_model="control")
    with pytest.raises(ConfigError, match="turn_timeout"):
        prepare(slow["lexi"], models)
    ready = prepare(_profiles(handoff=handoff, control_model="control")["lexi"], models)
    assert ready is not None and ready.model == "control"
    assert prepare(_profiles()["lexi"], models) is None
    path = tmp_path / "sessiongate.toml"
    path.write_text(
        '[agents.lexi]\nmodel = "offline"\n[agents.lexi.handoff]\nmodel = "nope"\n'
        'tools = {image = "image_generate"}\n'
    )
    with pytest.raises(ConfigError, match=r"handoff\.model: model 'nope'"):
        load_settings(path)


# --- the service, with stand-ins ---------------------------------------------------------


class SlowModel:
    name = "slow"

    async def stream(
        self, messages: Sequence[Any], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        await asyncio.sleep(5)
        yield TextDelta("{}")


def _service(
    control: Any, tools: list[FunctionTool], **handoff: Any
) -> tuple[HandoffService, AgentProfile]:
    config = {
        "tools": {"image": "image_generate", "search": "web_search"},
        "timeout": "1s",
        "tool_timeout": "1s",
        **handoff,
    }
    agent = _profiles(handoff=config, control_model="control")["lexi"]
    registry = ToolRegistry([StaticToolSource("test", tools)])

    async def user_message(ref: KeyRef) -> str:
        return "the user's message"

    service = HandoffService({"lexi": agent}, {"control": control}, registry, user_message)
    return service, agent


async def _run(service: HandoffService, agent: AgentProfile, reply: str) -> tuple[str, list[Any]]:
    addendum = service.for_turn(agent, Caller("alice"), KeyRef("alice", "chat:alice"))
    assert addendum is not None
    handle = TurnHandle("turn-1")
    extra = await addendum(reply, handle)
    handle.close()
    return extra, [e async for e in handle.events()]


def _tool(name: str, answer: Any) -> FunctionTool:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": []}

    async def run(arguments: dict[str, Any], context: ToolContext) -> Any:
        return await answer(arguments, context)

    return FunctionTool(ToolSpec(name, "test tool", schema), run)


async def test_no_match_means_no_model_call_and_no_event() -> None:
    control = ScriptedModel("control")
    service, agent = _service(control, [])
    assert await _run(service, agent, "Paris is the capital of France.") == ("", [])
    assert control.requests == []
    # An agent without a hand-off gets none.
    other = _profiles()["lexi"]
    assert service.for_turn(other, Caller("alice"), KeyRef("alice", "k")) is None


@pytest.mark.parametrize(
    ("control", "reason"),
    [
        (SlowModel(), "classification_failed: timeout"),
        (ScriptedModel("control", lambda m: "I think it is an image!"), "unparseable"),
        (
            ScriptedModel("control", fail=ModelError("down", code="model_unavailable")),
            "classification_failed: model_unavailable",
        ),
    ],
)
async def test_a_failed_classification_keeps_the_reply_as_it_is(control: Any, reason: str) -> None:
    service, agent = _service(control, [])
    started = time.perf_counter()
    extra, events = await _run(service, agent, "Let me draw a picture of that for you.")
    assert time.perf_counter() - started < 3
    assert extra == ""
    (event,) = events
    assert isinstance(event, HandoffEvent)
    assert (event.intent, event.tool, event.status) == ("image", None, "skipped")
    assert event.message is not None and reason in event.message


async def test_search_appends_the_tools_answer_and_a_crashing_tool_a_note() -> None:
    seen: list[dict[str, Any]] = []

    async def search(arguments: dict[str, Any], context: ToolContext) -> str:
        seen.append({"arguments": arguments, "user": context.user, "key": context.key.name})
        return "1. https://example.org/tides — Tide tables for the coast.\n" * 100

    answer = '{"tool": "search", "prompt": "tide tables Brittany", "confidence": 0.9}'
    service, agent = _service(
        ScriptedModel("control", lambda m: answer),
        [_tool("web_search", search)],
        max_result_chars=200,
    )
    extra, events = await _run(service, agent, "Let me search the web for the tide tables.")
    assert seen == [
        {"arguments": {"query": "tide tables Brittany"}, "user": "alice", "key": "chat:alice"}
    ]
    assert extra.startswith("\n\n1. https://example.org/tides") and extra.endswith(" …")
    assert len(extra) < 210
    (event,) = events
    assert (event.intent, event.tool, event.status, event.confidence) == (
        "search",
        "web_search",
        "done",
        0.9,
    )

    async def broken(arguments: dict[str, Any], context: ToolContext) -> str:
        raise ToolFailed("the search service answered HTTP 503")

    service, agent = _service(
        ScriptedModel("control", lambda m: answer), [_tool("web_search", broken)]
    )
    extra, events = await _run(service, agent, "Let me search the web for the tide tables.")
    assert extra == "\n\n(I could not search the web: the search service answered HTTP 503)"
    assert events[0].status == "failed"
    assert events[0].message == "the search service answered HTTP 503"


async def test_a_missing_or_slow_tool_is_a_failure_note() -> None:
    answer = '{"tool": "image", "prompt": "a fox", "confidence": 0.9}'
    service, agent = _service(ScriptedModel("control", lambda m: answer), [])
    extra, events = await _run(service, agent, "Let me draw a picture of a fox.")
    assert extra == "\n\n(I could not make the image: no tool named 'image_generate' is available)"
    assert events[0].status == "failed"

    async def slow(arguments: dict[str, Any], context: ToolContext) -> str:
        await asyncio.sleep(5)
        return "never"

    tool = FunctionTool(
        ToolSpec(
            "image_generate",
            "",
            {"type": "object", "properties": {"prompt": {"type": "string"}}},
        ),
        slow,
    )
    service, agent = _service(ScriptedModel("control", lambda m: answer), [tool])
    extra, events = await _run(service, agent, "Let me draw a picture of a fox.")
    assert extra == "\n\n(I could not make the image: the tool did not answer within 1 s)"


# --- corpora: floors so a regression fails ---------------------------------------------


def _corpus(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_corpora_are_what_docs_benchmarks_md_measures() -> None:
    ordinary = _corpus("handoff_ordinary.jsonl")
    promising = _corpus("handoff_promising.jsonl")
    assert len(ordinary) >= 500 and len(promising) >= 100
    assert len({row["text"] for row in ordinary}) == len(ordinary)
    assert len({row["text"] for row in promising}) == len(promising)
    assert {row["intent"] for row in promising} == set(INTENTS)
    assert sum(1 for row in ordinary if row.get("hard")) >= 100
    # The sealed batches, each written by an author who never saw the patterns or the
    # other corpora and measured once (docs/benchmarks.md): fresh 4 before the learned
    # backstop existed, fresh 5 after it was trained (on everything up to fresh 4).
    for part, intents, ordinary_rows in (
        ("fresh-4", [60, 50, 56], 313),
        ("fresh-5", [60, 50, 52], 305),
    ):
        latest = [row for row in promising if row["part"] == part]
        assert [sum(row["intent"] == i for row in latest) for i in INTENTS] == intents
        latest_ordinary = [row for row in ordinary if row["part"] == part]
        assert len(latest_ordinary) == ordinary_rows
        assert sum(1 for row in latest_ordinary if row["hard"]) >= len(latest_ordinary) / 2


def test_stage_one_floors_on_the_corpora() -> None:
    stage1 = patterns_for(INTENTS, {})
    # The parts stage 1 was revised against; a batch written later (fresh-4) is
    # measured by bench/handoff.py, not held to a floor here.
    ordinary = [row for row in _corpus("handoff_ordinary.jsonl") if row["part"] in REVISED]
    promising = [row for row in _corpus("handoff_promising.jsonl") if row["part"] in REVISED]
    false_positives = [row["text"] for row in ordinary if stage1.match(row["text"])]
    by_intent: dict[str, list[bool]] = {intent: [] for intent in INTENTS}
    for row in promising:
        by_intent[row["intent"]].append(row["intent"] in stage1.match(row["text"]))
    rates = {intent: sum(hits) / len(hits) for intent, hits in by_intent.items()}
    # Floors a little under the figures in docs/benchmarks.md (bench/handoff.py).
    assert min(rates.values()) >= FLOOR_DETECTION, rates
    assert len(false_positives) / len(ordinary) <= CEILING_FALSE_POSITIVES, false_positives
    # Replies that merely talk about pictures or searches, no promise in sight, never
    # reach stage 2: the hard negatives that do are the ones that look like promises.
    easy = [row["text"] for row in ordinary if not row.get("hard")]
    assert sum(1 for text in easy if stage1.match(text)) <= CEILING_EASY_FALSE_POSITIVES
    # Every part on its own, per intent: fresh-3 was written before the structure and
    # measured once (95 / 96 / 100 %) before it was revised against it.
    for part in REVISED:
        for intent in INTENTS:
            rows = [row for row in promising if (row["part"], row["intent"]) == (part, intent)]
            hits = sum(1 for row in rows if intent in stage1.match(row["text"]))
            assert hits / len(rows) >= FLOOR_DETECTION_PART, (part, intent, hits, len(rows))


def test_stage_one_on_fresh_5_measured_once_unseen() -> None:
    """Fresh 5 was sealed while the backstop was trained and measured once after: the
    shipped stage 1 (patterns + backstop) found 96.7 / 94.0 / 96.2 % of its promises
    and sent 7 of its 306 ordinary replies to stage 2. A floor a little under that."""
    stage1 = patterns_for(INTENTS, {})
    promising = [row for row in _corpus("handoff_promising.jsonl") if row["part"] == "fresh-5"]
    ordinary = [row for row in _corpus("handoff_ordinary.jsonl") if row["part"] == "fresh-5"]
    for intent in INTENTS:
        rows = [row for row in promising if row["intent"] == intent]
        hits = sum(1 for row in rows if intent in stage1.match(row["text"]))
        assert hits / len(rows) >= 0.93, (intent, hits, len(rows))
    reaching = [row["text"] for row in ordinary if stage1.match(row["text"])]
    assert len(reaching) / len(ordinary) <= 0.03, reaching


#: bench/handoff.py on 2026-11-23, after the structure: 100 % of every intent on every
#: part; 0 of 716 ordinary replies reach stage 2.
REVISED = ("dev", "held-out", "fresh-1", "fresh-2", "fresh-3")
FLOOR_DETECTION = 0.98
FLOOR_DETECTION_PART = 0.96
CEILING_FALSE_POSITIVES = 0.01
CEILING_EASY_FALSE_POSITIVES = 0


# --- stage 1's learned backstop ------------------------------------------------------------

#: Promises of fresh 4 that no pattern finds and the backstop does.
ONLY_THE_BACKSTOP = {
    "Brilliant, I'll knock up some quick colour concept art of the spaceship hangar for"
    " you now.": "image",
    "Hunting for the best Black Friday deals on a 65-inch OLED, I'll report back in a"
    " moment.": "search",
}


def test_the_learned_backstop_ships_and_loads() -> None:
    model = shipped()
    assert model is shipped()  # read once
    assert WEIGHTS_FILE.stat().st_size <= 300_000
    document = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    assert document["features"] == FEATURES and tuple(document["labels"]) == LABELS
    assert 0.0 < model.threshold < 1.0 and model.weights.shape == (len(model.index), 4)
    # A file trained with other features is refused rather than misread.
    with pytest.raises(ValueError, match="features"):
        from_document({**document, "features": "something-else/v0"})
    # The weights survive their encoding exactly.
    again = from_document({**document, "weights": encode(model.weights)})
    assert (again.weights == model.weights).all()


def test_the_backstop_finds_what_the_patterns_miss_deterministically() -> None:
    with_backstop = patterns_for(INTENTS, {})
    patterns_only = patterns_for(INTENTS, {}, learned=False)
    for text, intent in ONLY_THE_BACKSTOP.items():
        assert patterns_only.match(text) == (), text
        assert with_backstop.match(text) == (intent,), text
        first = shipped().probabilities(text.lower())
        assert first == shipped().probabilities(text.lower())  # same reply, same answer
        assert abs(sum(first) - 1.0) < 1e-9
    assert with_backstop.match("Paris is the capital of France.") == ()
    assert with_backstop.match("   ") == ()
    # Only the intents the agent has a tool for.
    image_text = next(t for t, i in ONLY_THE_BACKSTOP.items() if i == "image")
    assert patterns_for(["search"], {}).match(image_text) == ()
    # A long reply: the promise at its end is not diluted by the answer before it.
    long = "The hangar needs bays for six ships and a control tower. " * 20 + image_text
    assert with_backstop.match(long) == ("image",)


def test_the_backstop_is_off_when_replaced_or_switched_off() -> None:
    image_text = next(t for t, i in ONLY_THE_BACKSTOP.items() if i == "image")
    replaced = patterns_for(["image"], {"image": [r"\bpaint you\b"]}, replace=["image"])
    assert replaced.match(image_text) == ()
    assert patterns_for(["image"], {}, learned=False).match(image_text) == ()
    # Replacing one intent keeps the backstop for the others.
    search_text = next(t for t, i in ONLY_THE_BACKSTOP.items() if i == "search")
    mixed = patterns_for(INTENTS, {"image": [r"\bpaint you\b"]}, replace=["image"])
    assert mixed.match(search_text) == ("search",)
    assert mixed.match(image_text) == ()
    config = HandoffConfig(tools={"image": "image_generate"}, learned=False)
    assert config.learned is False
    assert HandoffConfig(tools={"image": "image_generate"}).learned is True


def test_the_backstop_floors_on_a_batch_it_never_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    # Leave-one-batch-out on fresh 4 (written by someone who never saw the patterns):
    # trained on the other parts, as bench/handoff_train.py does, with the shipped
    # threshold. It measured 85.0 / 84.0 / 87.5 % (image / video / search), 11 of 313
    # ordinary replies reaching stage 2 (the patterns alone: 78.3 / 82.0 / 73.2 %, 5).
    monkeypatch.syspath_prepend(str(DATA.parent.parent / "bench"))
    import handoff_train

    examples = handoff_train.load()
    others = [e for e in examples if e.part != "fresh-4"]
    trained = handoff_train.fit(others, handoff_train.DEFAULTS)
    model = dataclasses.replace(trained, threshold=shipped().threshold)
    patterns_only = patterns_for(INTENTS, {}, learned=False)
    hits: dict[str, list[bool]] = {intent: [] for intent in INTENTS}
    reaching_stage_2 = ordinary = 0
    for example in (e for e in examples if e.part == "fresh-4"):
        found = patterns_only.match(example.text)
        if not found:
            learned = model.intent(example.lowered, INTENTS)
            found = (learned,) if learned else ()
        label = LABELS[example.label]
        if label == "none":
            ordinary += 1
            reaching_stage_2 += bool(found)
        else:
            hits[label].append(label in found)
    rates = {intent: sum(h) / len(h) for intent, h in hits.items()}
    assert rates["image"] >= 0.81 and rates["video"] >= 0.82 and rates["search"] >= 0.83, rates
    assert reaching_stage_2 / ordinary <= 0.05


def test_the_cue_gate_never_changes_what_the_defaults_match() -> None:
    # The cues only skip work: on every corpus reply, and on pieces of them glued
    # together, the gated patterns match exactly what the ungated ones do.
    gated = patterns_for(INTENTS, {}, learned=False)  # the patterns; the backstop is apart
    ungated = IntentPatterns(
        DEFAULT_PATTERNS,
        guard=guarded,
        structures={intent: Structure(WORDS[intent]) for intent in INTENTS},
    )
    assert set(DEFAULT_CUES) == set(WORD_CUES) == set(INTENTS)
    for text in _corpus_texts():
        assert gated.match(text) == ungated.match(text), text


def test_the_structure_finds_what_its_plain_patterns_do() -> None:
    # `Structure` looks for the frames only around the words; the plain patterns (a
    # frame and the word, searched over the whole reply) are what it means.
    windowed = IntentPatterns(
        {}, guard=guarded, structures={i: Structure(WORDS[i], WORD_CUES[i]) for i in INTENTS}
    )
    plain = IntentPatterns(STRUCTURAL_PATTERNS, guard=guarded)
    for text in _corpus_texts():
        assert windowed.match(text) == plain.match(text), text


def _corpus_texts() -> list[str]:
    """Every corpus reply, then pieces of three and of twenty glued together."""
    texts = [
        row["text"]
        for name in ("handoff_ordinary.jsonl", "handoff_promising.jsonl")
        for row in _corpus(name)
    ]
    glued = [" ".join(texts[i : i + 3]) for i in range(0, len(texts) - 3, 3)]
    long = ["\n".join(texts[i : i + 20]) for i in range(0, len(texts) - 20, 20)]
    return texts + glued + long


# --- seed 000's checklist, end to end ----------------------------------------------------

#: The mode's reply model (it cannot call tools), by the user's message.
LEXI_REPLIES = {
    "draw me a fox": "Ooh, a fox in the snow! Let me create an image of that for you.",
    "tell me about paris": "Paris is the capital of France, famous for its cafes and light.",
    "can you make pictures?": "Sure, I'll draw you a picture as soon as I learn to hold a pencil.",
    "maybe a picture?": "Maybe I'll make a picture of it later, if you still want one.",
    "animate the waves": "Sure! Let me create a video of the waves rolling in at sunset.",
    "garble": "Let me draw a picture of that garden for you.",
}
#: The control model's answer, by what the reply says.
CONTROL_ANSWERS = {
    "a fox in the snow": {"tool": "image", "prompt": "a red fox in the snow", "confidence": 0.93},
    "hold a pencil": {"tool": None, "prompt": "", "confidence": 0.96},
    "Maybe I'll make": {"tool": "image", "prompt": "a picture", "confidence": 0.4},
    "video of the waves": {"tool": "video", "prompt": "waves at sunset", "confidence": 0.88},
}


def respond(body: dict[str, Any]) -> ChatAnswer:
    messages = body["messages"]
    last = messages[-1]
    text = last["content"] if isinstance(last.get("content"), str) else ""
    if body["model"] == "lexi-model":
        return ChatAnswer(LEXI_REPLIES.get(text, "Mm, tell me more."))
    if body["model"] == "control-model":
        for words, answer in CONTROL_ANSWERS.items():
            if words in text:
                return ChatAnswer(json.dumps(answer))
        return ChatAnswer("Sure thing! It's an image, I'm quite sure.")
    if body["model"] == "brin-model":
        # The primary user's main agent: calls image_generate, then answers with its link.
        if last["role"] == "tool":
            link = re.search(r"/v1/artifacts/[0-9a-f-]+", text)
            return ChatAnswer(f"Here is your picture: {link.group(0) if link else 'none'}")
        arguments = json.dumps({"prompt": text})
        return ChatAnswer(calls=(FakeCall("call-1", "image_generate", (arguments,)),))
    return ChatAnswer(status=404)


def e2e_settings(tmp_path: Path, wire: str, jobs: str) -> Settings:
    def model(name: str) -> dict[str, Any]:
        return {"provider": "openai", "base_url": f"{wire}/v1", "model": name, "max_retries": 0}

    return Settings(
        data_dir=tmp_path,
        lifecycle={"timezone": "UTC", "idle_window": "off", "day_boundary": "off"},
        models={
            "lexi": model("lexi-model"),
            "control": model("control-model"),
            "brin": model("brin-model"),
            "images": model("image-model"),
        },
        agents={
            "defaults": {"model": "brin"},
            "main": {"model": "brin", "tools": ["image_generate"]},
            "lexi": {
                "model": "lexi",
                "control_model": "control",
                "handoff": {
                    "tools": {"image": "image_generate", "video": "video_generate"},
                    "tools_primary": {"image": "agent__main"},
                    "timeout": "5s",
                    "tool_timeout": "20s",
                },
            },
        },
        tools={
            "images": {"model": "images"},
            "video": {"base_url": jobs, "poll_interval": "20ms", "max_wait": "10s"},
        },
        modes={"lexi": {"agent": "lexi"}},
        limits={"max_body_bytes": 65536},
    )


@pytest.fixture(scope="module")
def seed000(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Gateway, HandoffWire, VideoJobs]]:
    tmp_path = tmp_path_factory.mktemp("handoff")
    with (
        handoff_wire(respond, PNG) as wire,
        video_jobs() as jobs,
        running_gateway(e2e_settings(tmp_path, wire.url, jobs.url), {}) as gw,
        httpx.Client(base_url=gw.url, timeout=30) as client,
    ):
        for user in ("prime", "alice", "bob"):
            enabled = client.patch(
                f"/v1/users/{user}", json={"modes_enabled": ["lexi"]}, headers=gw.auth("root")
            )
            assert enabled.status_code == 200, enabled.text
            unlocked = client.post("/v1/modes/lexi/unlock", json={}, headers=gw.auth(user))
            assert unlocked.status_code == 200, unlocked.text
        yield gw, wire, jobs


def turn(gw: Gateway, user: str, content: str) -> list[tuple[str, dict[str, Any]]]:
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        answer = client.post(
            "/v1/chat", json={"content": content, "mode": "lexi"}, headers=gw.auth(user)
        )
    assert answer.status_code == 200, answer.text
    events = parse_sse(answer.text)
    route = next(data for kind, data in events if kind == "route")
    assert (route["reason"], route["agent"]) == ("mode_active", "lexi")
    assert events[-1][0] == "end", events
    return events


def stored_reply(gw: Gateway, user: str, events: list[tuple[str, dict[str, Any]]]) -> str:
    start = next(data for kind, data in events if kind == "start")
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        answer = client.get(
            f"/v1/sessions/{start['session_key']}/segments/{start['session_id']}/messages",
            headers=gw.auth(user),
        )
    assert answer.status_code == 200, answer.text
    messages = answer.json()["messages"]
    assert messages[-1]["role"] == "assistant"
    return str(messages[-1]["content"])


def kinds(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [kind for kind, _ in events if kind not in ("route", "start")]


def handoff_of(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    (found,) = [data for kind, data in events if kind == "handoff"]
    return found


def test_other_user_in_the_mode_gets_the_image_from_the_other_provider(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, wire, _ = seed000
    before = len(wire.chat_bodies("brin-model"))
    events = turn(gw, "alice", "draw me a fox")
    reply = LEXI_REPLIES["draw me a fox"]
    # Every reply token, then the hand-off, then the appended link, then the end.
    words = len(reply.split(" "))
    assert kinds(events) == ["token"] * words + ["handoff", "token", "end"]
    tokens = [data["content"] for kind, data in events if kind == "token"]
    assert "".join(tokens[:-1]) == reply
    event = handoff_of(events)
    assert (event["intent"], event["tool"], event["status"]) == ("image", "image_generate", "done")
    assert event["confidence"] == pytest.approx(0.93) and event["artifact_id"]
    link = f"\n\n[image](/v1/artifacts/{event['artifact_id']})"
    assert tokens[-1] == link
    # The stored reply holds what was appended.
    assert stored_reply(gw, "alice", events) == reply + link
    # The image is the images API's, kept for alice alone.
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        image = client.get(f"/v1/artifacts/{event['artifact_id']}", headers=gw.auth("alice"))
        assert (image.status_code, image.content) == (200, PNG)
        assert image.headers["content-type"] == "image/png"
        theirs = client.get(f"/v1/artifacts/{event['artifact_id']}", headers=gw.auth("bob"))
        assert theirs.status_code == 404
    assert "a red fox in the snow" in wire.image_prompts()
    # The other provider: the primary user's agent was never asked.
    assert len(wire.chat_bodies("brin-model")) == before
    # The control model read the user's message and the reply.
    control = wire.chat_bodies("control-model")[-1]
    assert "User: draw me a fox" in control["messages"][1]["content"]
    assert control["response_format"] == {"type": "json_object"}


def test_primary_user_in_the_mode_gets_the_image_through_the_primarys_tool(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, wire, _ = seed000
    before = len(wire.chat_bodies("brin-model"))
    events = turn(gw, "prime", "draw me a fox")
    event = handoff_of(events)
    assert (event["tool"], event["status"]) == ("agent__main", "done")
    # The main agent (a model that calls tools) was asked with the extracted prompt, and
    # made the image with its own tool.
    asked = wire.chat_bodies("brin-model")[before:]
    assert len(asked) == 2
    assert asked[0]["messages"][-1]["content"] == "a red fox in the snow"
    assert [t["function"]["name"] for t in asked[0]["tools"]] == ["image_generate"]
    link = f"\n\n[image](/v1/artifacts/{event['artifact_id']})"
    assert stored_reply(gw, "prime", events) == LEXI_REPLIES["draw me a fox"] + link
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        image = client.get(f"/v1/artifacts/{event['artifact_id']}", headers=gw.auth("prime"))
    assert (image.status_code, image.content) == (200, PNG)


def test_ordinary_conversation_is_no_false_positive(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, wire, _ = seed000
    asked = len(wire.chat_bodies("control-model"))
    events = turn(gw, "bob", "tell me about paris")
    assert "handoff" not in kinds(events)
    assert len(wire.chat_bodies("control-model")) == asked  # stage 1 did not even match
    assert stored_reply(gw, "bob", events) == LEXI_REPLIES["tell me about paris"]
    # A joking refusal that looks like a promise reaches stage 2, which says no promise.
    events = turn(gw, "bob", "can you make pictures?")
    event = handoff_of(events)
    assert (event["status"], event["message"], event["tool"]) == ("skipped", "no_promise", None)
    assert kinds(events)[-2:] == ["handoff", "end"]
    assert stored_reply(gw, "bob", events) == LEXI_REPLIES["can you make pictures?"]


def test_low_confidence_and_a_malformed_answer_return_the_reply_as_it_is(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, wire, _ = seed000
    images = len(wire.image_prompts())
    events = turn(gw, "bob", "maybe a picture?")
    event = handoff_of(events)
    assert (event["status"], event["confidence"], event["tool"]) == (
        "skipped",
        0.4,
        "image_generate",
    )
    assert event["message"].startswith("low_confidence")
    assert kinds(events)[-2:] == ["handoff", "end"]
    assert stored_reply(gw, "bob", events) == LEXI_REPLIES["maybe a picture?"]
    events = turn(gw, "bob", "garble")
    assert handoff_of(events)["message"] == "classification_failed: unparseable"
    assert stored_reply(gw, "bob", events) == LEXI_REPLIES["garble"]
    assert len(wire.image_prompts()) == images  # no tool ran


def test_a_failing_tool_appends_an_error_note(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, wire, _ = seed000
    wire.image_status = 500
    try:
        events = turn(gw, "alice", "draw me a fox")
    finally:
        wire.image_status = 200
    event = handoff_of(events)
    assert (event["status"], event["artifact_id"]) == ("failed", None)
    assert event["message"] == "the image service answered HTTP 500"
    note = "\n\n(I could not make the image: the image service answered HTTP 500)"
    assert kinds(events)[-3:] == ["handoff", "token", "end"]
    assert [d["content"] for k, d in events if k == "token"][-1] == note
    stored = stored_reply(gw, "alice", events)
    assert stored == LEXI_REPLIES["draw me a fox"] + note
    assert "SECRET" not in json.dumps([data for _, data in events])


def test_a_promised_video_comes_from_the_job_api(
    seed000: tuple[Gateway, HandoffWire, VideoJobs],
) -> None:
    gw, _, jobs = seed000
    events = turn(gw, "alice", "animate the waves")
    event = handoff_of(events)
    assert (event["intent"], event["tool"], event["status"]) == ("video", "video_generate", "done")
    link = f"\n\n[video](/v1/artifacts/{event['artifact_id']})"
    assert stored_reply(gw, "alice", events) == LEXI_REPLIES["animate the waves"] + link
    assert jobs.requests[0][2]["prompt"] == "waves at sunset"
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        video = client.get(f"/v1/artifacts/{event['artifact_id']}", headers=gw.auth("alice"))
    assert (video.status_code, video.content) == (200, MP4)
    assert video.headers["content-type"] == "video/mp4"
