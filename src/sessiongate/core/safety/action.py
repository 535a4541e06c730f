"""Action evidence: the points a normalised text earns for asking for a desktop action,
read per clause from its first verb after the polite openers (`core/safety/rules.py`'s
docstring says how they are weighed)."""

from __future__ import annotations

from sessiongate.core.safety.text import compiled, words

# Openers that carry no meaning for the label: stripped before the first word is read.
_FILLER_RE = compiled(
    r"^(?:(?:hey|hi|ok|okay|oh|so|um|uh|well|alright|right|yo|and|now|then|also|"
    r"theo|please|pls|kindly|just|quickly|quick|go ahead and|i want you to|i need you to|"
    r"i'd like you to|i would like you to|let's|lets|can you|could you|would you|"
    r"will you|can u|could u|would you mind|would you be so kind as to|be a dear and|"
    r"do me a favou?r and|for me|i'd appreciate it if you could|i would appreciate it "
    r"if you could|mind|you)\b[\s,!.:]*)+"
)


# First words that mean a desktop action whatever follows.
_UI_VERBS = frozenset(
    """
    click double-click doubleclick right-click tap scroll type press drag resize snap
    maximize maximise minimize minimise tile paste mute unmute pause unpause skip google search
    refresh reload bookmark rename screenshot zoom crop zip unzip dismiss undo redo reopen
    launch restart reboot alt-tab uninstall install empty highlight select unselect
    reply print unmute screen-record relaunch log-out log-off log-in sign-out sign-in
    shut-down power-off go-back go-forward scroll-up scroll-down zoom-in zoom-out turn-up
    turn-down turn-on turn-off switch-to look-up bring-up pull-up fire-up alt-tab
    """.split()
)
# "would you mind closing that window": the gerund is the verb.
_MIND_GERUND_RE = compiled(
    r"^(?:(?:hey|ok|okay|so|theo|please)\b[\s,!.]*)*(?:would|do|will) (?:you|u) mind "
    r"(?:just )?([a-z]+ing)\b"
)
# "log me out", "turn it up": an object pronoun between a verb and its particle.
_PARTICLE_OBJECT_RE = compiled(r"^(?:me|it|this|that|them|him|her|everything|all) (?=\w)")
# Everyday verbs that often, not always, mean a desktop action.
_ACTION_VERBS = frozenset(
    """
    open close start run execute kill terminate end quit exit stop shut log lock sleep hit
    hibernate delete remove move copy cut create make save take record capture set turn
    switch play resume search look find go navigate download upload update upgrade check
    send email mail message text post share forward shoot connect disconnect clear clean
    sort show hide change replace insert add format compress extract join fire bring pull
    put fill write translate get chop trim blast blow nuke crack hack enable disable
    increase decrease lower raise adjust schedule remind pin unpin split merge duplicate
    backup sync scan toggle convert export import attach archive organise organize
    label tidy arrange boost dim brighten bump crank throw toss ditch scrap bin pop stick
    """.split()
)
_DESKTOP_OBJECT_RE = compiled(
    words(
        r"windows?(?! (?:folder|directory))",
        r"tabs?",
        r"browser",
        r"folders?",
        r"files?",
        r"desktop",
        r"screens?",
        r"screenshots?",
        r"volume",
        r"brightness",
        r"apps?",
        r"applications?",
        r"programs?",
        r"spotify|chrome|firefox|edge|safari|notepad|word|excel|powerpoint|outlook|"
        r"teams|slack|zoom|discord|whatsapp|telegram|steam|vlc|youtube|netflix|gmail|"
        r"calculator|paint|photoshop|vs ?code|visual studio(?: code)?|terminal|"
        r"command prompt|powershell|task manager|file explorer|explorer|finder|settings|"
        r"control panel|calendar|camera app|notes app|amazon|ebay|wikipedia|reddit|"
        r"google(?: maps| docs| drive)?|maps|twitter|instagram|facebook|tiktok|linkedin",
        r"wi-?fi",
        r"bluetooth",
        r"songs?|music|playlist|tracks?|podcast|video|movie",
        r"documents?|spreadsheets?|slides?|presentation|paragraph|font|title|table|drafts?|"
        r"sentences?|words?|characters?|letters?|"
        r"lines?|columns?|rows?|cells?|text|page|pdfs?",
        r"emails?|inbox|messages?",
        r"buttons?|links?|cursor|mouse|keyboard|enter|escape|space ?bar|icon|menu|"
        r"popups?|pop-ups?|notifications?|dialog|fields?|forms?|(?:search |text |check ?)?boxe?s?|"
        r"inputs?|(?:tool|side|task|menu|bookmarks |address |search )bar|bar|start menu|"
        r"bookmarks?",
        r"timer|alarm|reminder|meeting|appointment",
        r"photos?|pictures?|images?",
        r"downloads|recycle bin|trash",
        r"microphone|mic|headphones|speakers?|monitor|display|dark mode|night mode",
        r"computer|laptop|pc|mac",
        r"vpn|archive|zip|project|script|terminal|tests?",
        r"shopping list|to-?do list",
        r"sound|audio",
    )
)
_CLAUSE_SPLIT_RE = compiled(r"[,;:!?]|\.(?:\s|$)|\s(?:and then|then|and|after that)\s")
_WORD_RE = compiled(r"[a-z][a-z'-]*")


def _verb_of_gerund(word: str) -> str:
    """ "closing" -> "close", "stopping" -> "stop", "opening" -> "open"."""
    stem = word.removesuffix("ing")
    for candidate in (stem, stem + "e", stem[:-1]):
        if candidate in _UI_VERBS or candidate in _ACTION_VERBS:
            return candidate
    return word


def _clause_verb(clause: str) -> str | None:
    """The clause's first verb after the openers; a phrasal verb ("log out", "turn it
    up") as "log-out"."""
    clause = clause.strip()
    gerund = _MIND_GERUND_RE.match(clause)
    if gerund is not None:
        return _verb_of_gerund(gerund.group(1))
    stripped = _FILLER_RE.sub("", clause)
    match = _WORD_RE.match(stripped)
    if match is None:
        return None
    word = match.group(0)
    rest = _PARTICLE_OBJECT_RE.sub("", stripped[match.end() :].lstrip())
    second = _WORD_RE.match(rest)
    if second is not None:
        pair = f"{word}-{second.group(0)}"
        if pair in _UI_VERBS:
            return pair
    return word


def action_points(text: str) -> int:
    best = 0
    has_object = _DESKTOP_OBJECT_RE.search(text) is not None
    for clause in _CLAUSE_SPLIT_RE.split(text):
        verb = _clause_verb(clause)
        if verb is None:
            continue
        if verb in _UI_VERBS:
            best = max(best, 2 + int(has_object))
        elif verb in _ACTION_VERBS:
            best = max(best, 1 + int(has_object))
    return best
