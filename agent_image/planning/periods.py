"""Time periods named in a request ("October 2026", "last 7 days") as half-open ranges."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): index for index, name in enumerate(calendar.month_abbr) if name}
MONTHS["sept"] = 9
MONTH_WORDS = "|".join(sorted(MONTHS, key=len, reverse=True))
MONTH_YEAR = re.compile(rf"\b({MONTH_WORDS})\.?(?:\s+|\s*,\s*)(\d{{4}})\b", re.I)
MONTH_CONTEXT = re.compile(
    rf"\b(?:for|in|of|during|from|since|throughout)\s+(?:the\s+month\s+of\s+)?"
    rf"({MONTH_WORDS})\b\.?",
    re.I,
)
MONTH_BARE = re.compile(
    r"\b(" + "|".join(w for w in sorted(MONTHS, key=len, reverse=True) if w != "may") + r")\b",
    re.I,
)
YEAR = re.compile(r"\b(20\d{2})\b")
LAST_DAYS = re.compile(r"\b(?:last|past)\s+(\d{1,3})\s+days?\b", re.I)


@dataclass(frozen=True)
class Period:
    """A half-open time range [start, end) named by a request."""

    start: datetime
    end: datetime
    label: str

    @staticmethod
    def _iso(value: datetime) -> str:
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def after(self) -> str:
        return self._iso(self.start)

    @property
    def before(self) -> str:
        return self._iso(self.end)


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return Period(start, end, f"{calendar.month_name[month]} {year}")


def _latest_year_of(month: int, now: datetime) -> int:
    """The year of the latest `month` that has begun by `now`: orders "for October" asked
    in January are last year's, never a month still to come."""
    return now.year if month <= now.month else now.year - 1


def parse_period(text: str, now: datetime, *, loose: bool = False) -> Period | None:
    """The period a request names: "October" (the latest October that has begun: in
    January, last year's), "October 2025", "last month",
    "this month", "last 30 days"; None when it names none. A month needs "for", "in",
    "of"... before it unless `loose` (feedback such as "Only September, please"); "may"
    never counts alone."""
    found = MONTH_YEAR.search(text)
    if found:
        return _month(int(found.group(2)), MONTHS[found.group(1).lower()])
    found = MONTH_CONTEXT.search(text)
    if found is None and loose:
        found = MONTH_BARE.search(text)
    if found:
        year_found = YEAR.search(text)
        month = MONTHS[found.group(1).lower()]
        year = int(year_found.group(1)) if year_found else _latest_year_of(month, now)
        return _month(year, month)
    lowered = text.lower()
    if "last month" in lowered or "previous month" in lowered:
        first = now.replace(day=1)
        previous = first - timedelta(days=1)
        return _month(previous.year, previous.month)
    if "this month" in lowered:
        return _month(now.year, now.month)
    days = LAST_DAYS.search(text)
    if days:
        end = now.astimezone(UTC).replace(microsecond=0)
        return Period(end - timedelta(days=int(days.group(1))), end, f"the last {days[1]} days")
    return None
