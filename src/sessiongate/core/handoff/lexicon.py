"""Stage 1 of the hand-off, by structure: a promise is an intent's word (any picture, any
moving picture, any looking-up-online word) with a commitment near it — a first-person
now-or-soon frame in the same sentence ("let me …", "I'm sketching …", "Rendering …"),
one just after it ("…, coming right up", "…, let me get that made") or in the sentence
next to it ("On it! A quick render of …").

The word classes are broad on purpose (a new batch of replies brings nouns and verbs no
list had) and the frames are few: the classes find the topic, the frames find the
commitment, and `handoff_guards.guarded` takes back what is framed as no promise. What
a class word must not be is said where it is matched (a lookahead), so a pattern keeps
looking for the next word instead of being dropped whole: "a photo-realistic image"
is the image, not the photo; "draw your attention" is no drawing; "the photo you sent"
is the user's.

Everything here is a regular-expression fragment for the lowered reply;
`structure.py` runs them (built in, so an operator's `replace_patterns` drops them
with seed 000's patterns).
"""

from __future__ import annotations

from sessiongate.core.handoff.intents import Intent


def any_of(words: tuple[str, ...]) -> str:
    """One alternation of `words` (regular expressions), those that begin with a plain
    letter grouped by it: Python's `re` tries every branch at every position, and a
    branch that starts with the wrong letter fails at once, so 20 groups cost about a
    third of 70 words."""
    by_letter: dict[str, list[str]] = {}
    others: list[str] = []
    for word in words:
        first, rest = word[:1], word[1:]
        if first.isalpha() and first.islower() and rest[:1] not in ("?", "*", "+", "{", ""):
            by_letter.setdefault(first, []).append(rest)
        else:
            others.append(word)
    grouped = [
        letter + (rests[0] if len(rests) == 1 else "(?:" + "|".join(rests) + ")")
        for letter, rests in by_letter.items()
    ]
    return "(?:" + "|".join(grouped + others) + ")"


#: What a picture, video or search word must not be followed by: half of a compound
#: ("picture frame", "video games", "photo-realistic"), or something the user made or
#: sent ("the photo you sent", "the picture you painted of your boss").
_NOT_COMPOUND = (
    r"(?!-(?!up\b)|\s+(?:generators?|generation|editing|editors?|games?|calls?|channels?"
    r"|prompts?|frames?|quality|format|essays?|resolution|files?|ideas?|credits?|shoots?"
    r"|letters?|settings?|history|results?|engines?|bar|box|party|warrant|terms?"
    r"|perfect|evidence|sharing|apps?|tools?|feature)\b)"
)
_NOT_THEIRS = (
    r"(?!\s+(?:that\s+|which\s+)?(?:you|you've|you'd|u|he|she|they|we)\s+(?:\w+\s+)?"
    r"(?:sen[dt]|share|t[ao]ok|post|upload|attach|mention|describ|show|paint|dr[ae]w|ma[dk]e"
    r"|f(?:i|ou)nd|link|saw|see|watch|lik|lov)\w*\b)"
)
_NOUN_END = r"(?:e?s)?\b" + _NOT_COMPOUND + _NOT_THEIRS

#: What the making of a picture is not followed by: a hobby or its gear ("a drawing
#: class", "the drawing board").
_NOT_HOBBY = (
    r"(?!\s+(?:course|class(?:es)?|lessons?|skills?|tablet|board|room|pins?|software|apps?"
    r"|tips|techniques?|styles?|supplies|kit|set|classes|booth|album)\b)"
)

