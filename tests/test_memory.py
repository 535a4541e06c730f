"""Memory items, the pure rules (core/memory.py, core/memory_exchange.py,
service/turn/memory_context.py): what an item, scope, source and text may be; an update
supersedes and never overwrites; tombstone fingerprints; which items a turn gets; and the
block always fitting what the budget leaves (a property test), lowest score first and
pinned last."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiongate.config.memory import MemoryConfig, MemoryPolicy, memory_policy
from sessiongate.core.context import (
    MEMORY_SOURCE,
    MESSAGE_OVERHEAD_TOKENS,
    assemble_context,
    estimate_tokens,
)
from sessiongate.core.memory import (
    MAX_MEMORY_CHARS,
    MEMORY_HEADER,
    Injected,
    MemoryItem,
    MemorySource,
    applies_to,
    choose_items,
    fit_memory,
    is_memory_id,
    memory_allowance,
    new_memory_id,
    render_memory,
    source_matches,
    supersede,
    text_fingerprint,
    validate_memory_id,
    validate_memory_text,
    validate_scope,
    validate_source,
)
from sessiongate.core.memory_exchange import export_document, parse_export
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.errors import SessionGateError
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.memory_context import cost, fit_turn_memory

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SEGMENT = "019cadc6-9a80-7001-85e6-425bd031ea1f"


def item(n: int, text: str = "", *, pinned: bool = False, scope: str = "user") -> MemoryItem:
    return MemoryItem(
        memory_id=f"mem_{n:032x}",
        user="alice",
        text=text or f"fact number {n}",
        scope=scope,
        pinned=pinned,
        source=None,
        created_by="user",
        created_at=T0 + timedelta(seconds=n),
    )


def code_of(call: object) -> tuple[str, int]:
    assert callable(call)
    with pytest.raises(SessionGateError) as raised:
        call()
    return raised.value.code, raised.value.status


# -- what may be kept -----------------------------------------------------------------------


def test_ids_are_mem_and_32_hex_digits_in_creation_order() -> None:
    first = new_memory_id("019cadc6-9a80-7001-85e6-425bd031ea1f")
    second = new_memory_id("019cadc6-9a80-7002-85e6-425bd031ea1f")
    assert first == "mem_019cadc69a80700185e6425bd031ea1f" and first < second
    assert is_memory_id(first) and validate_memory_id(first) == first
    for bad in ("mem_", "MEM_019cadc69a80700185e6425bd031ea1f", first + "0", 7, None, "x" * 36):
        assert not is_memory_id(bad)
        assert code_of(lambda bad=bad: validate_memory_id(bad)) == ("invalid_memory_id", 400)


def test_text_is_trimmed_bounded_and_plain() -> None:
    assert validate_memory_text("  Prefers tea \n") == "Prefers tea"
    assert validate_memory_text("line one\nline two\ttab") == "line one\nline two\ttab"
    assert code_of(lambda: validate_memory_text("   ")) == ("invalid_text", 400)
    assert code_of(lambda: validate_memory_text(12)) == ("invalid_text", 400)
    assert code_of(lambda: validate_memory_text("a\x00b")) == ("invalid_text", 400)
    assert code_of(lambda: validate_memory_text("\ud800")) == ("invalid_text", 400)
    too_long = "x" * (MAX_MEMORY_CHARS + 1)
    assert code_of(lambda: validate_memory_text(too_long)) == ("memory_too_large", 413)
    assert validate_memory_text("x" * MAX_MEMORY_CHARS) == "x" * MAX_MEMORY_CHARS


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (None, "user"),
        ("user", "user"),
        ("agent:main", "agent:main"),
        ("key:chat:alice", "key:chat:alice"),
    ],
)
def test_scopes_that_are_kept(scope: str | None, expected: str) -> None:
    assert validate_scope(scope) == expected


@pytest.mark.parametrize(
    "scope",
    [
        "",
        "users",
        "agent:",
        "key:",
        "key:has space",
        "agent:a b",
        "team:x",
        3,
        "agent:" + "a" * 201,
    ],
)
def test_scopes_that_are_refused(scope: object) -> None:
    assert code_of(lambda: validate_scope(scope)) == ("invalid_scope", 400)


def test_a_source_names_a_key_a_segment_and_its_messages() -> None:
    source = validate_source(
        {"key": "chat:alice", "session_id": SEGMENT, "message_ids": [f"{SEGMENT}:3"]}
    )
    assert source == MemorySource("chat:alice", SEGMENT, (f"{SEGMENT}:3",))
    assert validate_source(None) is None
    for bad in (
        "chat:alice",
        {"key": "bad key"},
        {"key": "k", "session_id": "nope"},
        {"key": "k", "message_ids": ["not-a-message"]},
        {"key": "k", "message_ids": [f"{SEGMENT}:x"]},
        {"key": "k", "extra": 1},
    ):
        assert code_of(lambda bad=bad: validate_source(bad)) == ("invalid_source", 400)


# -- an update never overwrites -------------------------------------------------------------


def test_an_update_keeps_a_new_item_and_marks_the_old_one() -> None:
    old = replace(
        item(1, "Lives in Lyon", pinned=True, scope="agent:main"),
        source=MemorySource("chat:alice", SEGMENT, (f"{SEGMENT}:1",)),
    )
    later = T0 + timedelta(days=3)
    new, stored_old = supersede(old, "mem_" + "f" * 32, "Lives in Nantes", "extraction", later)
    assert (new.text, new.scope, new.pinned, new.source) == (
        "Lives in Nantes",
        "agent:main",
        True,
        old.source,
    )
    assert (new.created_by, new.created_at, new.valid) == ("extraction", later, True)
    assert stored_old.text == "Lives in Lyon"  # the old text stays as it was
    assert (stored_old.invalid_at, stored_old.superseded_by) == (later, new.memory_id)
    assert not stored_old.valid and old.valid  # the input is not changed


def test_fingerprints_fold_case_spacing_and_end_punctuation_only() -> None:
    base = text_fingerprint("Has two cats")
    assert text_fingerprint("  has   TWO cats. ") == base
    assert text_fingerprint("Has two cats!") == base
    assert text_fingerprint("Has three cats") != base
    assert len(base) == 64 and "cats" not in base  # a hash, never the text


def test_a_tombstone_matches_the_same_source_only() -> None:
    here = MemorySource("chat:alice", SEGMENT, (f"{SEGMENT}:1", f"{SEGMENT}:2"))
    assert source_matches(here, MemorySource("chat:alice", SEGMENT, (f"{SEGMENT}:2",)))
    assert source_matches(here, MemorySource("chat:alice"))  # the key, no messages named
    assert not source_matches(here, MemorySource("chat:alice", SEGMENT, (f"{SEGMENT}:9",)))
    assert not source_matches(here, MemorySource("other"))
    assert source_matches(None, None)
    assert not source_matches(None, here) and not source_matches(here, None)


# -- which items a turn gets ----------------------------------------------------------------


def test_scopes_decide_which_turns_an_item_covers() -> None:
    assert applies_to(item(1), "main", "k")
    assert applies_to(item(2, scope="agent:main"), "main", "k")
    assert not applies_to(item(3, scope="agent:other"), "main", "k")
    assert applies_to(item(4, scope="key:k"), "main", "k")
    assert not applies_to(item(5, scope="key:other"), "main", "k")
    assert not applies_to(replace(item(6), invalid_at=T0), "main", "k")


def test_off_gives_nothing_pinned_gives_pinned_relevant_adds_the_best() -> None:
    pool = [item(1, pinned=True), item(2), item(3), item(4, pinned=True), item(5)]
    scores = {pool[1].memory_id: 0.02, pool[2].memory_id: 0.03, pool[4].memory_id: 0.01}
    assert choose_items(pool, "off", scores) == []
    pinned = choose_items(pool, "pinned", scores)
    assert [(c.item.memory_id, c.reason) for c in pinned] == [
        (pool[0].memory_id, "pinned"),
        (pool[3].memory_id, "pinned"),
    ]
    relevant = choose_items(pool, "relevant", scores, max_items=2)
    assert [(c.item.memory_id, c.reason, c.score) for c in relevant] == [
        (pool[0].memory_id, "pinned", None),
        (pool[3].memory_id, "pinned", None),
        (pool[2].memory_id, "relevant", 0.03),
        (pool[1].memory_id, "relevant", 0.02),
    ]
    # An unscored item (no keyword or vector match) is never "relevant".
    assert len(choose_items(pool, "relevant", {}, max_items=8)) == 2


def test_the_block_is_one_system_text_naming_each_item() -> None:
    block = render_memory([Injected(item(1, "Prefers tea"), "pinned")])
    assert block.splitlines() == [MEMORY_HEADER, f"- [{item(1).memory_id}] Prefers tea"]


def test_trimming_drops_relevant_lowest_first_then_pinned_newest_first() -> None:
    chosen = [
        Injected(item(1, "a" * 80, pinned=True), "pinned"),
        Injected(item(2, "b" * 80, pinned=True), "pinned"),
        Injected(item(3, "c" * 80), "relevant", 0.05),
        Injected(item(4, "d" * 80), "relevant", 0.01),
    ]
    full = cost(render_memory(chosen))
    assert fit_memory(chosen, full, cost) == chosen
    assert fit_memory(chosen, None, cost) == chosen
    assert fit_memory(chosen, full - 1, cost) == chosen[:3]  # the lowest score went
    assert fit_memory(chosen, cost(render_memory(chosen[:2])), cost) == chosen[:2]
    assert fit_memory(chosen, cost(render_memory(chosen[:1])), cost) == chosen[:1]
    assert fit_memory(chosen, 3, cost) == []
    assert memory_allowance(None, 500) is None
    assert memory_allowance(1000, 300) == 700 and memory_allowance(100, 300) == 0


injected_lists = st.lists(
    st.tuples(
        st.text(alphabet="abc xyz", min_size=1, max_size=300),
        st.booleans(),
        st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    ),
    max_size=12,
)


def injected(raw: list[tuple[str, bool, float]]) -> list[Injected]:
    """`injected_lists`' drawn tuples as the items a turn chose (pinned, or relevant with
    their score)."""
    return [
        Injected(
            item(n, text.strip() or "x", pinned=pinned),
            "pinned" if pinned else "relevant",
            None if pinned else score,
        )
        for n, (text, pinned, score) in enumerate(raw)
    ]


@settings(max_examples=200, deadline=None)
@given(raw=injected_lists, allowance=st.integers(min_value=0, max_value=800))
def test_the_block_always_fits_what_the_budget_leaves(
    raw: list[tuple[str, bool, float]], allowance: int
) -> None:
    chosen = injected(raw)
    kept = fit_memory(chosen, allowance, cost)
    if kept:
        assert cost(render_memory(kept)) <= allowance
    # A subsequence in the original order; a relevant item only while every pinned stays.
    positions = [chosen.index(c) for c in kept]
    assert positions == sorted(positions)
    if any(c.reason == "relevant" for c in kept):
        assert all(c in kept for c in chosen if c.reason == "pinned")
    # Every relevant item kept scores at least as high as every relevant one dropped.
    kept_scores = [c.score or 0 for c in kept if c.reason == "relevant"]
    dropped = [c.score or 0 for c in chosen if c.reason == "relevant" and c not in kept]
    if kept_scores and dropped:
        assert min(kept_scores) >= max(dropped)


def profile(**fields: object) -> AgentProfile:
    values: dict[str, object] = {
        "name": "main",
        "reply_model": "scripted",
        "fallback_models": (),
        "control_model": None,
        "control_fallback_models": (),
        "memory_window": 50,
        "token_budget": None,
        "system_prompt": "You are helpful.",
        "context_files": (),
    }
    values.update(fields)
    return AgentProfile(**values)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(
    raw=injected_lists,
    budget=st.integers(min_value=256, max_value=1500),
    message=st.text(alphabet="hello world ", max_size=2000),
)
def test_a_turn_block_plus_the_fixed_parts_stay_within_the_agent_budget(
    raw: list[tuple[str, bool, float]], budget: int, message: str
) -> None:
    agent = profile(token_budget=budget)
    chosen = injected(raw)
    kept = fit_turn_memory(
        agent, chosen, ratio=1.0, fragments=(), client_system=("be brief",), newest=message
    )
    fixed = cost("You are helpful.") + cost("be brief") + (cost(message) if message else 0)
    if kept:
        assert fixed + cost(render_memory(kept)) <= budget
    # Assembled with the same budget: the block is in, before the thread, and the total
    # stays within the budget whenever the fixed parts alone do.
    thread = [
        Message(
            SEGMENT,
            n + 1,
            Role.USER if n % 2 == 0 else Role.ASSISTANT,
            f"m{n} " * 40,
            MessageStatus.COMPLETE,
            T0,
        )
        for n in range(6)
    ] + [Message(SEGMENT, 7, Role.USER, message or "hi", MessageStatus.COMPLETE, T0)]
    context = assemble_context(
        thread=thread,
        memory_window=50,
        system_prompt="You are helpful.",
        token_budget=budget,
        client_system=("be brief",),
        memory_block=render_memory(kept) if kept else None,
    )
    sources = [m.source for m in context.messages]
    assert (MEMORY_SOURCE in sources) == bool(kept)
    if kept:
        assert sources.index(MEMORY_SOURCE) < sources.index(thread[-1].message_id)
    assert context.messages[-1].content == (message or "hi")
    if fixed + (cost(render_memory(kept)) if kept else 0) <= budget and context.dropped_messages:
        assert context.token_estimate <= budget


def test_no_budget_means_no_trim_and_a_small_one_trims_never_fails() -> None:
    chosen = [Injected(item(n, "word " * 50, pinned=True), "pinned") for n in range(5)]
    unlimited = profile()
    assert (
        fit_turn_memory(unlimited, chosen, ratio=1.0, fragments=(), client_system=(), newest="hi")
        == chosen
    )
    tight = profile(token_budget=256)
    kept = fit_turn_memory(tight, chosen, ratio=1.0, fragments=(), client_system=(), newest="hi")
    assert 0 < len(kept) < len(chosen)
    assert kept == chosen[: len(kept)]  # the oldest pinned ones stay
    assert estimate_tokens("hi") + MESSAGE_OVERHEAD_TOKENS + cost(render_memory(kept)) <= 256


def test_config_merges_defaults_field_by_field() -> None:
    assert memory_policy(None, None) == MemoryPolicy("pinned", 8, False, None)
    merged = memory_policy(
        MemoryConfig(inject="relevant", max_items=3), MemoryConfig(extract=True, max_items=0)
    )
    assert merged == MemoryPolicy("relevant", 0, True, None)
    with pytest.raises(ValueError, match="inject"):
        MemoryConfig.model_validate({"inject": "always"})


# -- export documents ----------------------------------------------------------------------


def test_an_export_reads_back_and_bad_documents_name_the_item() -> None:
    old, new = item(1, "Lives in Lyon"), item(2, "Lives in Nantes")
    old = replace(old, invalid_at=T0 + timedelta(days=1), superseded_by=new.memory_id)
    document: dict[str, Any] = export_document(
        [old, new], lambda t: t.isoformat().replace("+00:00", "Z")
    )
    parsed = parse_export(document)
    assert [(p.memory_id, p.text, p.superseded_by) for p in parsed] == [
        (old.memory_id, "Lives in Lyon", new.memory_id),
        (new.memory_id, "Lives in Nantes", None),
    ]
    assert parsed[0].invalid_at == old.invalid_at and parsed[1].created_at == new.created_at
    bad_docs: list[tuple[object, str]] = [
        ([], "a JSON object"),
        ({"format": "other", "version": 1, "items": []}, "not a memory export"),
        ({**document, "items": "x"}, "items must be a list"),
        ({**document, "items": [{"id": "nope"}]}, "items[0]"),
        ({**document, "items": [document["items"][0], document["items"][0]]}, "twice"),
        ({**document, "items": [{**document["items"][1], "text": ""}]}, "items[0]"),
        ({**document, "items": [{**document["items"][1], "created_at": "2026-03-02"}]}, "zone"),
        ({**document, "items": [{**document["items"][1], "rogue": 1}]}, "unknown fields"),
    ]
    for bad, words in bad_docs:
        with pytest.raises(SessionGateError) as raised:
            parse_export(bad)
        assert raised.value.code == "invalid_memory_export" and words in raised.value.message
