"""The harm rules about people (violence, making ill, self-harm, threats) and the names
of harmful things (malware, weapons, drugs). They follow `core/safety/harm_system.py`'s
in the table `core/safety/harm.py` weighs."""

from __future__ import annotations

from sessiongate.core.safety.harm_terms import SOMEONE, Kind, Rule
from sessiongate.core.safety.text import compiled, words

PEOPLE_RULES: tuple[Rule, ...] = (
    # --- harm to people ---------------------------------------------------------------------
    Rule(
        "people:violence",
        Kind.DIRECT,
        2,
        compiled(
            words(
                r"kill(?:s|ing)?",
                r"murder(?:s|ing)?",
                r"hurt(?:s|ing)?",
                r"harm(?:s|ing)?",
                r"injur(?:e|es|ing)",
                r"poison(?:s|ing)?",
                r"stab(?:s|bing)?",
                r"shoot(?:s|ing)?",
                r"attack(?:s|ing)?",
                r"beat(?:s|ing)? up",
                r"assault(?:s|ing)?",
                r"strangl(?:e|es|ing)",
                r"drug(?:s|ging)?",
                r"kidnap(?:s|ping)?",
                r"torture?s?|torturing",
                r"punch(?:es|ing)?",
                r"get back at",
                r"knock(?:s|ing)? out",
            )
            + r"\s+"
            + SOMEONE
            + r"(?![\w'-])(?! (?:a|an|the) (?:quick |short )?(?:message|email|text|note|line|"
            r"dm|reply|invite|link))"
        ),
    ),
    Rule(
        "people:make-ill",
        Kind.DIRECT,
        2,
        compiled(
            words(rf"make(?:s|ing)? {SOMEONE} (?:sick|ill|bleed|suffer|pass out|faint)")
            + r"|"
            + words(r"slip (?:something|\w+) into")
        ),
    ),
    Rule(
        "people:self-harm",
        Kind.DIRECT,
        3,
        compiled(
            words(
                r"kill(?:ing)? myself",
                r"end(?:ing)? my (?:own )?life",
                r"take my (?:own )?life",
                r"suicid(?:e|al)",
                r"self[- ]harm(?:ing)?",
                r"(?:hurt|harm|cut|injure|starve)(?:ing)? myself",
                r"overdos(?:e|ing)",
                r"\bod on",
                r"want(?:s)? to die",
                r"wanna die",
                r"to die",
                r"better off dead",
                r"(?:don't|do not|dont) want to (?:live|be alive|be here|exist|wake up)",
                r"end it all",
                r"(?:least|less) painful way",
                r"disappear (?:for good|forever)",
                r"(?:never|not) wake up",
                r"jump(?:ing)? (?:off|from) (?:a|the) (?:bridge|roof|building|cliff)",
            )
        ),
        negatable=False,
    ),
    Rule(
        "people:threat",
        Kind.DIRECT,
        2,
        compiled(
            words(
                r"threaten(?:s|ing)?",
                r"death threats?",
                r"bomb threats?",
                r"harass(?:es|ing|ment)?",
                r"stalk(?:s|ing)?",
                r"dox(?:x)?(?:es|ing)?",
                r"blackmail(?:s|ing)?",
                r"extort(?:s|ing)?",
                r"intimidat(?:e|es|ing)",
                r"bully(?:ing)?",
                r"embarrass",
                r"humiliat(?:e|es|ing)",
                r"revenge porn",
                r"impersonat(?:e|es|ing)",
                r"pretend(?:s|ing)? to be (?:my |the |a |an |his |her )?(?:\w+ )?"
                r"(?:bank|police|irs|tax office|support|microsoft|paypal|amazon|doctor|"
                r"lawyer|officer|windows|update|antivirus|apple|google)",
                r"fake (?:\w+ ){0,3}(?:invoices?|ids?|pages?|sites?|websites?|accounts|"
                r"reviews|emails?|calls?|login|logins|password reset \w+|bank \w+)",
                r"home address of",
                r"where (?:she|he|they) (?:lives?|is staying|sleeps|works) now",
                r"find (?:out )?where (?:she|he|they|my \\w+) (?:lives?|is staying|sleeps)",
                r"so (?:she|he|they|my \\w+) (?:crashes|crash|gets hurt|get hurt|dies|die|"
                r"falls|fall|gets sick|get sick)",
                r"so (?:she|he|they) (?:don't|doesn't|won't) remember",
                r"real name and address",
                r"(?:when|while) (?:she|he|they)(?:'s| is| are|'re) (?:home )?alone",
                r"spam(?:s|ming)? (?:the|my|his|her|their|this|that|\w+'s)",
            )
        ),
    ),
    # --- names of harmful things -----------------------------------------------------------
    Rule(
        "topic:malware",
        Kind.TOPIC,
        1,
        compiled(
            words(
                r"key ?loggers?",
                r"ransomware",
                r"ransom(?: notes?)?",
                r"malware",
                r"spyware",
                r"stalkerware",
                r"trojans?",
                r"rootkits?",
                r"backdoors?",
                r"botnets?",
                r"worms?",
                r"(?<!anti-)(?<!anti )viruse?s?(?! scan| scanner| protection| definitions)",
                r"crypto ?miners?",
                r"cryptominers?",
                r"logic bombs?",
                r"zip bombs?",
                r"remote access (?:tool|trojan)s?",
                r"phishing",
                r"credential harvester",
                r"payloads?",
                r"exploits?",
                r"zero[- ]days?",
            )
        ),
        negatable=False,
    ),
    Rule(
        "topic:weapons-drugs",
        Kind.TOPIC,
        1,
        compiled(
            words(
                r"(?<!bath )(?<!photo )(?:pipe |nail |car |dirty )?bombs?",
                r"explosives?",
                r"thermite",
                r"napalm",
                r"molotovs?",
                r"detonators?",
                r"grenades?",
                r"ghost guns?",
                r"guns? (?:that|which) (?:can't|cannot) be traced",
                r"untraceable (?:guns?|weapons?)",
                r"guns? without (?:a )?background checks?",
                r"nerve agents?",
                r"ricin",
                r"sarin",
                r"anthrax",
                r"(?:toxic|poison|poisonous|mustard|chlorine) gas",
                r"meth(?:amphetamine)?",
                r"fentanyl",
                r"heroin",
                r"crack cocaine",
                r"derail",
                r"weapons?",
                r"guns?|firearms?|rifles?|pistols?|ammo|ammunition",
                r"without (?:a )?licen[cs]e|(?:don't|do not) have a licen[cs]e|unregistered",
            )
        ),
        negatable=False,
    ),
)