#: Any picture: what is made, drawn or shown.
IMAGE_NOUNS = (
    # (not the verb: "I'll try to picture it")
    "image", r"(?<!to )(?<!can )(?<!could )(?<!\bi )picture", "pic", "photo", "photograph",
    "snapshot", "illustration", "portrait", "self-portrait", "artwork",
    r"(?<=[ -])art(?!\s+of\b)", "logo", "poster", "wallpaper", "comic", "visual",
    "visuali[sz]ation", "selfie", "cartoon", "avatar", "banner", "mock[- ]?up", "diagram",
    r"chart(?!\s+(?:a|the|your|our)\s+(?:course|path)\b)", "flowchart", "infographic",
    r"map(?!\s+out\b)", "meme", "sticker", "thumbnail", "invitation",
    "flyer", "icon", "graphic", "collage", "watercolou?r", "headshot", "caricature",
    "mood ?board", "card", r"cover(?=\s+(?:for|of|art|image|photo|design)\b|\s*[.,!?]|\s*$)",
    "emblem", "crest", "mascot", "mural", "blueprint",
    "floor ?plan", "wireframe", "emoji", "sprite", "tattoo", "storyboard", "likeness",
    "depiction", "sketchnote", "silhouette",
    # (the noun: "let me design a meal plan" is no picture)
    r"(?<!me )(?<!'ll )(?<!will )(?<!to )(?<!can )design(?!\s+(?:of|patterns?|docs?|documents?"
    r"|decisions?|choices?|principles?|review|system|thinking|process|phase|team|school"
    r"|course)\b)",
    "postcard", "canvas", "anime", "chibi", "graph", "colou?ring (?:page|sheet)", "3d model",
    "vision ?board", "brochure", "stencil", "screensaver", "lock ?screen", "still life",
    "(?:land|sea|city|dream|moon|snow|sky)scape",
    "(?:desktop|phone|zoom|virtual|stream) background",
    "vector (?:art|graphic|image)", "clip ?art", "easel", "sketchpad", "crayons?",
    r"pencils?(?!\s+(?:\w+\s+)?in\b)", r"(?:paint)?brush(?:es)?(?!\s+(?:up|off|aside)\b)",
    r"(?<!give it a )(?<!long )(?<!big )(?<!flu )(?<!booster )shot(?!\s+(?:at|in the dark"
    r"|of (?:espresso|whiske?y|tequila|vodka|rum|gin|courage|confidence|adrenaline)))",
)  # fmt: skip
#: Verbs that make a picture by themselves, and the idioms they are not.
IMAGE_VERBS = (
    r"draw(?:s|ings?|n)?\b(?!\s+(?:(?:a|the|your|my|our|some)\s+)?(?:attention|comparisons?|lines?"
    r"|blanks?|conclusions?|curtains|blood|boundar\w*|breath|parallels?|distinctions?"
    r"|inspiration|on|from|upon|near|closer|up|straws?|a crowd|fire|strength|interest"
    r"|criticism|back|out|to a close)\b)" + _NOT_HOBBY + _NOT_THEIRS,
    r"sketch(?:es|ing)?\b(?:\s+out\b)?(?!\s+(?:out\s+)?(?:(?:a|the|an|my|our|your|this"
    r"|that)\s+)?(?:\w+\s+)?"
    r"(?:argument|plan|ideas?|outline|timeline|approach|strategy|structure|steps|thoughts"
    r"|framework|budget|schedule|roadmap|details|scenario|proposal|answer|solution)s?\b)"
    + _NOT_HOBBY
    + _NOT_THEIRS,
    r"paint(?:s|ings?)?\b(?!\s+(?:the town|myself|yourself|over)\b)" + _NOT_HOBBY + _NOT_THEIRS,
    r"illustrat(?:e|es|ing)\b(?!\s+(?:(?:the|my|this|that|your)\s+)?(?:point|idea|concept"
    r"|difference|example|how|what|why|with|by)\b)",
    r"doodl(?:e|es|ing)" + _NOT_HOBBY + _NOT_THEIRS,
    r"depict(?:s|ing)?", r"visuali[sz](?:e|es|ing)",
    r"photograph(?:s|ing)?", r"airbrush\w*", r"photoshop\w*",
    r"generat(?:e|es|ing)\s+(?:it|that|this|one|them)\b",
    r"render(?:s|ings?)?\b(?!\s+(?:(?:it|them|this|that|you|me)\s+)?(?:useless|void|obsolete"
    r"|invalid|a verdict|judge?ments?|services?|assistance|aid|homage|speechless)\b)",
    r"snap(?:ping)?\s+(?:(?:you|a|an|another|some|one)\s+)",
)  # fmt: skip
#: Any moving picture.
VIDEO_NOUNS = (
    "video", "vid", "clip", "animation", "animatic", "gif", "time-?lapse", "footage",
    "trailer", "teaser", "reel", "montage", "movie", "film", "slide ?show", "vlog",
    "cinemagraph", "cinematic", "flipbook", "stop-motion", "slow-?mo(?:tion)?", "b-roll",
    "screencast", "boomerang", "tiktok", "screen recording",
    "animated (?!discussion|debate|conversation|argument)[\\w-]+",
    r"loop(?!\s+(?:you|me|them|him|her|us|in)\b)",
    "moving (?:picture|image|version|scene|clip)", "motion graphic",
)  # fmt: skip
VIDEO_VERBS = (
    r"animat(?:e|es|ing)\b(?!\s+(?:discussion|debate|conversation)\b)",
    r"film(?:s|ing)?\b",
    r"bring(?:s|ing)?\s+(?:[\w'-]+\s+){1,5}?to life",
    r"(?:set|put)(?:s|ting)?\s+(?:it|them|this|that)\s+in motion",
)
#: Any looking up online, as a verb or a noun ("a quick lookup", "a web search").
SEARCH_WORDS = (
    # (before "web" and the like: a web search is one word, not a compound)
    *(rf"{first}\s+search(?:es|ing)?\b" for first in ("web", "internet", "online", "google")),
    r"(?<!re)search(?:es|ed|ing)?\b(?!\s+(?:my|your|our|his|her|their)\s+(?:memory|mind"
    r"|feelings|soul|heart)\b)",
    r"googl\w*", r"bing\b", r"brows(?:e|es|ing)\b", r"scour\w*", r"fact-?check\w*",
    r"look(?:s|ing)?\s+(?:(?:it|that|this|them|those|these|things|\w+)\s+)?up\b(?!\s+(?:to|at)\b)",
    r"look-?ups?\b", r"lookup\b", r"research(?:es|ing)?\b",
    r"(?<!be )(?<!been )(?<!was )online\b", r"internet\b", r"on the (?:web|net)\b",
    r"web\b(?!\s+of\b)", r"websites?\b", r"(?:news )?sites\b",
    r"what(?:'s| is) out there\b", r"find (?:that |it |this )?out\b",
    r"what i can (?:find|dig up|turn up|track down|scrounge up)\b",
    r"what (?:people|folks|others|users|reviewers|critics|fans|the internet|the web)"
    r"(?:\s+online)? (?:are|is|have been) (?:saying|posting|writing)\b",
)  # fmt: skip
#: Verbs that look something up only with news, figures or places after them.
_FETCH = (
    r"(?:(?:check|find|dig|hunt|track|pull|fetch|grab|get|round|consult|investigat)\w*|see"
    r"|ask around"
    r"|look(?:ing)? (?:for|around for|into))"
)
_FRESH = (
    r"(?:latest|newest|current|up-to-date|today's|tonight's|this week's|live|recent|news"
    r"|headlines|reviews|ratings|prices?|deals|tickets|listings|hours|showtimes|timetables?"
    r"|forecast|weather|scores?|articles|studies|sources?|reports|wait times|availability"
    r"|exchange rate|cheapest|nearest|closest|best-rated|top-rated|open (?:now|today|tonight)"
    r"|release date|trending|forums|what's new|near (?:you|me|here|your)|who won|lyrics"
    r"|recipes?|traffic|schedules?|addresses|address|phone numbers?|in stock|status"
    r"|(?:opening|closing|train|bus|flight|show|departure|arrival) times)\b"
)
SEARCH_FETCH = rf"{_FETCH}\s+(?:(?:out\s+)?[\w'-]+\s+){{0,4}}?{_FRESH}"

