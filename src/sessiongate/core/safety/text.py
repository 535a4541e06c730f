"""The keyword rules' text handling: normalisation (casefolded, curly quotes and dashes
straightened, whitespace collapsed) and the helpers their patterns are built with
(whole-word alternations, gaps of a few words)."""

from __future__ import annotations

import re

# -- normalisation -------------------------------------------------------------------------

_STRAIGHTEN = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _SPACES.sub(" ", text.translate(_STRAIGHTEN).casefold()).strip()


def words(*alternatives: str) -> str:
    """A non-capturing alternation, whole words only (a space in a phrase matches any run of
    whitespace; the texts are normalised to single spaces anyway)."""
    body = "|".join(alternatives)
    return rf"(?<![\w-])(?:{body})(?![\w-])"


def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


#: Up to `n` words between two parts of a phrase ("delete *all the old* backups").
def gap(n: int) -> str:
    return rf"(?:\s+\S+){{0,{n}}}\s+"
