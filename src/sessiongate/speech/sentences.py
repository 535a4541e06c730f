"""A reply as something to say: Markdown taken off, cut into sentences.

Replies are spoken sentence by sentence, so the first sentence's audio is ready long
before a whole reply is synthesised (bench/speech.py measures by how much), and no engine
is ever handed more than `MAX_PIECE_CHARS` at once. Pure functions: no I/O.
"""

from __future__ import annotations

import re

#: The longest piece one engine call gets; a longer sentence is cut at a comma, a
#: semicolon or a space.
MAX_PIECE_CHARS = 400
#: Sentences shorter than this ride with the next one ("Sure. …"): every engine call has
#: a fixed cost.
MIN_PIECE_CHARS = 24

_FENCED_CODE = re.compile(r"^ {0,3}(```|~~~).*?(^ {0,3}\1[^\n]*$|\Z)", re.M | re.S)
# Every repetition that can fail late is bounded, so no reply makes these quadratic.
_IMAGE = re.compile(r"!\[([^\[\]\n]{0,300})\]\([^()\s]{0,2000}\)")
_LINK = re.compile(r"\[([^\[\]\n]{1,300})\]\([^()\s]{0,2000}\)")
_URL = re.compile(r"<?\bhttps?://[^\s>)\]]+>?")
_INLINE_CODE = re.compile(r"`{1,3}([^`]{0,1000})`{1,3}")
_HTML_TAG = re.compile(r"</?[A-Za-z][^>\n]{0,200}>")
# Line patterns match blanks, never `\s`: one that could run over line ends would try
# every following line from every line start.
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+", re.M)
_BULLET = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+", re.M)
_QUOTE = re.compile(r"^[ \t]*>[ \t]?", re.M)
_RULE = re.compile(r"^[ \t]*([-*_])([ \t]*\1){2,}[ \t]*$", re.M)
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~)(?=\S)([^\n]{1,200}?)(?<=\S)\1")
_TABLE_PIPES = re.compile(r"[ \t]*\|[ \t]*")
_SPACES = re.compile(r"[ \t\f\v]+")

#: Full stops (and the CJK ones), and what may close a sentence after them.
_STOPS = ".!?\u2026\u3002\uff01\uff1f"
_CLOSERS = "\"'\u201d\u2019)\\]"
#: A sentence ends at a full stop, closing quotes or brackets after it, then white space;
#: or at a line break (a list item, a paragraph).
_BOUNDARY = re.compile(f"(?<=[{_STOPS}])[{_CLOSERS}]*\\s+|\\n+")
_ENDINGS = frozenset(_STOPS + ":;,\"')]\u201d\u2019")
#: Words whose full stop does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf no fig approx dept est inc ltd co".split()
)


def speakable(text: str) -> str:
    """The words of a Markdown reply: no code blocks, no URLs, no markup characters."""
    text = _FENCED_CODE.sub("\n", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _HTML_TAG.sub("", text)
    text = _RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _BULLET.sub("", text)
    text = _QUOTE.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = "\n".join(
        _TABLE_PIPES.sub(", ", line.strip("| \t")) if line.count("|") >= 2 else line
        for line in text.splitlines()
    )
    text = "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in text)
    lines = (_SPACES.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def split_sentences(text: str, max_chars: int = MAX_PIECE_CHARS) -> list[str]:
    """The pieces to synthesise one by one, in order: sentences, short ones joined to the
    next, long ones cut to `max_chars`. The first piece is kept short on purpose: it is
    the time to first audio."""
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        candidate = text[start : match.start()]
        if (
            candidate.endswith(".")
            and "\n" not in match.group()
            and _ends_in_abbreviation(candidate)
        ):
            continue  # "Dr. Smith": not a boundary
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    sentences.append(text[start:].strip())
    pieces: list[str] = []
    pending = ""
    for sentence in (s for s in sentences if s):
        if sentence[-1] not in _ENDINGS:
            sentence += "."  # a heading or list item: a pause before what follows
        pending = f"{pending} {sentence}" if pending else sentence
        if len(pending) >= MIN_PIECE_CHARS:
            pieces.extend(_cut(pending, max_chars))
            pending = ""
    if pending:
        if pieces and len(pieces[-1]) + len(pending) < max_chars:
            pieces[-1] = f"{pieces[-1]} {pending}"
        else:
            pieces.extend(_cut(pending, max_chars))
    return pieces


def _ends_in_abbreviation(candidate: str) -> bool:
    words = candidate.rsplit(None, 1)
    if not words:
        return False
    word = words[-1].rstrip(".").lower()
    # A single letter is an initial ("J. R. R. Tolkien").
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def _cut(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    while len(sentence) > max_chars:
        window = sentence[:max_chars]
        cut = max(window.rfind(", "), window.rfind("; "), window.rfind(": "))
        if cut < max_chars // 3:
            cut = window.rfind(" ")
        if cut < max_chars // 3:
            cut = max_chars - 1  # one long word: cut it
        pieces.append(sentence[: cut + 1].strip())
        sentence = sentence[cut + 1 :].strip()
    if sentence:
        pieces.append(sentence)
    return pieces


def prepare(reply: str, max_chars: int) -> str:
    """What of a reply is spoken: its words (`speakable`), at most `max_chars` of them
    (`cap_text`). The raw text is cut first, so a huge reply costs no more than a long
    one."""
    return cap_text(speakable(reply[: max_chars * 4 + 1000]), max_chars)


def cap_text(text: str, max_chars: int) -> str:
    """At most `max_chars`, cut after the last sentence that fits (else at a space)."""
    if len(text) <= max_chars:
        return text
    window = text[:max_chars]
    ends = [m.start() for m in _BOUNDARY.finditer(window)]
    cut = ends[-1] if ends and ends[-1] > max_chars // 2 else window.rfind(" ")
    return window[: cut if cut > 0 else max_chars].rstrip()