#: Words after a commitment frame that say it is no making: "let me describe the
#: painting", "I'll never forget that photo", "I'm looking at the picture".
_NOT_MAKING = (
    r"(?!(?:describe|explain|tell|talk|think|imagine|picture|write|read|look at|looking at"
    r"|watch|remember|answer|know|be|say|admit|confess|guess|bet|never|not|forget|hear"
    r"|help you|walk you|break (?:it |this |that )?down|clarify|summari[sz]e|suggest"
    r"|recommend|share|leave|keep|see\b(?!\s+(?:what|if|whether|who|when|where|how))"
    r"|let you|wonder|hope|miss|love|like|enjoy|need|want|have (?:a look|to|no)|get back"
    r"|stop|relate|understand|feel|appreciate|agree|recogni[sz]e|believe|wait|take your"
    r"|try to (?:picture|imagine|describe|explain|remember|think))\b)"
)
_NOT_MAKING_ING = (
    r"(?!(?:being|going|drawing a blank|looking (?:at|forward)|thinking|talking|saying"
    r"|telling|describing|explaining|writing|reading|watching|seeing|imagining|picturing"
    r"|wondering|hoping|trying"
    r"|feeling|loving|enjoying|liking|remembering|kidding|joking|missing|guessing|assuming"
    r"|getting|having|dying|speaking|according|regarding|considering|including|following"
    r"|nothing|something|anything|everything|morning|evening|during|thing|king|ring|sing"
    r"|bring|spring|string|wedding|building|ceiling|swing|sibling|darling|warning|meaning"
    r"|feeling|willing|amazing|interesting|boring|exciting|charming|stunning|rooting"
    r"|cheering|praying|waiting|counting|dreaming|obsessing|crying|laughing|smiling|living"
    r"|blushing|freaking|begging|asking|planning|considering)\b)"
)
#: A text that is about a picture, not the picture: "a description of the image".
_TEXT_NOUN = (
    r"(?:description|caption|alt text|breakdown|outline|summary|prompt|ideas?|poem|list"
    r"|plan|script|story|words|explanation|fact|tips?|example|rundown|recap|transcript"
    r"|review|critique|analysis|link|question|thoughts|opinion)s?\b"
)
#: Up to `n` words between a frame and the word, commas allowed; not a text noun ("let
#: me make a list of the pictures"), nor a verb that starts another clause ("hang on, let
#: me think about the picture").
_GAP_STOP = (
    rf"(?:{_TEXT_NOUN}\s+(?:of|for|about|on|under|to go with)\b|(?:describe|explain|tell"
    r"|talk|think|imagine|write|read|watch|remember|forget|was|were|is|are|has|had|did"
    r"|know|but|because|although|though|if|unless|thing|things|deal|problem|catch|truth|trick"
    r"|secret|issue"
    r"|not|no|never|instead|without|rather|you(?:'ll| will| can| could| to| might| should))\b)"
)
_GAP = r"(?:(?!" + _GAP_STOP + r")[\w']+(?:[\s,]+|-)){{0,{n}}}?"

