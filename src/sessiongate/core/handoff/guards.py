"""Stage 1 of the hand-off, its second look: whether a built-in pattern's match sits in
words that cannot be a promise to act now.

Seed 000's patterns and the structure (`structure.py`) look for "a picture word
with a commitment near it" and the like; the replies that fool them (the hard negatives
of `tests/data/handoff_ordinary.jsonl`) say the same words in a frame that takes the
promise back: a refusal ("I can't generate images"), a condition or a wish that does not
hold ("If I could browse, I'd …", "I'd love to animate it, but I can't"), the past ("I
made an image last week"), advice ("you can create an image with …"), a question
("would you like me to make a picture?"), a picture in words ("let me paint you a
picture with words"), a gerund as the subject of a general remark ("creating an image
from scratch takes hours") or a compound noun ("a picture frame"). A guarded match is
skipped and the next one is tried, so a refusal and a promise in one reply still match.

Every guard runs only on a match, never on the whole reply, so a reply that no pattern
matches costs nothing more; a guarded reply never reaches the control model, so a guard
must hold for every wording it covers (each guard's words were found on the corpora and
on hard negatives of the structure's own revision, see docs/benchmarks.md). The text is
the lowered reply the patterns ran on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Words:
    """A guard's regular expression, and the plain words one of which it needs: most
    sentences hold none of them, and `in` is far cheaper than a search (the same gate as
    stage 1's cues)."""

    cues: tuple[str, ...]
    pattern: re.Pattern[str]

    def found(self, text: str) -> bool:
        return any(cue in text for cue in self.cues) and self.pattern.search(text) is not None


#: What ends a sentence, and what ends a clause inside one ("—" and " - " are dashes).
#: (A point after a lone letter is an abbreviation's: "2 a.m. is late".)
_SENTENCE_END = r"(?:(?<!\b[a-z])\.|[!?\n])"
_CLAUSE_END = r"(?:(?<!\b[a-z])\.|[!?\n,;:()\u2014]| - )"
#: (Up to the last end before a position: the greedy `.*` backs off from it in C, far
#: faster than finding each mark from Python.)
_SENTENCE = (re.compile(rf".*{_SENTENCE_END}", re.DOTALL), re.compile(_SENTENCE_END))
_CLAUSE = (re.compile(rf".*{_CLAUSE_END}", re.DOTALL), re.compile(_CLAUSE_END))

#: Words in the clause before the match (or in it) that take the act back (a refusal,
#: an impossibility, a wish), or hand it to the user (advice) or back to them (a question).
_BEFORE = _Words(
    ("n't", "not", "never", "unable", "ability", "could", "if i", "me to", "should i",
     "shall i", "how", "you", "no way", "learn"),
    re.compile(
        r"\b(?:can't(?! wait)|cannot|can not|couldn't|unable to|not able to|won't|will not"
        r"|wouldn't|don't(?! worry)|do not|doesn't|never|not going to|not allowed to"
        r"|no way to|the ability to|wish i could|if i could|if i were|would you like me to"
        r"|want me to|should i|shall i|how about i|you can|you could|you should|you might"
        r"|you need to|you'll need to|if you want to|if you'd like to|if you wanna|how to"
        r"|how you|learn(?:ing|ed|t)? (?:how )?to|you (?:wanted|want|wish(?:ed)?) to)\b"
    ),
)  # fmt: skip

#: Words anywhere in the sentence that place the picture in words or in the mind, or
#: hand the making to the user.
_IN_WORDS = _Words(
    ("words", "in my", "in mind", "of how", "here", "yourself", "mental", "someone", "describe"),
    re.compile(
        r"\b(?:in words|with words|in my (?:head|mind)|in mind|of how|here(?:'s| is) what"
        r"|if someone|yourself|mental (?:image|picture)|(?:me|you) to describe)\b"
    ),
)

#: A time in the past, anywhere in the sentence …
_PAST_TIME = _Words(
    ("yesterday", "last ", "earlier", "ago", "other day", "remember", "used to"),
    re.compile(
        r"\b(?:yesterday|last (?:week|month|year|night|time)|earlier|ago|the other day"
        r"|remember\?|, remember|used to)\b"
    ),
)
#: … speaks of something done then only when the match's own verb is past ("I made an
#: image last week"), not when the promise is about the past ("look up who won last
#: night").
_PAST_VERB = re.compile(
    r"\b(?:made|drew|drawn|did|ran|took|sent|found|searched|looked|googled|browsed"
    r"|generated|created|painted|rendered|sketched|designed|filmed|recorded|produced)\b"
)

#: "Let me paint you a picture: …" — the idiom, its picture made of the words after it.
_WORD_PICTURE = _Words(
    ("paint",),
    re.compile(
        r"\bpaint(?:ing)?\s+(?:(?:you|me|us|him|her|them)\s+)?(?:a|the)\s+(?:\w+\s+)?"
        r"(?:picture|scene|image)\b[^.!?\n]{0,20}:"
    ),
)

#: A sentence that opens on a condition that does not hold ("If I could browse, I'd
#: check …").
_HYPOTHETICAL = re.compile(r"\W*(?:if i (?:could|were|was|had|did)|if only|were i)\b")

#: A wish taken back later in the sentence: "I'd love to animate it, but I can't".
_WISH = re.compile(r"\bi(?:'d| would) (?:love|like|happily|gladly|be (?:happy|glad))\b")
_BUT_NOT = _Words(
    ("but",),
    re.compile(
        r"\bbut\b[^.!?\n]*?\b(?:i can't(?! (?:wait|promise|guarantee))|i cannot|i can not"
        r"|i'm not able|i am not able|i'm unable|i am unable|i don't|i won't|i'm not allowed"
        r"|(?:isn't|not) something i)"
    ),
)

#: A sentence that asks the user to imagine.
_IMAGINE = re.compile(r"\W*(?:imagine|picture (?:this|yourself|it|us|me|the)|close your eyes)\b")

#: A clause that opens with a gerund followed by a finite verb: the gerund is a topic
#: ("searching for a job is exhausting"), not the assistant's action.
_GERUND_SUBJECT = re.compile(
    # (a verb right after another subject is not the gerund's: "animating the planets so
    # you can see")
    r"\W*\w+ing\b[^,;:]*?(?<!\bi )(?<!you )(?<!we )(?<!they )(?<!he )(?<!she )"
    r"\b(?:is|isn't|are|aren't|was|wasn't|were|takes|took|can|could|would|might|may|requires"
    r"|needs|slows|helps|brings|gets|means|makes|looks|feels|seems"
    r"|becomes|gives|lets|costs|works|sounds|saves|beats|matters|tends|depends)\b"
)

#: A picture or video noun that is the first half of a compound ("picture frame"), or a
#: verb matched as the stem of its participle ("an animate|d film").
_COMPOUND = re.compile(
    r"d\b|-?\s*(?:generators?|generation|search(?:es)?|editing|editors?|games?|calls?"
    r"|channels?|prompts?|frames?|quality|format|essays?|resolution|files?|ideas?|credits?"
    r"|shoots?)\b"
)


def _bounds(
    text: str, start: int, end: int, ends: tuple[re.Pattern[str], re.Pattern[str]]
) -> tuple[int, int]:
    """Where the sentence (or clause) holding `text[start:end]` begins and ends."""
    before, after = ends[0].match(text, 0, start), ends[1].search(text, end)
    return (before.end() if before else 0), (after.end() if after else len(text))


def guarded(text: str, start: int, end: int) -> bool:
    """Whether the match `text[start:end]` (lowered) is framed as no promise to act now."""
    # Some patterns begin with the punctuation before the words they match: the clause
    # is the one those words are in.
    while start < end and not text[start].isalnum():
        start += 1
    clause_begin, clause_end = _bounds(text, start, end, _CLAUSE)
    # The match itself may hold the refusal: "i'm unable to create videos" matches from
    # "i'm".
    if _BEFORE.found(text[clause_begin:end]):
        return True
    if _GERUND_SUBJECT.match(text, clause_begin, clause_end) or _COMPOUND.match(text, end):
        return True
    # A match may begin a clause earlier ("honestly, drawing is a skill"): the clause
    # its last word is in speaks too.
    last_begin, last_end = _bounds(text, end - 1, end, _CLAUSE)
    if last_begin > clause_begin and _GERUND_SUBJECT.match(text, last_begin, last_end):
        return True
    sentence_begin, sentence_end = _bounds(text, start, end, _SENTENCE)
    sentence = text[sentence_begin:sentence_end]
    return (
        sentence.rstrip().endswith("?")
        or _IN_WORDS.found(sentence)
        or _WORD_PICTURE.found(sentence)
        or _IMAGINE.match(sentence) is not None
        or _HYPOTHETICAL.match(sentence) is not None
        or (
            _BUT_NOT.found(text[end:sentence_end])
            and _WISH.search(text, sentence_begin, start) is not None
        )
        or (_PAST_TIME.found(sentence) and _PAST_VERB.search(text, start, end) is not None)
    )
