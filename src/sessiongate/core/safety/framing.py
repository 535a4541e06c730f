"""How a request is framed: a request for the act ("can you ..."), an informational
question ("what", "why", "is it"), a request for instructions ("how do I ...") or a
protective framing ("protect", "prevent", "is it safe"). The harm points and the verdict read it."""

from __future__ import annotations

from dataclasses import dataclass

from sessiongate.core.safety.text import compiled, words

_HOWTO = (
    r"(?:how (?:do|can|could|would|should|might|may) (?:i|we|you|one|someone|somebody|"
    r"people|u)|how to|tell me how|show me how|teach me|walk me through|step[- ]by[- ]step|"
    r"instructions (?:for|to|on)|(?:give|send) me (?:the |detailed |some )?"
    r"(?:instructions|steps)|steps to|guide to|what's the (?:best|easiest|fastest|"
    r"quickest|simplest|cheapest|most effective) way to|ways to|tutorial|"
    r"what (?:do|would|should|could|will) (?:i|we) need to|"
    r"what (?:can|could|should) (?:i|we) (?:use|buy|mix|get)|"
    r"where (?:can|could|do|should) (?:i|we) (?:buy|get|find|order))"
)

_HOWTO_RE = compiled(_HOWTO)
_PROTECTIVE_RE = compiled(
    words(
        r"protect(?:s|ing)?",
        r"prevent(?:s|ing)?",
        r"avoid(?:s|ing)?(?! detection| getting caught| being (?:caught|seen|traced))",
        r"defend(?:s|ing)?|defen[cs]e",
        r"(?<!avoid )(?<!avoiding )(?<!evade )(?<!evading )detect(?:s|ing|ion)?",
        r"spot(?:ting)?",
        r"recogni[sz]e",
        r"report",
        r"warning signs",
        r"support",
        r"hotline",
        r"helpline",
        r"is it (?:safe|bad|dangerous|illegal|legal|risky)",
        r"safest",
        r"safely",
        r"stay safe",
        r"get rid of (?:a |the |this )?(?:virus|malware|spyware|keylogger)",
        r"(?:remove|clean) (?:a |the |this )?(?:virus|malware|spyware|keylogger)",
        r"tell if",
        r"know if",
        r"would i know",
        r"flag(?:s|ged)?",
        r"stop (?:\S+ ){0,3}from",
        r"were stolen|was stolen|got hacked|been hacked",
    )
)

# A request opener: "can you open notepad" asks for the act, not whether it is possible.
_REQUEST_RE = compiled(
    r"^(?:(?:hey|hi|ok|okay|so|theo|please)\b[\s,!.]*)*(?:can|could|would|will) (?:you|u)\b"
)
_INFO_QUESTION_RE = compiled(
    r"^(?:(?:hey|hi|ok|okay|so|um|well|theo)\b[\s,!.]*)*(?:"
    r"what|what's|whats|what're|why|who|who's|whose|which|when|where|is|isn't|are|"
    r"aren't|was|were|does|doesn't|did|didn't|do(?! me a favou?r)|should|shall|will|would|has|have|"
    r"how (?:does|did|is|are|was|were|much|many|long|far|come|often|old|big)|"
    r"explain|define|describe|compare|tell me (?:about|something|a)|i wonder|"
    r"i'm curious|i'm wondering)\b"
)


_HOWTO_OPENING_RE = compiled(r"^(?:(?:hey|hi|ok|okay|so|um|well|theo|please)\b[\s,!.]*)*" + _HOWTO)


@dataclass(frozen=True, slots=True)
class Framing:
    #: Opens with "can you", "could you"...: asks for the act.
    request: bool
    #: Opens like a question ("what", "why", "is it", "explain").
    info_question: bool
    #: Asks for instructions somewhere ("how do I", "step by step", "walk me through").
    howto: bool
    #: ...and does so at the opening ("how do I take a screenshot"), not inside a request
    #: ("search for how to fix a tap").
    howto_opening: bool
    protective: bool

    @property
    def question(self) -> bool:
        """Framed as a question or a request for instructions, not for the act itself."""
        return not self.request and (self.info_question or self.howto_opening)


def framing_of(text: str) -> Framing:
    request = _REQUEST_RE.match(text) is not None
    return Framing(
        request=request,
        info_question=not request and _INFO_QUESTION_RE.match(text) is not None,
        howto=_HOWTO_RE.search(text) is not None,
        howto_opening=_HOWTO_OPENING_RE.match(text) is not None,
        protective=_PROTECTIVE_RE.search(text) is not None,
    )