#: First person, now or soon: "let me", "I'll", "I'm going to", "I'm sketching",
#: "give me a sec", "on it", "working on".
_MOMENT = (
    r"(?:give me|gimme|just|wait|one|in|hang on|hold on)\W+(?:a\s+|just a\s+)?"
    r"(?:sec|second|moment|minute|mo|tick|heartbeat|jiffy|min)s?\b"
    r"(?!\s+(?:of|for|per|in|ago|later|before|after|longer|more|left|each)\b)"
)
_BUSY = any_of(
    (
        "i'm on it", "on it", "coming (?:right )?up", _MOMENT, "hang (?:tight|on)",
        "hold (?:tight|on)", "bear with me", "stand by", "sit tight", "say no more",
        "consider it", "you got it", "right away", "working on it", "on my way",
        "leave it (?:to|with) me", "stay tuned", "(?:be )?(?:right )?back in a (?:flash|jiffy|bit)",
        "any (?:second|minute|moment) now", "in no time", "momentarily", "say less",
        "hold still", "as you wish", "your wish is my command", "challenge accepted",
        "roger that", "comin' up", "coming at you",
    )
)  # fmt: skip
_COMMIT = any_of(
    (
        "let me", "let's", "lemme", "let us", "i'll", "i will", "i'm going to", "i am going to",
        "i'm gonna", "gonna", "i'm about to", "i am about to", "i shall", "i'm off to",
        "allow me to", "time to", "going to go", "working on", "busy with", "starting on",
        "putting together", "putting the finishing touches on",
        "i've (?:just |now |already )?started(?: on)?", "i'd be (?:happy|glad|delighted) to",
        "happy to", "glad to", "with pleasure", "i can(?!'t|not| not)",
        "i've (?:just |now |already )?(?:made|drawn|generated|created|rendered|painted"
        "|sketched|put together|whipped up|designed|finished)",
    )
)  # fmt: skip
_ADVERB = r"(?:(?:\w+ly|just|now|already|currently|still|then|also|go ahead and)[\s,:!\u2014-]+)?"
_PROGRESSIVE = r"(?:i'm|i am|we're|we are)\s+" + _ADVERB
#: A sentence (or clause) that opens with a gerund: "Sketching the design now".
_OPENING = (
    r"(?:^\W*|[.!?:;,*(\n\u2014]\W*|\b(?:okay|ok|sure|alright|now|yes|absolutely|right)\W+)"
    + _ADVERB
)
#: Any verb in -ing but the ones that make nothing, then the words up to the class word.
#: Or the class word is that verb: "I'm animating", "Sketching the design now".
_DOING = rf"(?:{_NOT_MAKING_ING}[a-z]+ing\b[\s,]+{{gap}}|(?=[a-z]+ing\b))"
#: After the word: "…, coming right up", "…, let me get that made", "… rendering now".
_AFTER = (
    rf"(?:{_BUSY}|on (?:its|the) way|in (?:a|just a) (?:sec|second|moment|minute|jiffy|bit)"
    r"|in the works|under ?way|in progress|on the easel|(?:is|are) ready\b|just for you\b"
    r"|(?:coming|headed|heading) your way|it is\s*!"
    r"|fresh off the|hot off the|in the oven|(?:is|are) (?:cooking|brewing|baking|loading"
    r"|processing|generating|rendering|coming together)\b"
    r"|shortly|(?:will|'ll) be (?:ready|done|up)|ready in"
    r"|(?:is|are) being (?:\w+ed|drawn|made|done|shot|put together)\b"
    r"|(?:let me|i'll|i will|i'm going to|i'm gonna)\s+(?:\w+\s+)?\w+\s+(?:it|that|this|one"
    r"|them)\b|[a-z]+ing\s+(?:it\s+|that\s+|this\s+|one\s+)?(?:now|right now)\b|for you now)"
)
#: Showing it: "here's your poster", "here you go, …".
_PRESENT = (
    r"(?:here'?s|here is|here are|here you go|here it is|here comes?|voil[aà]|ta-?da"
    r"|and done|all done|here we go|presto)"
)
#: What ends a sentence: the word and its frame are in one sentence, or in two next to
#: each other.
_IN_SENTENCE = r"[^.!?\n]{0,80}?"
_NEXT_SENTENCE = r"[^.!?\n]{0,80}?[.!?]+\s*"


