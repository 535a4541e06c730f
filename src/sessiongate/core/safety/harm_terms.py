"""The vocabulary of the harm rules: a rule's kind and shape, and the pattern fragments
(people, destructive verbs, what the machine needs, security, credentials, stealing,
stealth) that `core/safety/harm_system.py` and `core/safety/harm_people.py` combine."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

# People who are not the speaker. "my <person>" is someone else; "my music" is not.
PERSON = (
    r"(?:wife|husband|partner|girlfriend|boyfriend|ex|mom|mum|mother|dad|father|parents?|"
    r"brother|sister|son|daughter|kids?|child(?:ren)?|family|grand(?:ma|pa|mother|father)|"
    r"uncle|aunt|cousin|boss|manager|coworkers?|co-workers?|colleagues?|employees?|"
    r"neighbou?rs?|roommates?|flatmates?|classmates?|teachers?|friends?|rivals?|"
    r"competitors?|students?|users?|clients?|customers?|guests?|victims?|landlord|tenant|"
    r"cat|dog|pet|puppy|kitten)"
)
SOMEONE = (
    rf"(?:someone|somebody|anyone|anybody|everyone|everybody|people|a person|him|her|them|"
    rf"(?:my|his|her|their|the|our|a|an) {PERSON}|other people|the person)"
)
THIRD_PARTY_POSSESSIVE = (
    rf"(?:(?:my|his|her|their|our|the|a) {PERSON}'s?|someone's|somebody's|someone else's|"
    rf"other people's|people's|everyone's|other users'|the victim's|(?<![a-z'])[a-z]+'s (?:own )?"
    rf"(?:laptop|computer|pc|phone|tablet|account|email|password|files|messages))"
)


class Kind(StrEnum):
    #: A direct request to hurt someone or oneself: counts whatever the framing.
    DIRECT = "direct"
    #: A harmful act: discounted when the request only asks about it.
    ACT = "act"
    #: The name of a harmful thing: weak alone, discounted like ACT.
    TOPIC = "topic"


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    kind: Kind
    points: int
    pattern: re.Pattern[str]
    #: Whether a negation right before the match ("don't", "never") cancels it.
    negatable: bool = True


DESTROY = (
    r"(?:delet(?:e|es|ed|ing)|remov(?:e|es|ed|ing)|wip(?:e|es|ed|ing)|eras(?:e|es|ed|ing)|"
    r"(?:re)?format(?:s|ted|ting)?|shred(?:s|ded|ding)?|corrupt(?:s|ed|ing)?|"
    r"overwrit(?:e|es|ing)|destroy(?:s|ed|ing)?|trash|nuke|zero out|clear out|get rid of|"
    r"purge|kill|uninstall|rm|del)"
)
CRITICAL_TARGET = (
    r"(?:system ?32|windows (?:folder|directory|dir)|the windows folder|system files|"
    r"(?:under |in )?c(?::|:\\| colon(?: backslash)?) ?windows|"
    r"program files|(?:hard |[a-z] |[a-z]: |[a-z] colon |system |boot |backup |external |"
    r"whole |entire |every |all the |the |my |this )(?:drive|disk)s?|hard ?drives?|"
    r"drives|disks|partitions?|"
    r"boot (?:partition|sector|loader|record)|master boot record|mbr|bios|uefi|"
    r"registry|hkey_\w+|hklm|restore points|shadow cop(?:y|ies)|backups?|"
    r"(?:security|event|system|audit|access|server) logs|logs so|operating system|"
    r"/etc|system processes|(?:user|admin|administrator) accounts?|the administrator|"
    r"everything (?:on|in|from) (?:this|the|my) (?:computer|pc|laptop|drive|disk|machine|"
    r"system|system32 folder)|every (?:single )?file|(?:all|every|random) (?:of )?(?:the |my |our |"
    r"their )?(?:\w+ )?(?:files|documents|data)|the user's (?:files|documents)|"
    r"whole (?:computer|system|drive|disk|machine)|all the data)"
)
SECURITY = (
    r"(?:anti-?virus|anti virus|defender|firewall|(?:\w+ )?protection|virus scanner|"
    r"security (?:software|updates|suite|center|centre|cameras?|monitoring)|"
    r"windows (?:security|update)|uac|user account control|parental controls?|"
    r"(?:content |web |school |their |the )?filters?|monitoring software|the monitoring|dlp|edr|"
    r"realtime scanning|real-time scanning|real time protection|"
    r"cameras' recording|security camera)"
)
CREDENTIAL = (
    r"(?:passwords?|passcodes?|passphrases?|credentials|logins?|login details|"
    r"log-?in details|cookies|session tokens?|(?:discord |auth |access )?tokens?|"
    r"(?:password )?hashes|credit cards?(?: numbers?)?|card numbers?|bank cards?|"
    r"pins?|pin codes?|bank details|2fa codes?|one-time codes?|keystrokes?|"
    r"private keys?|seed phrases?|saved logins)"
)
# Credentials as nouns (the verb "pin" and a "login page" are not secrets).
CREDENTIAL_NOUN = (
    r"(?:passwords?|passcodes?|credentials|cookies|session tokens?|card (?:numbers?|details)|"
    r"credit cards?|(?:the|his|her|their|parental|bank|card|a) pins?|pin codes?|"
    r"bank details|2fa codes?|keystrokes?|private keys?|seed phrases?|saved logins)"
)
# People other than the speaker whose secrets a request may be after.
OTHER_PEOPLE = (
    r"(?:them|him|her|everyone|everybody|people|users|other people|someone|somebody|"
    r"other users|customers|clients|employees|staff|guests|visitors)"
)
STEAL = (
    r"(?:steal(?:s|ing)?|grab(?:s|bing)?|dump(?:s|ing)?|harvest(?:s|ing)?|sniff(?:s|ing)?|"
    r"crack(?:s|ing)?|guess(?:es|ing)?|brute[- ]?forc(?:e|es|ing)|exfiltrat(?:e|es|ing)|"
    r"extract(?:s|ing)?|collect(?:s|ing)?|pull(?:s|ing)?(?! up)|captur(?:e|es|ing)|"
    r"scrap(?:e|es|ing)|"
    r"log(?:s|ging)?(?! in| into| on| out| me)|record(?:s|ing)?|find out|phish(?:es|ing)?)"
)
STEALTH = (
    r"(?:without (?:him|her|them|anyone|anybody|my \w+|the \w+|people|the user|the owner|"
    r"him or her|the victim)(?: ever)? (?:knowing|noticing|finding out|seeing|realising|"
    r"realizing|suspecting)|without (?:anyone|anybody|people) noticing|without (?:their |"
    r"his |her )?(?:consent|permission|knowledge)|secretly|in secret|covertly|silently|"
    r"quietly|behind (?:his|her|their|my \w+'s) back|so (?:that )?(?:nobody|no one|no-one)|"
    r"don't tell|do not tell|cover (?:my|the|our) tracks|hid(?:e|es|den|ing) (?:\\w+ )?from|"
    r"(?:she|he|they) (?:won't|will never|doesn't need to|don't need to|never|won't ever) "
    r"(?:know|find out|notice)|without leaving (?:any )?(?:marks|bruises|a trace|traces)|"
    r"hidden|undetect(?:ed|able)|can't be (?:traced|recovered|undone|detected)|"
    r"cannot be (?:traced|recovered|undone|detected)|while (?:he|she|they)(?:'s| is| are|"
    r"'re) away|the evidence|just between us)"
)
