"""Time named in a query ("in May 2023", "last year", "before June", "on 3 June, 2023"), read by
``dateparser`` and turned into a window on ``created_at``.

``dateparser`` finds the expression and its date, relative to ``now`` (the request's, else the
tenant's newest memory), and says how precise it is (day, week, month, year): the window is that
whole day, week, month or year. A ``before``/``until`` or ``after``/``since`` right before the
expression opens the window on that side. A bare number ("10", "18th") is never read as a date.

dateparser costs a millisecond or more a query (tens on a loaded machine), and most queries name
no time: it is asked only when ``may_name_time`` says the words could name one — a digit, a word of
dateparser's own that names a time, two of its joining words ("a and a" is its 1 January), or one
of its number words with punctuation anywhere ("x / a" is January to it).

Any tenant's query reaches it, so its cost is bounded: it reads the first ``MAX_CHARS`` characters
of the query only (cut at a word; dateparser's cost grows faster than the text: 8 KB of
``"1 may "`` took seconds), and gives up, naming no time, once a read has spent ``BUDGET_S``
between its steps. A date it cannot place in a window (year 9999's has no end a ``datetime``
holds, year 1's week no start) names no time either: never an error.
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from shared.search.text import query_head

log = logging.getLogger(__name__)

MAX_CHARS = 256
"""The part of a query read for a time: a question names its time in its first sentences."""
MAX_WORDS = 32
"""And at most its first 32 words (the eval sets' longest question has 22): dateparser's cost
grows with the date-like words it is given (32 of "1 may 1 may …" took 100 ms, 64 took 180-260 ms,
where a question takes 5-10 ms)."""
MAX_TIME_WORDS = 6
"""And no word past its sixth that may name a time (a digit, a word of dateparser's that names a
time, a number word): dateparser's cost is a few milliseconds for each date it finds, so words
dense in dates ("1 may 1 may …", "1, 1, …", "one two …") cost what a question naming one or two
dates does (6 of "1 may" took 3.5x a question's read on a loaded machine, 32 took 15-20x), where a
question names its time within its first six such words ("on 3 May 2023": 3)."""
BUDGET_S = 0.25
"""A read's time, checked between dateparser's steps: past it, the query names no time."""

_BARE_NUMBER = re.compile(r"^\W*\d{1,2}(st|nd|rd|th)?\W*$")
_OPEN_BEFORE = {"before", "until", "till", "by"}
_OPEN_AFTER = {"after", "since"}


@dataclass(frozen=True, slots=True)
class Timeframe:
    said: str
    """The words of the query that named it."""
    start: datetime | None
    """Inclusive; none: open."""
    end: datetime | None
    """Exclusive; none: open."""

    def holds(self, moment: datetime | None, slack: timedelta = timedelta(0)) -> bool:
        """Whether a moment falls within, ``slack`` after the end still counting."""
        if moment is None:
            return False
        return (self.start is None or moment >= self.start) and (
            self.end is None or moment < self.end + slack
        )


_WORD = re.compile(r"[^\W\d_]+")
_REGEX_ESCAPE = re.compile(r"\\[A-Za-z]")
# Words of dateparser's English data that name no time on their own: they join a time's other
# words ("in", "last", "ago") or count ("a", "one", "twelve"). One of them among words dateparser
# does not know names no time; two may ("one two" is 2 January to it).
_JOINING = frozenset(
    """
    a an one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    ago before in after from this last next than less later time early small wee ordinal
    """.split()  # noqa: SIM905
)


def _words_in(data: Any) -> Iterable[str]:
    if isinstance(data, str):
        yield from _WORD.findall(_REGEX_ESCAPE.sub(" ", data.lower()))
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _words_in(key)
            yield from _words_in(value)
    elif isinstance(data, list | tuple):
        for item in data:
            yield from _words_in(item)


def _bare_short_form(said: str) -> bool:
    """Whether dateparser found a short form of a month or weekday alone ("we": Wednesday, "sat",
    "mar the", "may we"): words of a sentence ("what did we do") more often than a time, which
    needs a date's context ("on wed", "in may", "last sat", "3 mar") to be read as one."""
    words = _WORD.findall(_normal(said))
    if not words or any(c.isdigit() for c in said):
        return False
    v = _vocabulary()
    return any(w in v.short_forms for w in words) and all(w in v.short_forms or w in _FILLERS for w in words)


def _phrases(text: str, found: list[str], reads: Callable[[str], bool]) -> list[str]:
    """What dateparser found, read as the query's phrases: each widened over the numbers beside it
    and a month's name before them ("3" of "before 3 May 2023", which dateparser finds as "May"
    and "2023"; "August 3," of "August 3, 2023", found as "2023"), and found pieces with nothing
    but spaces and commas between them joined when ``reads`` reads them as one ("May" "2023":
    "3 May 2023"; not "two weeks before" "August 11, 2023")."""
    spans: list[list[int]] = []
    at = 0
    for said in found:
        start = text.find(said, at)
        if start < 0:
            continue
        end = start + len(said)
        while (word := _NUMBER_BEFORE.search(text, 0, start)) is not None:
            start = word.start(1)
            if (month := _MONTH_BEFORE.search(text, 0, start)) is not None:  # "August" of "August 3,"
                start = month.start(1)
        while (word := _NUMBER_AFTER.match(text, end)) is not None:
            end = word.end()
        if spans and not text[spans[-1][1] : start].strip(" ,") and reads(text[spans[-1][0] : end]):
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
        at = end
    return [text[start:end] for start, end in spans]


_NUMBER_BEFORE = re.compile(r"(?:^|\s)(\d{1,4}(?:st|nd|rd|th)?,?)\s+$")
_MONTH_BEFORE = re.compile(
    r"(?:^|\s)((?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?)\s+$", re.IGNORECASE
)
_NUMBER_AFTER = re.compile(r",?\s+\d{1,4}(?:st|nd|rd|th)?(?=[\s,.;:!?]|$)")
_FILLERS = frozenset({"the", "of", "and"})
_NAMES = """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
    """.split()  # noqa: SIM905


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    naming: frozenset[str]
    """Words that name a time: months, weekdays, units, parts of the day, "today", "now"."""
    joining: frozenset[str]
    """Words that only join or count."""
    numbers: frozenset[str]
    """Joining words read as a number ("a", "one"), which punctuation beside them can make a date."""
    short_forms: frozenset[str] = frozenset()
    """Months' and weekdays' short forms ("jan", "we", "sat"), and "may": words of a sentence too."""


@cache
def _vocabulary() -> _Vocabulary:
    """dateparser's English locale data, as the words and characters the gate looks for."""
    from dateparser.languages.loader import default_loader  # type: ignore[import-untyped]

    info: dict[str, Any] = default_loader.get_locale("en").info
    meta = {"name", "date_order", "skip", "pertain", "sentence_splitter_group"}
    entries = {key: value for key, value in info.items() if key not in meta}
    known = set(_words_in(list(entries.values())))
    # A skip word is passed over, unless an entry lists it as a time's own ("th": Thursday, "m":
    # minute); in the rewriting rules it only stands beside a digit or a naming word.
    rules = ("simplifications", "relative-type-regex")
    listed = set(_words_in([value for key, value in entries.items() if key not in rules]))
    skip = [*info.get("skip", []), *info.get("pertain", [])]
    known -= set(_words_in(skip)) - listed
    numbers = {
        key
        for rule in info.get("simplifications", [])
        for key, value in rule.items()
        if key.isalpha() and value.isdigit()
    }
    short = {form.lower() for name in _NAMES for form in info.get(name, []) if form.lower() != name}
    return _Vocabulary(
        naming=frozenset(known - _JOINING),
        joining=frozenset(known & _JOINING),
        numbers=frozenset(numbers & known),
        short_forms=frozenset({*short, "may"}),
    )


def _normal(text: str) -> str:
    """As dateparser reads it: compatibility forms, accents dropped, lower-cased."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn").lower()


def may_name_time(text: str) -> bool:
    """False only when dateparser can find no time in ``text``: no digit, no word of its own that
    names a time, at most one of its joining words, and no number word with punctuation."""
    normal = _normal(text)
    if any(c.isdigit() for c in normal):
        return True
    v = _vocabulary()
    words = _WORD.findall(normal)
    joining = [w for w in words if w in v.joining]
    if len(joining) >= 2 or any(w in v.naming for w in words):
        return True
    return bool(joining) and joining[0] in v.numbers and any(not (c.isalnum() or c.isspace()) for c in normal)


def _settings(now: datetime) -> dict[str, object]:
    return {
        "RELATIVE_BASE": now.astimezone(UTC).replace(tzinfo=None),
        "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False,
    }


def _window(moment: datetime, period: str) -> tuple[datetime, datetime]:
    day = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    if period == "year":
        return datetime(moment.year, 1, 1, tzinfo=UTC), datetime(moment.year + 1, 1, 1, tzinfo=UTC)
    if period == "month":
        start = datetime(moment.year, moment.month, 1, tzinfo=UTC)
        return start, (start + timedelta(days=32)).replace(day=1)
    if period == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    return day, day + timedelta(days=1)


def timeframe(text: str, now: datetime, budget_s: float = BUDGET_S) -> Timeframe | None:
    """The window of time the query names, relative to ``now``; none when it names none, or
    when it cannot be read within ``budget_s`` or placed in a window."""
    text = bounded(text)
    if not may_name_time(text):
        return None
    _loaded()  # once a process: dateparser's data, which is no query's cost
    try:
        return _read(text, now, time.monotonic() + budget_s)
    except _OverBudget:
        log.debug("no time read: the query's read passed %ss", budget_s)
        return None
    except (ValueError, OverflowError) as exc:  # a date no window holds (year 9999, year 1)
        log.debug("no time read: %s", exc)
        return None


def read_again(named: Timeframe, text: str, now: datetime) -> Timeframe | None:
    """The time ``named`` (read from ``text``) read relative to another ``now``: only the words
    that named it and the one before them ("before", "since") are read again, not the query."""
    at = text.find(named.said)
    before = text[: max(at, 0)].split()[-1:]
    return timeframe(" ".join([*before, named.said]), now)


def bounded(text: str) -> str:
    """The first ``MAX_WORDS`` words and ``MAX_CHARS`` characters of ``text``, less a word cut in
    two at the end, up to its ``MAX_TIME_WORDS``-th word that may name a time."""
    text = query_head(text, MAX_WORDS)
    if len(text) > MAX_CHARS:
        cut = text[:MAX_CHARS]
        head, space, _ = cut.rpartition(" ")
        text = head if space else cut
    timely = (word for word in _SPACED.finditer(text) if _may_name_time_alone(word.group()))
    for count, word in enumerate(timely, start=1):
        if count == MAX_TIME_WORDS:
            return text[: word.end()]
    return text


_SPACED = re.compile(r"\S+")


def _may_name_time_alone(word: str) -> bool:
    """Whether a word (as split at spaces) may be a time's: a digit, a word of dateparser's that
    names a time, or one of its number words ("one", "twelve"; "a" and "an" only join)."""
    normal = _normal(word)
    if any(c.isdigit() for c in normal):
        return True
    v = _vocabulary()
    return any(w in v.naming or (w in v.numbers and len(w) > 2) for w in _WORD.findall(normal))


@cache
def _loaded() -> None:
    """Loads dateparser's language data (a second or more, once a process) by reading one date:
    counted in a query's budget, it made the first query of a process name no time."""
    _read("1 May 2023", datetime(2023, 5, 2, tzinfo=UTC))


class _OverBudget(Exception):
    pass


def _spent(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise _OverBudget


def _read(text: str, now: datetime, deadline: float = float("inf")) -> Timeframe | None:
    # dateparser ships no types (typeshed's stubs are a package of their own)
    from dateparser.date import DateDataParser  # type: ignore[import-untyped]
    from dateparser.search import search_dates  # type: ignore[import-untyped]

    settings = _settings(now)
    try:
        found = search_dates(text, languages=["en"], settings=settings) or []
    except (ValueError, OverflowError) as exc:  # dateparser's own, on odd input: no time named
        log.debug("no time read: %s", exc)
        return None
    _spent(deadline)
    found = [said for said, _ in found if not _BARE_NUMBER.match(said)]
    parser = DateDataParser(languages=["en"], settings=settings)

    def reads(said: str) -> bool:
        return parser.get_date_data(said).date_obj is not None

    phrases = [said for said in _phrases(text, found, reads) if not _bare_short_form(said)]
    if not phrases:
        return None
    _spent(deadline)
    said = phrases[0]
    if len(phrases) > 1:  # "April" ... "2023" found apart: read them as one when they are one
        first, last = text.find(phrases[0]), text.find(phrases[-1]) + len(phrases[-1])
        if 0 <= first < last and parser.get_date_data(text[first:last]).date_obj is not None:
            said = text[first:last]
        _spent(deadline)
    data = parser.get_date_data(said)
    if data.date_obj is None:
        return None
    start, end = _window(data.date_obj, data.period or "day")
    before = text[: max(text.find(said), 0)].lower().split()
    if said.lower().split()[0] in _OPEN_BEFORE | _OPEN_AFTER:
        before = [said.lower().split()[0]]
    if before and before[-1] in _OPEN_BEFORE:
        return Timeframe(said, None, start)
    if before and before[-1] in _OPEN_AFTER:
        return Timeframe(said, start if before[-1] == "since" else end, None)
    return Timeframe(said, start, end)