_GAP8 = _GAP.format(n=8)
_DOING8 = _DOING.format(gap=_GAP8)

#: The frames that come before the word (each is followed by it).
FRAMES_BEFORE = (
    # "let me … word", "give me a sec, … word".
    rf"\b(?:{_COMMIT}|{_BUSY})[\s,:!\u2014-]+{_ADVERB}{_NOT_MAKING}{_GAP8}",
    # "I'm sketching … word", "I'm animating".
    rf"\b{_PROGRESSIVE}{_DOING8}",
    # "Sketching the design now", "Okay, turning your description into a word".
    rf"{_OPENING}{_DOING8}",
    # "On it! word".
    rf"\b{_BUSY}\W{{0,3}}[.!:\u2014\u2013-]+\s*{_GAP8}",
    # "here's your word".
    rf"\b{_PRESENT}[\s,:!\u2014\u2013-]+{_GAP.format(n=3)}",
)
#: The frames that come after the word (each follows it).
FRAMES_AFTER = (
    # "word …, coming right up", "word … rendering now".
    rf"{_IN_SENTENCE}\b{_AFTER}",
    # "word …? Coming right up."
    rf"{_NEXT_SENTENCE}{_BUSY}\b",
)
#: How far before its word a frame can begin (a frame, an adverb and eight words), and
#: how far after a word its own lookaheads read.
REACH_BEFORE = 240
REACH_AFTER = 60

