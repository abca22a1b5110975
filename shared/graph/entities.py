"""Entities named in a memory: one Protocol, a built-in offline extractor as the default.

The built-in extractor reads what conversations and notes mark by their form: a speaker prefix
("Caroline: ..."), dates ("8 May, 2023", "May 2023", "2023-05-08"), and capitalised phrases
(names of people, places, organisations and things) that do not merely start a sentence. It is
regular expressions over the text (no model, nothing downloaded), so it costs next to nothing
beside the embedder. Stronger extractors (a spaCy pipeline, an LLM) sit behind the same
``EntityExtractor`` Protocol (``shared.graph.extractors``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

EntityKind = Literal["person", "place", "organisation", "thing", "date"]
KINDS: tuple[EntityKind, ...] = ("person", "place", "organisation", "thing", "date")


@dataclass(frozen=True, slots=True)
class Mention:
    """An entity as one memory names it: the words as written, and the key it is resolved by."""

    name: str
    key: str
    kind: EntityKind


class EntityExtractor(Protocol):
    name: str

    def extract(self, text: str) -> list[Mention]:
        """The entities the text names, each key once, in the order first named."""
        ...


_APOSTROPHES = "'\u2019"
_POSSESSIVE = re.compile(rf"[{_APOSTROPHES}]s$")
_EDGE = re.compile(r"^[\W_]+|[\W_]+$")


def normalise(name: str) -> str:
    """The key an entity is resolved by within a tenant: NFKC, case-folded, single spaces, no
    leading article, no possessive, no punctuation at either end ("The Louvre's" is "louvre")."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = " ".join(text.split())
    text = _POSSESSIVE.sub("", text)
    text = _EDGE.sub("", text)
    if text.startswith("the "):
        text = text[4:]
    return text


def entity_key(name: str) -> str:
    """The key a name asked for resolves to: a date, written any way the extractor reads one
    ("3 May 2024", "May 3, 2024"), is its ISO key ("2024-05-03"), as it was stored; any other name
    is its normalised form. So every entity listed can be asked for by the name it is shown by."""
    date = _DATES.fullmatch(" ".join(name.split()).strip(" ,"))
    found = _date_mention(date) if date is not None else None
    return found.key if found is not None else normalise(name)


def mention(name: str, kind: EntityKind) -> Mention | None:
    """A mention with its key, or None when nothing is left of the name to resolve."""
    shown = " ".join(_POSSESSIVE.sub("", name.strip()).split())
    key = normalise(shown)
    if not key or len(key) > 200:
        return None
    return Mention(shown, key, kind)


def unique(mentions: list[Mention], limit: int) -> list[Mention]:
    """Each key once (the first mention of it wins), at most ``limit``."""
    seen: set[str] = set()
    kept: list[Mention] = []
    for found in mentions:
        if found.key not in seen:
            seen.add(found.key)
            kept.append(found)
            if len(kept) >= limit:
                break
    return kept


_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_MONTH_NUMBER = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
_DATES = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTHS})\.?,?\s+(?P<y1>\d{{4}})"
    rf"|(?P<m2>{_MONTHS})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})"
    rf"|(?P<m3>{_MONTHS})\.?,?\s+(?P<y3>\d{{4}})"
    r"|(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2}))\b",
    re.IGNORECASE,
)
_NAME_WORD = rf"[A-Z][\w{_APOSTROPHES}.-]*"
_SPEAKER = re.compile(rf"^\s*(?P<name>{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,2}})\s*:\s")
# A capitalised word (or an acronym) and the capitalised words after it, joined by at most one
# short connector: "Museum of Modern Art", "Rio de Janeiro", "Pride Parade".
_WORD = rf"(?:[A-Z][\w{_APOSTROPHES}&-]*|\d+[A-Z][\w-]*)"
_PHRASE = re.compile(rf"{_WORD}(?:\s+(?:(?:of|de|da|del|la|le|van|von|the|&)\s+)?{_WORD})*")
# What comes before a phrase is read backwards from it, in the text reversed once: a match
# anchored at the phrase's start costs what it reads, where a search for "...$" in the text
# before it walked all of it for every phrase (the write stage's largest share of Python a chunk).
# Read forwards these are r"[.!?:;\"“”(\[]\s*$|^\s*$" and
# r"\b(?:in|at|from|to|near|visited|visiting|around|across)\s+(?:the\s+)?$" (re.I).
_SENTENCE_END_BEFORE = re.compile(r"\s*(?:[.!?:;\"“”(\[]|\Z)")
_PLACE_BEFORE = re.compile(r"\s+(?:eht\s+)?(?:ni|ta|morf|ot|raen|detisiv|gnitisiv|dnuora|ssorca)\b", re.I)
_NOT_LETTER = re.compile(r"[^a-z]")
_ORGANISATION_WORDS = {
    "inc", "corp", "corporation", "company", "co", "ltd", "llc", "university", "college", "school",
    "club", "group", "foundation", "association", "society", "institute", "bank", "church",
    "hospital", "agency", "center", "centre", "council", "committee", "team", "band", "party",
}  # fmt: skip
# Capitalised words that start sentences or fill them without naming anything: dropped alone,
# and stripped from the ends of a phrase ("Yesterday Caroline" is "Caroline").
_COMMON = set(
    """
a about above actually after again against all also always am an and another any anyway are as
at awesome back be because been before being below best better between both but by can cant
cool could congrats congratulations day definitely did didnt do does doesnt doing done dont
during each either else even ever every exactly excited fantastic few first for from fun get
glad go going good got great guess had has hasnt have havent having he hed hell hello her here
hers herself hey hi him himself his honestly hope how however i id if ill im in indeed into is
isnt it its itll itself ive just keep know last let lets like lol look love made make many maybe
me might mine more most much must my myself nah never new next nice no nope nor not nothing now
of off oh ok okay on once one only or other others otherwise our ours ourselves out over own
perfect please pretty probably quite rather really right same see seems she shed shell should
since so some something sometimes soon sorry sounds still such sure thank thanks that thats the
their theirs them themselves then there theres these they theyre thing things think this those
though through thus to today together tomorrow too totally true truly um under until up us very
was wasnt we well went were weve what whats when where which while who whom whose why will
with without wonderful would wow yeah yes yesterday yet you youd youll your youre yours yourself
yourselves youve haha hmm btw omg absolutely amazing incredible interesting glad happy sad
""".split()  # noqa: SIM905
)


