"""Time named in a query ("in May 2023", "last year", "before June", "on 3 June, 2023"), read by
``dateparser`` and turned into a window on ``created_at``.

``dateparser`` finds the expression and its date, relative to ``now`` (the request's, else the
tenant's newest memory), and says how precise it is (day, week, month, year): the window is that
whole day, week, month or year. A ``before``/``until`` or ``after``/``since`` right before the
expression opens the window on that side. A bare number ("10", "18th") is never read as a date.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

log = logging.getLogger(__name__)

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


def timeframe(text: str, now: datetime) -> Timeframe | None:
    """The window of time the query names, relative to ``now``; none when it names none."""
    # dateparser ships no types (typeshed's stubs are a package of their own)
    from dateparser.date import DateDataParser  # type: ignore[import-untyped]
    from dateparser.search import search_dates  # type: ignore[import-untyped]

    settings = _settings(now)
    try:
        found = search_dates(text, languages=["en"], settings=settings) or []
    except (ValueError, OverflowError) as exc:  # dateparser's own, on odd input: no time named
        log.debug("no time read from %r: %s", text, exc)
        return None
    found = [(said, moment) for said, moment in found if not _BARE_NUMBER.match(said)]
    if not found:
        return None
    parser = DateDataParser(languages=["en"], settings=settings)
    said = found[0][0]
    if len(found) > 1:  # "April", "10, 2023" found apart: read them as one when they are one
        first, last = text.find(found[0][0]), text.find(found[-1][0]) + len(found[-1][0])
        if 0 <= first < last and parser.get_date_data(text[first:last]).date_obj is not None:
            said = text[first:last]
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
