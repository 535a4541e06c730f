"""Seed 004's output contract: a Python script, exactly one ---DELIMITER--- line, the answer
to speak; no code fences (sessiongate.core.output_contract)."""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from sessiongate.core.output_contract import (
    CODE_FENCE,
    DELIMITER,
    DELIMITER_NOT_ALONE,
    EMPTY_ANSWER,
    EMPTY_REPLY,
    FALLBACK_ANSWER,
    NO_DELIMITER,
    SCRIPT_CONTRACT_PROMPT,
    SEVERAL_DELIMITERS,
    ContractViolation,
    ScriptReply,
    parse_script_reply,
)


def test_delimiter_is_the_seeds() -> None:
    assert DELIMITER == "---DELIMITER---"


def test_a_valid_reply() -> None:
    raw = (
        "import subprocess\nsubprocess.Popen(['notepad.exe'])\n---DELIMITER---\nNotepad is open.\n"
    )
    assert parse_script_reply(raw) == ScriptReply(
        script="import subprocess\nsubprocess.Popen(['notepad.exe'])",
        answer="Notepad is open.",
    )


def test_a_chat_reply_may_have_no_script() -> None:
    assert parse_script_reply("---DELIMITER---\nParis.") == ScriptReply("", "Paris.")
    assert parse_script_reply("\n\n  ---DELIMITER---\t\nParis.") == ScriptReply("", "Paris.")


def test_crlf_line_endings() -> None:
    raw = "print('hi')\r\n---DELIMITER---\r\nSaid hi.\r\n"
    assert parse_script_reply(raw) == ScriptReply("print('hi')", "Said hi.")


def test_script_indentation_and_inner_blank_lines_are_kept() -> None:
    raw = "\n\nfor i in range(3):\n    print(i)\n\nprint('done')   \n---DELIMITER---\n  Done.  "
    reply = parse_script_reply(raw)
    assert reply == ScriptReply("for i in range(3):\n    print(i)\n\nprint('done')", "Done.")


def test_a_multi_line_answer_is_kept() -> None:
    reply = parse_script_reply("x = 1\n---DELIMITER---\nFirst line.\nSecond line.")
    assert reply == ScriptReply("x = 1", "First line.\nSecond line.")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", EMPTY_REPLY),
        (" \n\t ", EMPTY_REPLY),
        ("Notepad is open.", NO_DELIMITER),
        ("print(1)\n--- DELIMITER ---\nDone.", NO_DELIMITER),
        ("print(1)\n---delimiter---\nDone.", NO_DELIMITER),
        ("print(1)\n---DELIMITER---\nDone.\n---DELIMITER---\n", SEVERAL_DELIMITERS),
        ("print('---DELIMITER---')\n---DELIMITER---\nDone.", SEVERAL_DELIMITERS),
        ("print(1) ---DELIMITER--- Done.", DELIMITER_NOT_ALONE),
        ("print(1)\n---DELIMITER--- Done.", DELIMITER_NOT_ALONE),
        ("print(1)\n# ---DELIMITER---\nDone.", DELIMITER_NOT_ALONE),
        ("```python\nprint(1)\n```\n---DELIMITER---\nDone.", CODE_FENCE),
        ("print(1)\n---DELIMITER---\n```Done```", CODE_FENCE),
        ("~~~\nprint(1)\n~~~\n---DELIMITER---\nDone.", CODE_FENCE),
        ("print(1)\n---DELIMITER---\n", EMPTY_ANSWER),
        ("print(1)\n---DELIMITER---\n \n\t", EMPTY_ANSWER),
        ("print(1)\n---DELIMITER---", EMPTY_ANSWER),
    ],
)
def test_violations(raw: str, reason: str) -> None:
    result = parse_script_reply(raw)
    assert isinstance(result, ContractViolation)
    assert result.reason == reason
    assert result.message


def test_a_script_is_not_compiled_here() -> None:
    # The sandbox reports syntax errors with the interpreter's own message.
    reply = parse_script_reply("def broken(:\n---DELIMITER---\nDone.")
    assert reply == ScriptReply("def broken(:", "Done.")