@lru_cache(maxsize=8192)
def _plain(word: str) -> str:
    """A word's letters, case-folded (cached: the same capitalised words come back chunk after chunk)."""
    return _NOT_LETTER.sub("", word.casefold())


class BuiltinExtractor:
    """Speaker prefixes, dates and capitalised phrases, by regular expressions (the default)."""

    name = "builtin"

    def __init__(self, limit: int = 16) -> None:
        self._limit = limit

    def extract(self, text: str) -> list[Mention]:
        found: list[Mention] = []
        body = text
        speaker = _SPEAKER.match(text)
        if speaker is not None:
            named = mention(speaker.group("name"), "person")
            if named is not None:
                found.append(named)
            body = text[speaker.end() :]
        reverse = body[::-1]
        spans: list[tuple[int, int]] = []
        for match in _DATES.finditer(body):
            date = _date_mention(match)
            if date is not None:
                found.append(date)
                spans.append(match.span())
        for match in _PHRASE.finditer(body):
            start, end = match.span()
            if any(start < b and a < end for a, b in spans):
                continue
            phrase = self._phrase(body, reverse, match)
            if phrase is not None:
                found.append(phrase)
        return unique(found, self._limit)

    def _phrase(self, body: str, reverse: str, match: re.Match[str]) -> Mention | None:
        """``reverse`` is ``body`` reversed: what precedes the phrase is read from ``at`` on."""
        words = match.group(0).split()
        at = len(body) - match.start()
        sentence_start = _SENTENCE_END_BEFORE.match(reverse, at) is not None
        # Common words opening a sentence, or a weekday or month, are no part of a name ("Thanks
        # Caroline", "Friday Mass"); inside a sentence they are ("in New York").
        while words and ((sentence_start and _plain(words[0]) in _COMMON) or _is_calendar(words[0])):
            words.pop(0)
            sentence_start = False
        while words and (_plain(words[-1]) in _COMMON or _plain(words[-1]) in {"de", "of", "la", "le"}):
            words.pop()
        if not words:
            return None
        # One capitalised word opening a sentence is a name only if it is not a common word.
        if sentence_start and len(words) == 1 and not _acronym(words[0]) and _plain(words[0]) in _COMMON:
            return None
        if len(words) == 1 and (len(_plain(words[0])) < 2 or _is_calendar(words[0])):
            return None
        name = " ".join(words)
        return mention(name, _kind(words, reverse, at))


def _acronym(word: str) -> bool:
    letters = [c for c in word if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters)


def _is_calendar(word: str) -> bool:
    plain = _plain(word)
    return plain in _WEEKDAYS or plain in _MONTH_NUMBER


def _kind(words: list[str], reverse: str, at: int) -> EntityKind:
    if _plain(words[-1]) in _ORGANISATION_WORDS or (len(words) == 1 and _acronym(words[0])):
        return "organisation"
    if _PLACE_BEFORE.match(reverse, at):
        return "place"
    if len(words) <= 3 and not any(_plain(w) in {"of", "the", "and", "de"} for w in words):
        return "person"
    return "thing"


def _date_mention(match: re.Match[str]) -> Mention | None:
    """A date as its ISO form: the day when it is given, else the month."""
    groups = match.groupdict()
    if groups["iy"]:
        year, month, day = int(groups["iy"]), int(groups["im"]), int(groups["id"])
    else:
        month_name = groups["m1"] or groups["m2"] or groups["m3"]
        month = _MONTH_NUMBER.get(month_name.casefold().rstrip("."), 0)
        year = int(groups["y1"] or groups["y2"] or groups["y3"])
        day_text = groups["d1"] or groups["d2"]
        day = int(day_text) if day_text else 0
    if not (1 <= month <= 12 and 1000 <= year <= 9999 and 0 <= day <= 31):
        return None
    key = f"{year:04d}-{month:02d}" + (f"-{day:02d}" if day else "")
    return Mention(match.group(0).strip(" ,"), key, "date")


class NoExtractor:
    """Entities turned off: nothing is extracted, no Entity node is made."""

    name = "off"

    def extract(self, text: str) -> list[Mention]:
        return []
