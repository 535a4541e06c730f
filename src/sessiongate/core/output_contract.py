"""Seed 004's output contract (`output_contract = "script_delimiter"`), the pure part.

The reply model answers with a Python script, one `---DELIMITER---` line, and the answer
to speak (DESIGN.md §8):

    import subprocess
    subprocess.Popen(["notepad.exe"])
    ---DELIMITER---
    Notepad is open.

`parse_script_reply` accepts exactly that shape and names what is wrong otherwise; the
service layer turns a violation into the `output_contract_violation` error and speaks
`FALLBACK_ANSWER` instead.

The rules, and why:

* **Exactly one delimiter in the whole reply.** Any occurrence of the text counts, also
  one inside a script's string literal: a reply holding it twice is ambiguous, and
  guessing which one separates the halves could run half an answer as code.
* **The delimiter stands on its own line** (spaces and tabs around it are allowed). An
  inline `print(1) ---DELIMITER--- Done` is refused: the seed's format puts it between
  the two parts, and a model that runs them together has not followed the format.
* **No code fences anywhere**: no ``` in the reply, and no line of the script opening with
  `~~~`. A fenced script would reach the interpreter as a syntax error, and a fence in the
  answer would be read aloud; both mean the model ignored the format.
* **The script may be empty** (a CHAT reply has nothing to run), and is not compiled here:
  the sandbox or the client reports a syntax error with its real message.
* **The answer must not be empty** once stripped: there must be something to speak.
* The answer is returned stripped of surrounding whitespace. The script loses its
  leading blank lines and its trailing whitespace only, so its first line keeps its
  indentation (an indented first line is the interpreter's error to report, not ours to
  hide). Line endings may be LF or CRLF.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DELIMITER = "---DELIMITER---"

#: Spoken when the reply breaks the contract: short, and true whatever went wrong.
FALLBACK_ANSWER = "Sorry, I could not work that out. Please try again."

# Reasons a reply breaks the contract (ContractViolation.reason).
EMPTY_REPLY = "empty_reply"
NO_DELIMITER = "no_delimiter"
SEVERAL_DELIMITERS = "several_delimiters"
DELIMITER_NOT_ALONE = "delimiter_not_alone"
CODE_FENCE = "code_fence"
EMPTY_ANSWER = "empty_answer"

_DELIMITER_LINE = re.compile(r"^[ \t]*" + re.escape(DELIMITER) + r"[ \t]*\r?$", re.MULTILINE)
_TILDE_FENCE = re.compile(r"^[ \t]*~~~", re.MULTILINE)
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\r?\n)+")


@dataclass(frozen=True, slots=True)
class ScriptReply:
    """A reply that keeps the contract: the script to run (may be empty) and the answer."""

    script: str
    answer: str


@dataclass(frozen=True, slots=True)
class ContractViolation:
    """Why a reply breaks the contract: `reason` is one of the constants above, `message`
    says it in a sentence for the error event and the logs."""

    reason: str
    message: str


def parse_script_reply(raw: str) -> ScriptReply | ContractViolation:
    """Split a reply model's raw text into script and answer (the module docstring gives
    the rules), or say which rule it breaks."""
    if not raw.strip():
        return ContractViolation(EMPTY_REPLY, "the reply is empty")
    count = raw.count(DELIMITER)
    if count == 0:
        return ContractViolation(NO_DELIMITER, f"the reply has no {DELIMITER} line")
    if count > 1:
        return ContractViolation(
            SEVERAL_DELIMITERS, f"the reply has {count} {DELIMITER} markers, not exactly one"
        )
    line = _DELIMITER_LINE.search(raw)
    if line is None:
        return ContractViolation(
            DELIMITER_NOT_ALONE, f"{DELIMITER} must stand on a line of its own"
        )
    if "```" in raw:
        return ContractViolation(CODE_FENCE, "the reply contains a ``` code fence")
    script = _LEADING_BLANK_LINES.sub("", raw[: line.start()]).rstrip()
    answer = raw[line.end() :].strip()
    if _TILDE_FENCE.search(script):
        return ContractViolation(CODE_FENCE, "the script contains a ~~~ code fence")
    if not answer:
        return ContractViolation(EMPTY_ANSWER, f"nothing to speak below {DELIMITER}")
    return ScriptReply(script=script, answer=answer)


SCRIPT_CONTRACT_PROMPT = f"""\
Reply in exactly this format, with nothing before or after it:

<a complete Python 3 script that performs the request on the user's computer>
{DELIMITER}
<what to say to the user, in plain spoken sentences>

Rules:
- Write {DELIMITER} exactly once, alone on its own line, between the script and the \
answer. Never write it anywhere else, not even inside the script.
- The script is plain Python source: no Markdown, no ``` or ~~~ code fences, no \
explanations around it. It must run on its own (import what it uses).
- If the request needs no action (a question or conversation), leave the script part \
empty: start the reply with the {DELIMITER} line.
- The answer below the delimiter is read aloud: short, friendly, no Markdown, no code, \
and never empty. Say what you did or answer the question.\
"""