def test_prompt_and_fallback() -> None:
    assert DELIMITER in SCRIPT_CONTRACT_PROMPT
    assert "```" in SCRIPT_CONTRACT_PROMPT  # it names what is forbidden
    assert FALLBACK_ANSWER.strip() == FALLBACK_ANSWER and FALLBACK_ANSWER
    assert "```" not in FALLBACK_ANSWER and DELIMITER not in FALLBACK_ANSWER


# -- properties ---------------------------------------------------------------------------------

# Lines a script or an answer may hold: no delimiter, no fences, no line breaks.
_LINE = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\r\n\x0b\x0c"),
    max_size=40,
).filter(lambda line: DELIMITER not in line and "```" not in line and "~~~" not in line)
# Python's str.splitlines() breaks at more than \n; the contract only knows \n and \r\n.
_OTHER_BREAKS = "\x1c\x1d\x1e\x85\u2028\u2029"


def _script(lines: list[str]) -> str:
    """A script as parse_script_reply returns it: no leading blank lines, no trailing
    whitespace."""
    return "\n".join(lines).lstrip("\n").rstrip()


@given(st.lists(_LINE, max_size=8), st.lists(_LINE, min_size=1, max_size=4))
@example(["import os", "    os.getcwd()"], ["Done."])
@example([], ["Hello."])
def test_round_trip(script_lines: list[str], answer_lines: list[str]) -> None:
    script = _script(script_lines)
    assume(not script[:1].isspace())  # leading whitespace of line one is the property below
    answer = "\n".join(answer_lines).strip()
    assume(answer != "")
    assume(not any(ch in script + answer for ch in _OTHER_BREAKS))
    assert parse_script_reply(f"{script}\n{DELIMITER}\n{answer}") == ScriptReply(script, answer)
    crlf = f"{script}\r\n{DELIMITER}\r\n{answer}".replace("\n", "\r\n").replace("\r\r", "\r")
    reply = parse_script_reply(crlf)
    assert isinstance(reply, ScriptReply)
    assert reply.script.replace("\r\n", "\n") == script


@given(st.text())
@example("a\n---DELIMITER---\nb\n---DELIMITER---\nc")
@example("---DELIMITER------DELIMITER---")
def test_zero_or_several_delimiters_is_always_a_violation(raw: str) -> None:
    result = parse_script_reply(raw)
    if raw.count(DELIMITER) != 1:
        assert isinstance(result, ContractViolation)
        assert result.reason in {EMPTY_REPLY, NO_DELIMITER, SEVERAL_DELIMITERS}


@given(st.lists(_LINE, max_size=6), st.lists(_LINE, max_size=6), st.integers(0, 3))
def test_inserting_a_second_delimiter_breaks_a_valid_reply(
    before: list[str], after: list[str], where: int
) -> None:
    lines = [*before, DELIMITER, *after, "Done."]
    assert isinstance(parse_script_reply("\n".join(lines)), ScriptReply)
    lines.insert(min(where, len(lines)), DELIMITER)
    result = parse_script_reply("\n".join(lines))
    assert isinstance(result, ContractViolation)
    assert result.reason == SEVERAL_DELIMITERS


@given(
    st.lists(_LINE, max_size=6),
    st.lists(_LINE, min_size=1, max_size=4),
    st.sampled_from(["```", "```python", "~~~"]),
    st.booleans(),
    st.integers(0, 10),
)
def test_a_fence_is_a_violation(
    script: list[str], answer: list[str], fence: str, in_script: bool, where: int
) -> None:
    # ``` anywhere; ~~~ opening a line of the script (in the answer it is just text).
    assume(in_script or fence != "~~~")
    part = script if in_script else answer
    part.insert(min(where, len(part)), fence)
    raw = "\n".join([*script, DELIMITER, *answer, "Done."])
    result = parse_script_reply(raw)
    assert isinstance(result, ContractViolation)
    assert result.reason == CODE_FENCE


@given(st.text())
def test_a_valid_result_keeps_the_contract(raw: str) -> None:
    result = parse_script_reply(raw)
    if isinstance(result, ScriptReply):
        assert raw.count(DELIMITER) == 1
        assert result.answer and result.answer == result.answer.strip()
        assert DELIMITER not in result.script and DELIMITER not in result.answer
        assert "```" not in result.script and "```" not in result.answer
        assert result.script == result.script.rstrip()
