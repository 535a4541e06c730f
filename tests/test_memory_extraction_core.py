"""Memory extraction's pure part (core/memory_extraction.py, DESIGN.md §13): the prompt,
the strict reading of the control model's `{"memory": [...]}` answer (a malformed one
changes nothing), and the plan of changes in which the user's own edits win."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessiongate.core.memory_extraction import (
    MAX_ANSWER_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_OPS,
    MAX_TEXT_CHARS,
    Change,
    MalformedAnswer,
    MemoryOp,
    ShownItem,
    SpanMessage,
    UserOverrides,
    extraction_messages,
    parse_memory_answer,
    plan_changes,
    same_fact,
    split_span,
)

SHOWN = {"mem_a": "Lives in Lyon.", "mem_b": "Prefers answers in German."}


def answer(*ops: Any) -> str:
    return json.dumps({"memory": list(ops)})


# -- the prompt -----------------------------------------------------------------------------


def test_prompt_shows_items_by_id_and_the_span_as_data() -> None:
    messages = extraction_messages(
        [SpanMessage("user", "I moved to Berlin"), SpanMessage("assistant", "Noted!")],
        [ShownItem("mem_a", "Lives\nin Lyon."), ShownItem("mem_b", "Prefers German.")],
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert '"memory"' in messages[0]["content"]
    body = messages[1]["content"]
    assert "mem_a: Lives in Lyon." in body  # one line per item
    assert "mem_b: Prefers German." in body
    assert "<user>\nI moved to Berlin\n</user>" in body
    assert "<assistant>\nNoted!\n</assistant>" in body
    assert body.index("<items>") < body.index("<conversation>")


def test_prompt_without_items_says_so_and_clips_long_messages() -> None:
    long = "x" * (MAX_MESSAGE_CHARS + 50)
    body = extraction_messages([SpanMessage("user", long)], [])[1]["content"]
    assert "(none yet)" in body
    assert "x" * (MAX_MESSAGE_CHARS + 1) not in body
    assert "[… cut]" in body


def test_a_tool_or_system_role_is_shown_as_the_assistant_never_as_the_user() -> None:
    body = extraction_messages([SpanMessage("tool", "result")], [])[1]["content"]
    assert "<assistant>\nresult\n</assistant>" in body
    assert "<user>" not in body


def test_a_long_span_is_split_in_order_and_nothing_is_left_out() -> None:
    span = [SpanMessage("user" if i % 2 == 0 else "assistant", f"m{i} " * 500) for i in range(20)]
    parts = split_span(span, limit=5000)
    assert len(parts) > 1
    assert [m for part in parts for m in part] == span
    for part in parts:
        assert sum(len(m.text) for m in part) <= 5000 or len(part) == 1


# -- the answer -----------------------------------------------------------------------------


def test_every_op_is_read() -> None:
    text = answer(
        {"op": "add", "text": "  Has a   dog called Rex. "},
        {"op": "update", "id": "mem_a", "text": "Lives in Berlin."},
        {"op": "delete", "id": "mem_b"},
        {"op": "noop"},
    )
    assert parse_memory_answer(text, SHOWN) == [
        MemoryOp("add", None, "Has a dog called Rex."),
        MemoryOp("update", "mem_a", "Lives in Berlin."),
        MemoryOp("delete", "mem_b", None),
        MemoryOp("noop", None, None),
    ]


def test_a_fenced_answer_and_an_empty_list_are_fine() -> None:
    fenced = "```json\n" + answer({"op": "noop", "id": "mem_a"}) + "\n```"
    assert parse_memory_answer(fenced, SHOWN) == [MemoryOp("noop", "mem_a", None)]
    assert parse_memory_answer('{"memory": []}', SHOWN) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I think the user lives in Berlin.", "not JSON"),
        ('{"memory": [{"op": "add", "text": "x"}]} and more', "not JSON"),
        ('{"memory": NaN}', "not JSON"),
        ("[]", "exactly the key"),
        ('{"memory": [], "why": "because"}', "exactly the key"),
        ('{"memory": {"op": "noop"}}', "not a list"),
        (answer({"op": "merge", "id": "mem_a"}), "unknown op"),
        (answer({"op": "add"}), "missing text"),
        (answer({"op": "add", "text": "   "}), "empty text"),
        (answer({"op": "add", "text": 5}), "missing text"),
        (answer({"op": "add", "text": "x" * (MAX_TEXT_CHARS + 1)}), "longer than"),
        (answer({"op": "add", "text": "a\x00b"}), "control characters"),
        (answer({"op": "add", "id": "mem_a", "text": "x"}), "add names an id"),
        (answer({"op": "update", "text": "x"}), "update without an id"),
        (answer({"op": "update", "id": "mem_a"}), "missing text"),
        (answer({"op": "update", "id": "mem_zzz", "text": "x"}), "not shown"),
        (answer({"op": "delete"}), "delete without an id"),
        (answer({"op": "delete", "id": "mem_other_users"}), "not shown"),
        (answer({"op": "delete", "id": ["mem_a"]}), "not shown"),
        (answer({"op": "noop", "id": "mem_nope"}), "not shown"),
        (answer({"op": "delete", "id": "mem_a", "why": "x"}), "is not an object"),
        (answer("add"), "is not an object"),
        (
            answer({"op": "delete", "id": "mem_a"}, {"op": "update", "id": "mem_a", "text": "x"}),
            "two ops",
        ),
        (answer(*[{"op": "noop"}] * (MAX_OPS + 1)), f"more than {MAX_OPS}"),
        ("x" * (MAX_ANSWER_CHARS + 1), "too long"),
    ],
)
def test_a_malformed_answer_is_refused_whole(text: str, reason: str) -> None:
    with pytest.raises(MalformedAnswer) as refused:
        parse_memory_answer(text, SHOWN)
    assert reason in refused.value.reason
    # The reason is safe to log: it never repeats what the model wrote.
    assert "Berlin" not in refused.value.reason


def test_one_bad_op_refuses_the_good_ones_too() -> None:
    text = answer({"op": "add", "text": "Has a dog."}, {"op": "delete", "id": "mem_x"})
    with pytest.raises(MalformedAnswer):
        parse_memory_answer(text, SHOWN)


# -- the plan -------------------------------------------------------------------------------


def test_a_plan_adds_updates_and_deletes() -> None:
    ops = [
        MemoryOp("add", None, "Has a dog called Rex."),
        MemoryOp("update", "mem_a", "Lives in Berlin."),
        MemoryOp("delete", "mem_b"),
        MemoryOp("noop"),
    ]
    plan = plan_changes(ops, SHOWN)
    assert plan.changes == (
        Change("add", None, "Has a dog called Rex."),
        Change("update", "mem_a", "Lives in Berlin."),
        Change("delete", "mem_b", None),
    )
    assert plan.kept_by_user == () and plan.repeats == ()


def test_repeats_change_nothing() -> None:
    ops = [
        MemoryOp("add", None, "lives in lyon"),  # already there, other case and stop
        MemoryOp("update", "mem_b", "Prefers answers in German"),  # the same text
        MemoryOp("add", None, "Has a dog."),
        MemoryOp("add", None, "Has a dog"),  # twice in one answer
    ]
    plan = plan_changes(ops, SHOWN)
    assert plan.changes == (Change("add", None, "Has a dog."),)
    assert len(plan.repeats) == 3


def test_the_users_edit_wins_over_an_update_or_delete_from_the_same_source() -> None:
    ops = [MemoryOp("update", "mem_a", "Lives in Paris."), MemoryOp("delete", "mem_a")]
    for op in ops:
        plan = plan_changes([op], SHOWN, UserOverrides(edited_ids=frozenset({"mem_a"})))
        assert plan.changes == ()
        assert plan.kept_by_user == (op,)


def test_what_the_user_replaced_or_forgot_is_not_added_back() -> None:
    user = UserOverrides(replaced_texts=("Lives in Lyon, France.",))
    again = MemoryOp("add", None, "The user lives in Lyon, France")
    other = MemoryOp("add", None, "Has a dog called Rex.")
    sneaky = MemoryOp("update", "mem_b", "Lives in Lyon, France.")
    plan = plan_changes([again, other, sneaky], SHOWN, user)
    assert plan.changes == (Change("add", None, "Has a dog called Rex."),)
    assert plan.kept_by_user == (again, sneaky)


def test_a_text_known_only_by_its_fingerprint_is_not_added_back() -> None:
    gone = {"lives in lyon"}
    user = UserOverrides(removed=lambda text: text.casefold().rstrip(".") in gone)
    ops = [MemoryOp("add", None, "Lives in Lyon."), MemoryOp("add", None, "Has a dog.")]
    plan = plan_changes(ops, {}, user)
    assert plan.changes == (Change("add", None, "Has a dog."),)
    assert plan.kept_by_user == (ops[0],)


def test_a_forgotten_item_whose_text_is_gone_stops_every_add_from_that_source() -> None:
    ops = [MemoryOp("add", None, "Has a dog called Rex."), MemoryOp("delete", "mem_b")]
    plan = plan_changes(ops, SHOWN, UserOverrides(forgot_unknown=True))
    assert plan.changes == (Change("delete", "mem_b", None),)
    assert plan.kept_by_user == (ops[0],)


def test_same_fact() -> None:
    assert same_fact("Lives in Lyon.", "lives in  lyon")
    assert same_fact("The user lives in Lyon, France", "Lives in Lyon, France.")
    assert not same_fact("Lives in Lyon.", "Has a dog called Rex.")
    assert not same_fact("?", "!")


# -- properties -----------------------------------------------------------------------------

IDS = ["mem_a", "mem_b", "mem_c"]
texts = st.text(min_size=0, max_size=40)
raw_ops = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "update", "delete", "noop", "merge"])},
    optional={
        "id": st.one_of(st.none(), st.sampled_from([*IDS, "mem_z", "x"]), st.integers()),
        "text": st.one_of(st.none(), texts, st.integers()),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(raw_ops, max_size=MAX_OPS + 2).map(lambda ops: json.dumps({"memory": ops})),
    )
)
def test_any_answer_is_either_valid_ops_or_refused(text: str) -> None:
    shown = {"mem_a": "Lives in Lyon.", "mem_b": "Has a cat."}
    try:
        ops = parse_memory_answer(text, shown)
    except MalformedAnswer:
        return
    assert len(ops) <= MAX_OPS
    for op in ops:
        if op.op in ("update", "delete"):
            assert op.memory_id in shown
        if op.op == "add":
            assert op.memory_id is None
        if op.op in ("add", "update"):
            assert op.text and len(op.text) <= MAX_TEXT_CHARS and op.text == op.text.strip()


valid_ops = st.lists(
    st.one_of(
        st.builds(MemoryOp, st.just("add"), st.none(), st.text(min_size=1, max_size=30)),
        st.builds(
            MemoryOp, st.just("update"), st.sampled_from(IDS), st.text(min_size=1, max_size=30)
        ),
        st.builds(MemoryOp, st.just("delete"), st.sampled_from(IDS), st.none()),
        st.just(MemoryOp("noop")),
    ),
    max_size=MAX_OPS,
)


@settings(max_examples=300, deadline=None)
@given(
    valid_ops,
    st.sets(st.sampled_from(IDS)),
    st.lists(st.text(min_size=1, max_size=30), max_size=3),
    st.booleans(),
)
def test_a_plan_never_overrides_the_user(
    ops: list[MemoryOp], edited: set[str], replaced: list[str], forgot: bool
) -> None:
    shown = {"mem_a": "Lives in Lyon.", "mem_b": "Has a cat.", "mem_c": "Likes tea."}
    user = UserOverrides(frozenset(edited), tuple(replaced), forgot_unknown=forgot)
    plan = plan_changes(ops, shown, user)
    added: list[str] = []
    for change in plan.changes:
        if change.op == "add":
            assert change.memory_id is None and change.text is not None
            assert not forgot
            added.append(change.text)
        else:
            assert change.memory_id in shown
            assert change.memory_id not in edited
        if change.text is not None:
            assert not any(same_fact(change.text, r) for r in replaced)
    # No item is ever added twice, nor one already there.
    keys = [t.casefold().strip() for t in added]
    assert len(set(keys)) == len(keys)
    # Every op that is not a noop is accounted for exactly once.
    acted = len(plan.changes) + len(plan.kept_by_user) + len(plan.repeats)
    assert acted == sum(op.op != "noop" for op in ops)
