"""Notes, the pure part: what a note may hold, how it is cut into chunks, which words a
search looks for, and how keyword and semantic rankings are fused. No I/O here.

Chunks follow paragraphs (a blank line ends one) and are packed up to about
`chunk_chars`: a chunk is what a search returns and what is embedded, so it should be a
passage a reader can use on its own, not a window cut mid-sentence. Only a paragraph longer
than a whole chunk is split, at a line break, then a sentence end, then a space.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from sessiongate.core.ids import is_session_id
from sessiongate.errors import ContentTooLarge, InvalidContent, InvalidInput

#: A title is one line a person would read in a list.
MAX_TITLE_CHARS = 200
#: A source names where a note came from (a relative path, a URL): one line.
MAX_SOURCE_CHARS = 1000
#: The longest query accepted. Only its first MAX_QUERY_WORDS words reach the keyword
#: index, but the whole text is embedded for semantic ranking.
MAX_QUERY_CHARS = 10_000
#: More words than this add nothing to a keyword ranking and only cost the index.
MAX_QUERY_WORDS = 32
#: A longer "word" is not one (a pasted hash, base64): it is left out of the keyword query,
#: where PostgreSQL would refuse it (its words are at most 2 KB).
MAX_WORD_CHARS = 64
#: Results a search may return, and notes a listing page may hold.
MAX_LIMIT = 50
MAX_PAGE = 100

#: Reciprocal rank fusion's constant (Cormack, Clarke and Büttcher, SIGIR 2009): a result
#: at rank r of a list adds 1 / (RRF_K + r). 60 is the paper's value, and the one most
#: hybrid-search engines ship; it keeps one list's top hit from outweighing agreement.
RRF_K = 60

#: Embedding vectors: one float32 row per text.
Vectors = npt.NDArray[np.float32]

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
# Tab, line feed and carriage return are text; every other C0 control, DEL and the C1
# controls are not (a terminal or a log would act on them).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_LINE_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class InvalidNoteId(InvalidInput):
    code = "invalid_note_id"


class NoteTooLarge(ContentTooLarge):
    code = "note_too_large"


def _unicode(value: str, what: str, code: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        message = f"{what} is not valid Unicode text (lone surrogate)"
        raise InvalidInput(message, code=code) from None


def validate_note_content(content: object, max_chars: int) -> str:
    """The note's text, unchanged; a typed 4xx error for anything a store should not keep."""
    if not isinstance(content, str):
        raise InvalidContent("content must be a string")
    if not content.strip():
        raise InvalidContent("content must not be empty")
    if len(content) > max_chars:
        raise NoteTooLarge(
            f"the note is {len(content)} characters; notes.max_note_chars is {max_chars}"
        )
    _unicode(content, "content", "invalid_content")
    if _CONTROL.search(content):
        raise InvalidContent("content must not contain NUL or other control characters")
    return content


def _one_line(value: object, what: str, max_chars: int, code: str) -> str | None:
    """An optional one-line label: None or blank is None; surrounding spaces go."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string", code=code)
    value = value.strip()
    if not value:
        return None
    if len(value) > max_chars:
        raise InvalidInput(f"{what} is longer than {max_chars} characters", code=code)
    _unicode(value, what, code)
    if _LINE_CONTROL.search(value):
        raise InvalidInput(f"{what} must be one line without control characters", code=code)
    return value


def validate_title(title: object) -> str | None:
    return _one_line(title, "title", MAX_TITLE_CHARS, "invalid_title")


def validate_source(source: object) -> str | None:
    return _one_line(source, "source", MAX_SOURCE_CHARS, "invalid_source")


def validate_note_id(note_id: object) -> str:
    if not isinstance(note_id, str) or not is_session_id(note_id):
        raise InvalidNoteId("a note id is a lower-case UUID as the gateway issues it")
    return note_id


def validate_limit(limit: object, maximum: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidInput(
            f"limit must be a whole number from 1 to {maximum}", code="invalid_limit"
        )
    return limit


def validate_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string", code="invalid_query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(
            f"query is longer than {MAX_QUERY_CHARS} characters", code="invalid_query"
        )
    _unicode(query, "query", "invalid_query")
    if "\x00" in query:
        raise InvalidInput("query must not contain NUL characters", code="invalid_query")
    return query


def search_words(query: str) -> list[str]:
    """The query's words (runs of letters and digits), lower-cased and without repeats, at
    most MAX_QUERY_WORDS. Only these reach a full-text engine, each as a quoted phrase or a
    plain term, so no query text can be read as the engine's syntax (NEAR, *, quotes,
    parentheses, column filters)."""
    seen: dict[str, None] = {}
    for match in _WORD_RE.finditer(query):
        word = match.group(0).lower()
        if len(word) <= MAX_WORD_CHARS:
            seen.setdefault(word, None)
            if len(seen) == MAX_QUERY_WORDS:
                break
    return list(seen)


def chunk_text(content: str, chunk_chars: int) -> list[str]:
    """`content` cut on paragraphs into chunks of at most `chunk_chars` characters (a
    paragraph is never split unless it alone is longer). Whitespace-only pieces vanish;
    the chunks in order hold every word of the note."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(content.replace("\r\n", "\n")):
        paragraph = paragraph.strip()
        if paragraph:
            pieces.extend(_split_long(paragraph, chunk_chars))
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > chunk_chars:
            chunks.append(current)
            current = piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


# Where a long paragraph may be cut, best first: after a line, after a sentence, at a space.
_CUTS = (re.compile(r"\n"), re.compile(r"(?<=[.!?;:])\s"), re.compile(r"\s"))


def _split_long(text: str, limit: int) -> Iterable[str]:
    while len(text) > limit:
        cut = 0
        for pattern in _CUTS:
            # The last boundary inside the limit, but not so early that the piece is tiny.
            found = [m.start() for m in pattern.finditer(text, 0, limit + 1)]
            found = [at for at in found if at >= limit // 2]
            if found:
                cut = found[-1]
                break
        if cut == 0:
            cut = limit  # one unbroken run (a URL, a hash): cut it hard
        head, text = text[:cut].strip(), text[cut:].strip()
        if head:
            yield head
    if text:
        yield text


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], k: int = RRF_K
) -> list[tuple[int, float]]:
    """Chunk ids from several best-first rankings, fused: each id scores the sum of
    1 / (k + rank) over the lists it is in (rank from 1). Best first; ties by id, so the
    order is the same on every store."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, start=1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def markdown_title(text: str) -> str | None:
    """The first ATX heading (`# Title`, any level) of a Markdown text, if any."""
    in_fence = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match and match.group(1).strip():
            return match.group(1).strip()[:MAX_TITLE_CHARS]
    return None


@dataclass(frozen=True, slots=True)
class Note:
    note_id: str
    owner: str
    title: str | None
    #: Where the note came from (a file's relative path on import); None when unsaid.
    source: str | None
    content: str
    created_at: datetime