#: The word of each intent: any picture, any moving picture, any looking up online.
WORDS: dict[Intent, str] = {
    "image": r"\b" + any_of(tuple(n + _NOUN_END for n in IMAGE_NOUNS) + IMAGE_VERBS),
    "video": r"\b" + any_of(tuple(n + _NOUN_END for n in VIDEO_NOUNS) + VIDEO_VERBS),
    "search": r"\b" + any_of((*SEARCH_WORDS, SEARCH_FETCH)),
}

#: The same as plain regular expressions, a frame and the word: what
#: `handoff_structure.Structure` finds faster by looking only around the words.
STRUCTURAL_PATTERNS: dict[Intent, tuple[str, ...]] = {
    intent: tuple(frame + word for frame in FRAMES_BEFORE)
    + tuple(word + frame for frame in FRAMES_AFTER)
    for intent, word in WORDS.items()
}

#: What each intent's word class needs in the lowered reply (the cue gate): one of
#: these is part of every word the patterns look for (a search's "check the latest" by
#: its "latest").
WORD_CUES: dict[Intent, tuple[str, ...]] = {
    "image": (
        "imag", "pic", "photo", "snapshot", "illustrat", "portrait", "artwork", " art", "-art",
        "logo", "poster", "wallpaper", "comic", "visual", "selfie", "cartoon", "avatar",
        "banner", "mock", "diagram", "chart", "map", "meme", "sticker", "thumbnail",
        "invitation", "flyer", "icon", "graphic", "collage", "watercolo", "headshot",
        "caricature", "mood", "card", "cover", "emblem", "crest", "mascot", "mural",
        "blueprint", "floor", "wireframe", "emoji", "sprite", "tattoo", "storyboard",
        "likeness", "depict", "shot", "sketch", "silhouette", "canvas", "anime", "colo",
        "3d model", "vector", "clip", "draw", "easel", "crayon", "pencil", "brush", "paint",
        "doodl", "visuali", "airbrush", "render", "snap", "generat", "chibi", "board",
        "brochure", "stencil", "design", "screensaver", "screen", "still life", "scape",
        "background",
    ),
    "video": (
        "vid", "clip", "animat", "gif", "lapse", "footage", "trailer", "teaser", "reel",
        "montage", "movie", "film", "slide", "vlog", "cinema", "flipbook", "motion", "slow",
        "b-roll", "screencast", "moving", "loop", "to life", "boomerang", "tiktok",
        "recording",
    ),
    "search": (
        "search", "googl", "bing", "brows", "scour", "fact", "look", "online", "internet",
        "web", "the net", "sites", "out there", "find", "what i can", "saying", "posting",
        "writing",
        # what `SEARCH_FETCH` needs
        "latest", "newest", "current", "up-to-date", "today's", "tonight's", "this week's",
        "live", "recent", "news", "headlines", "review", "rating", "price", "deals", "ticket",
        "listing", "hours", "showtime", "timetable", "forecast", "weather", "score",
        "article", "studies", "source", "report", "wait times", "availab", "exchange rate",
        "cheapest", "nearest", "closest", "-rated", "open ", "release date", "trending",
        "forums", "what's new", "near ", "who won", "lyrics", "recipe", "traffic",
        "schedule", "address", "phone number", "in stock", "status", " times",
    ),
}  # fmt: skip
