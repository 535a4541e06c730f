"""How long a regular expression may take, judged from its structure before it runs. Pure.

Tool schemas come from MCP servers, and a schema's `pattern` is a regular expression the
gateway would run on the model's arguments. Python's `re` backtracks: `^(a+)+$` takes
seconds on 26 characters and doubles with each one more, and it holds the GIL while it
runs, so neither a worker thread nor a timeout can cut it short. So a pattern's worst
case is bounded from its parse tree first:

- a variable repetition of something that can itself match in more than one way (a
  nested repetition `(a+)+`, an alternation `(a|ab)*`) is exponential, and so can be a
  back-reference: such a pattern is never run;
- otherwise the worst case is about `c * n**d` steps on an `n`-character string, where
  `d` counts the open repetitions (`+`, `*`, `{2,}`, wide ranges) and one more when the
  pattern is not anchored at the start (`re.search` tries every start), and `c` is the
  product of the small choices (`?`, `{1,3}`, alternations). The pattern is run only on
  strings short enough to keep that under `STEP_BUDGET` (a few milliseconds).

The judgement is conservative: some patterns it refuses are harmless (`^[a-z]+(\\.[a-z]+)*$`).
A refused pattern is only left unchecked by the gateway; the tool still judges its input.
"""

from __future__ import annotations

import re
import sys
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

with warnings.catch_warnings():
    # The public names of `re`'s parser (re._parser has no type information); deprecated
    # as modules, not as what they hold.
    warnings.simplefilter("ignore", DeprecationWarning)
    import sre_constants
    import sre_parse

#: The most backtracking steps one pattern may take on one string (about 10 ms).
STEP_BUDGET = 2_000_000
#: A repetition whose range is wider than this counts as open (`n` choices, not a constant).
OPEN_SPAN = 64
#: Longer patterns are not judged (nor run): no schema needs one this long.
MAX_PATTERN_CHARS = 1000
#: What `max_subject` is for a pattern whose cost does not grow with the string.
UNLIMITED = sys.maxsize

_VARIABLE_REPEATS = {
    sre_constants.MAX_REPEAT,
    sre_constants.MIN_REPEAT,
    sre_constants.POSSESSIVE_REPEAT,
}
_BACK_REFERENCES = {sre_constants.GROUPREF, sre_constants.GROUPREF_EXISTS}
_ANCHORS = {sre_constants.AT_BEGINNING, sre_constants.AT_BEGINNING_STRING}


@dataclass(frozen=True, slots=True)
class PatternLimit:
    #: The longest string the pattern may be run on (0: never run).
    max_subject: int
    #: Why it is never run; None when it may be.
    refused: str | None = None


class _Unbounded(Exception):
    """The pattern's worst case grows exponentially; `str()` says why."""


@lru_cache(maxsize=1024)
def pattern_limit(pattern: str) -> PatternLimit:
    """How long a string `pattern` may be run on (`re.search`) in bounded time."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return PatternLimit(0, f"it is longer than {MAX_PATTERN_CHARS} characters")
    try:
        re.compile(pattern)
        parsed = sre_parse.parse(pattern)
        constant, degree = _cost(parsed)
    except re.error as exc:
        return PatternLimit(0, f"Python cannot compile it ({exc})")
    except RecursionError:
        return PatternLimit(0, "it is nested too deeply")
    except _Unbounded as exc:
        return PatternLimit(0, f"it can backtrack exponentially ({exc})")
    if not _anchored(parsed):
        degree += 1
    if constant > STEP_BUDGET:
        return PatternLimit(0, "it can match in too many ways")
    if degree == 0:
        return PatternLimit(UNLIMITED)
    return PatternLimit(int((STEP_BUDGET / constant) ** (1 / degree)))


def _anchored(parsed: sre_parse.SubPattern) -> bool:
    """Whether `re.search` can only match at the start (`^` or `\\A` first, no (?m))."""
    items = parsed.data
    if not items or parsed.state.flags & sre_constants.SRE_FLAG_MULTILINE:
        return False
    op, argument = items[0]
    anchor: Any = argument
    return op is sre_constants.AT and anchor in _ANCHORS


def _cost(items: Any) -> tuple[float, int]:
    """`(c, d)`: the sequence can match a given text in at most about `c * n**d` ways."""
    constant, degree = 1.0, 0
    for op, argument in items:
        if op in _VARIABLE_REPEATS:
            low, high, body = argument
            body_constant, body_degree = _cost(body)
            ambiguous = body_constant > 1 or body_degree > 0
            if low == high:  # a fixed count: the body's choices, that many times over
                if ambiguous:
                    constant *= body_constant**low
                    degree += body_degree * low
            elif ambiguous:
                raise _Unbounded("a repetition of something that matches in several ways")
            elif high == sre_constants.MAXREPEAT or high - low > OPEN_SPAN:
                degree += 1
            else:
                constant *= high - low + 1
        elif op in _BACK_REFERENCES:
            raise _Unbounded("a back-reference")
        elif op is sre_constants.BRANCH:
            branches = [_cost(branch) for branch in argument[1]]
            constant *= sum(c for c, _ in branches)
            degree += max(d for _, d in branches)
        elif op is sre_constants.SUBPATTERN:
            inner_constant, inner_degree = _cost(argument[3])
            constant *= inner_constant
            degree += inner_degree
        elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
            inner_constant, inner_degree = _cost(argument[1])
            constant *= inner_constant
            degree += inner_degree
        elif op is sre_constants.ATOMIC_GROUP:
            inner_constant, inner_degree = _cost(argument)
            constant *= inner_constant
            degree += inner_degree
        if constant > STEP_BUDGET or degree > 16:
            raise _Unbounded("too many repetitions")
    return constant, degree
