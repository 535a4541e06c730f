"""The harm rules about computers, data and accounts: destructive commands, destroying
what the machine needs, switching protection off, credentials and break-ins (with the
sabotage, ransom, fraud and harassment rules that sit beside them), data leaving the
organisation, flooding, surveillance. `core/safety/harm.py` weighs them; the order is
the table's, continued by `core/safety/harm_people.py`."""

from __future__ import annotations

from sessiongate.core.safety.harm_terms import (
    CREDENTIAL,
    CREDENTIAL_NOUN,
    CRITICAL_TARGET,
    DESTROY,
    OTHER_PEOPLE,
    SECURITY,
    SOMEONE,
    STEAL,
    STEALTH,
    THIRD_PARTY_POSSESSIVE,
    Kind,
    Rule,
)
from sessiongate.core.safety.text import compiled, gap, words

SYSTEM_RULES: tuple[Rule, ...] = (
    # --- destructive commands, as typed ---------------------------------------------------
    Rule(
        "command:rm-root",
        Kind.ACT,
        3,
        # Flags, then the root, a home, a glob or a top-level system directory (not any
        # path: "rm -rf /tmp/build" is housekeeping). Bounded repetition, no nesting: the
        # pattern stays linear on hostile input such as "rm -rf " repeated.
        compiled(
            r"\brm(?:\s+-{1,2}[\w-]+){1,4}\s+(?:--no-preserve-root|\*|~/?\*?|"
            r"/(?:etc|usr|bin|sbin|boot|home|var|lib|sys|dev|root)?/?\*?)(?=\s|$)"
        ),
        negatable=False,
    ),
    Rule(
        "command:windows-delete",
        Kind.ACT,
        3,
        compiled(r"\b(?:del|erase|rd|rmdir)\s+(?:\S+\s+){0,3}/[sfq]\b|\bdeltree\b"),
        negatable=False,
    ),
    Rule("command:format-drive", Kind.ACT, 3, compiled(r"\bformat\s+[a-z]:"), False),
    Rule(
        "command:raw-disk",
        Kind.ACT,
        3,
        compiled(r"\bdd\s+if=\S+\s+of=/dev/|\bmkfs(?:\.\w+)?\s+/dev/|>\s*/dev/[sh]d[a-z]"),
        negatable=False,
    ),
    Rule(
        "command:fork-bomb",
        Kind.ACT,
        3,
        compiled(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}|" + words("fork ?bombs?")),
        negatable=False,
    ),
    Rule(
        "command:chmod-root",
        Kind.ACT,
        2,
        compiled(r"\bchmod\s+(?:-r\s+)?777\s+/(?:\s|$)|chmod 777 everything"),
        negatable=False,
    ),
    # --- destroying what the machine needs ------------------------------------------------
    Rule(
        "destroy:critical",
        Kind.ACT,
        2,
        compiled(words(DESTROY) + gap(5) + CRITICAL_TARGET + r"(?![\w-])"),
    ),
    Rule(
        "destroy:unbootable",
        Kind.ACT,
        2,
        compiled(
            words(
                r"never boots?",
                r"(?:won't|will not|can't|cannot|doesn't|does not) (?:boot|start|turn on)",
                r"unbootable",
                r"unusable",
                r"brick(?:s|ed|ing)?",
                r"blue ?screens?",
                r"burns? out",
                r"fills? the (?:disk|drive)",
                r"until (?:it|the (?:system|computer|server|site|website|machine)) "
                r"(?:crashes|goes down|dies)",
            )
        ),
    ),
    # --- switching protection off ---------------------------------------------------------
    Rule(
        "disable:security",
        Kind.ACT,
        2,
        compiled(
            words(
                r"disabl(?:e|es|ing)",
                r"turn(?:s|ing)? off",
                r"switch(?:es|ing)? off",
                r"shut(?:s|ting)? off",
                r"shut(?:s|ting)? down",
                r"deactivat(?:e|es|ing)",
                r"uninstall(?:s|ing)?",
                r"remov(?:e|es|ing)",
                r"kill(?:s|ing)?",
                r"bypass(?:es|ing)?",
                r"circumvent(?:s|ing)?",
                r"(?:get|go|find a way|find a way to get) (?:a)?round",
                r"evad(?:e|es|ing)",
                r"block(?:s|ing)?",
            )
            + gap(4)
            + SECURITY
            + r"(?![\w-])"
        ),
    ),
    # --- credentials and break-ins ---------------------------------------------------------
    Rule(
        "steal:credentials",
        Kind.ACT,
        2,
        compiled(words(STEAL) + gap(6) + CREDENTIAL + r"(?![\w-])"),
    ),
    Rule(
        "steal:stolen",
        Kind.ACT,
        2,
        compiled(words(r"stolen (?:credit )?cards?", r"stolen (?:card|credit card) numbers")),
    ),
    Rule(
        "steal:someone-elses-credentials",
        Kind.ACT,
        2,
        compiled(THIRD_PARTY_POSSESSIVE + gap(3) + CREDENTIAL + r"(?![\w-])"),
    ),
    Rule(
        "break-in:hack",
        Kind.ACT,
        2,
        compiled(
            words(
                r"hack(?:s|ing|ed)? (?:in|into|in to)",
                r"hack(?:s|ing)? (?!together|around|day|a bit|away|for)\w+",
                r"break(?:s|ing)? into(?! a sweat| song| tears| laughter)",
                r"get(?:ting)? into (?:his|her|their|my \w+'s|\w+'s|someone's) "
                r"(?:email|account|computer|laptop|phone|pc|instagram|facebook|files)",
                r"brute[- ]?forc(?:e|es|ing)",
                r"crack(?:s|ing)? (?:the |his |her |their |my \w+'s |\w+'s |a )?"
                r"(?:password|wifi|wi-fi|pdf|hash|login|encryption|code|pin)",
                r"privilege escalation",
                r"escalat(?:e|ing) privileges",
                r"(?:get|gain|obtain) admin(?:istrator)? (?:rights|access) without",
                r"without (?:the|a|his|her|their) password",
                r"exploit(?:s|ing)? (?:the |a |this |an )?(?:\w+ )?vulnerabilit(?:y|ies)",
                r"man in the middle",
                r"mitm",
                r"arp spoof(?:ing)?",
                r"spoof(?:s|ing)? (?:caller id|the|my|his|her|an?) ?\w*",
                r"default passwords",
                r"open ports",
                r"pick(?:ing)? (?:a |the |his |her |their |my \w+'s |\w+'s )?locks?",
            )
        ),
    ),
    Rule(
        "break-in:lock-out",
        Kind.DIRECT,
        2,
        compiled(words(rf"lock(?:s|ing)? {SOMEONE} out", r"lock(?:s|ing)? (?:\w+ ){0,2}out of")),
    ),
    Rule(
        "steal:other-peoples-credentials",
        Kind.ACT,
        2,
        compiled(
            words(
                rf"(?:his|her|their|everyone's|everybody's|people's|other people's|users'|"
                rf"someone's|somebody's) (?:\w+ )?{CREDENTIAL_NOUN}",
                rf"{CREDENTIAL_NOUN} (?:\w+ ){{0,3}}(?:she|he|they) (?:types?|typed|uses?|"
                rf"enters?|saved|puts?)",
                rf"{CREDENTIAL_NOUN} (?:\w+ ){{0,6}}(?:for|of|from) (?:all )?(?:the )?"
                rf"{OTHER_PEOPLE}",
            )
        ),
    ),
    Rule(
        "break-in:someone-elses",
        Kind.ACT,
        2,
        compiled(words(r"(?:get|gets|getting|log|logging|break|breaking) into [a-z]+'s")),
    ),
    Rule(
        "break-in:knock-offline",
        Kind.ACT,
        2,
        compiled(
            words(
                r"knock(?:s|ing)? (?:\S+ ){0,4}offline",
                rf"kick(?:s|ing)? {SOMEONE} off (?:the )?(?:wifi|wi-fi|network|internet)",
            )
        ),
    ),
    Rule(
        "sabotage",
        Kind.ACT,
        1,
        compiled(
            words(
                r"(?:break|breaks|sabotage|ruin|mess up|mess with|screw up|wreck|fry|"
                r"tamper(?:ing)? with|cut) (?:\S+ ){0,3}(?:drivers?|printers?|computers?|"
                r"laptops?|pcs?|servers?|network|router|car|brakes|phone|tablet|system|"
                r"bike)"
            )
        ),
    ),
    Rule(
        "ransom:encrypt",
        Kind.ACT,
        1,
        compiled(
            words(
                r"encrypt(?:s|ing)? (?:everything|all|every|their|his|her|the (?:network|"
                r"shared|office|company|school)|\w+'s)"
            )
        ),
    ),
    Rule(
        "ransom:demand",
        Kind.ACT,
        1,
        compiled(words(r"pay up", r"demand(?:s|ing)? (?:\w+ )?(?:bitcoin|money|payment|crypto)")),
    ),
    Rule(
        "fraud:found-card",
        Kind.DIRECT,
        1,
        compiled(
            words(
                r"found (?:a |the |someone's |somebody's )?(?:wallet|purse|card|credit card)",
                r"(?:not|isn't|is not) mine",
                r"use (?:the|this|that|his|her|their|[a-z]+'s) (?:credit |debit |bank )?card",
            )
        ),
    ),
    Rule(
        "harass:nasty",
        Kind.DIRECT,
        1,
        compiled(
            words(
                r"(?:nasty|mean|hateful|abusive|insulting|cruel|humiliating|degrading|"
                r"racist|vile) (?:comments?|messages?|posts?|texts?|emails?|replies|things)",
                r"(?:has|have) (?:a )?(?:disease|std|hiv)",
                r"(?:want|get) (?:her|him|them) fired",
                rf"teach {SOMEONE} a lesson",
            )
        ),
    ),
    Rule(
        "expose:broadcast",
        Kind.ACT,
        1,
        compiled(
            words(
                r"(?:to|with) (?:the whole|the entire|all the|everyone in the|everyone in my) "
                r"(?:office|company|school|team|class|group chat|contacts)",
                r"everyone in my contacts",
            )
        ),
    ),
    # --- data leaving the organisation ----------------------------------------------------
    Rule(
        "exfiltrate:word",
        Kind.ACT,
        2,
        compiled(words(r"exfiltrat(?:e|es|ed|ing|ion)", r"leak(?:s|ing)? (?:the|our)")),
    ),
    Rule(
        "exfiltrate:to-personal",
        Kind.ACT,
        2,
        compiled(
            words(
                r"(?:company|company's|customer|client|hr|confidential|internal|payroll|"
                r"salary|work|employer's|corporate|office|boss's|manager's|accounting)"
            )
            + r"(?:\s+\S+){0,8}?\s+"
            + words(
                r"(?:my|a) (?:personal|private|own) \w+",
                r"my (?:gmail|dropbox|usb|own)",
                r"a usb",
                r"(?:random|external|my) (?:ftp|server)",
                r"my personal account",
            )
        ),
    ),
    Rule(
        "fraud:to-my-account",
        Kind.DIRECT,
        2,
        compiled(
            words(r"pays?|paid|transfers?|send|sends|chang(?:e|es|ing)|redirect(?:s|ing)?")
            + r"(?:\s+\S+){0,10}?\s+"
            + words(r"(?:into|to) my (?:own |personal |private )?(?:bank )?account")
        ),
    ),
    # --- flooding ---------------------------------------------------------------------------
    Rule(
        "flood",
        Kind.ACT,
        2,
        compiled(
            words(
                r"d?dos(?:ing)?",
                r"denial of service",
                r"(?:ping|syn|udp|http) floods?",
                r"flood(?:s|ing)? (?:\S+ ){0,4}with (?:traffic|requests|packets|messages|"
                r"notifications|calls|texts)",
                r"take (?:down|offline) (?:a|the|his|her|their|my \w+'s|\w+'s) "
                r"(?:website|site|server|network|service)",
                r"(?:take|knock|bring) (?:a |the |his |her |their |my \w+'s |\w+'s )?"
                r"(?:website|site|server|network|service) (?:down|offline)",
                r"thousands of (?:\w+ )?(?:messages|notifications|texts|calls|emails)",
                r"ten thousand (?:\w+ )?(?:messages|notifications|texts|calls|emails)",
            )
        ),
    ),
    # --- surveillance ---------------------------------------------------------------------
    Rule(
        "surveil:act",
        Kind.ACT,
        1,
        compiled(
            words(
                r"records?",
                r"recording",
                r"watch(?:es|ing)?",
                r"monitor(?:s|ing)?",
                r"spy(?:ing)? on",
                r"track(?:s|ing)?",
                r"webcam",
                r"microphone",
                r"screenshots? of",
                r"location",
                r"read(?:s|ing)? (?:\w+ ){0,3}messages",
            )
        ),
    ),
    Rule("stealth", Kind.ACT, 1, compiled(words(STEALTH)), negatable=False),
    Rule(
        "third-party:private",
        Kind.ACT,
        1,
        compiled(
            THIRD_PARTY_POSSESSIVE
            + r"(?:\s+\S+){0,3}?\s+"
            + words(
                r"laptop|computer|pc|phone|account|email|emails|messages|files|photos|"
                r"location|screen|keystrokes|whatsapp|instagram|facebook|salary file|salary|"
                r"salaries|"
                r"medical records|address|home address|tablet|new number|phone number|"
                r"browser|session|wifi|webcam|private \w+|computers|pcs|mac"
            )
        ),
    ),
    Rule(
        "deny-others",
        Kind.DIRECT,
        1,
        compiled(
            words(
                r"so (?:that )?(?:he|she|they|my \w+|the \w+|people|everyone) "
                r"(?:can't|cannot|can not|won't|will not|loses?|lose)",
                r"so (?:they|he|she) lose",
            )
        ),
    ),
)
