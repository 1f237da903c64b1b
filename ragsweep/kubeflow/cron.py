"""Cron expressions for recurring runs, checked and normalised to the 6-field, seconds-first
form that Kubeflow's ScheduledWorkflow controller reads, evaluated in UTC.

A 5-field expression is the common crontab form: ``0 2 * * *`` (02:00 every day) becomes
``0 0 2 * * *``. Sent unchanged it would read as second 0, minute 2, every hour: that is the
mistake this module exists to prevent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragsweep.core.errors import RagsweepError

_MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
_DAYS = "SUN MON TUE WED THU FRI SAT".split()
# name, lowest, highest, value names
_FIELDS = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DESCRIPTORS = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
_ITEM = re.compile(r"^(?P<range>\*|\?|[A-Za-z0-9]+(-[A-Za-z0-9]+)?)(/(?P<step>\d+))?$")


@dataclass(frozen=True)
class Cron:
    """A checked 6-field expression; ``note`` says how the given one was changed, if it was."""

    expression: str
    note: str | None = None

    def describe(self) -> str:
        """E.g. ``every day at 02:00:00 UTC``."""
        second, minute, hour, day, month, weekday = self.expression.split()
        every = {"*", "?"}
        if second.isdigit() and minute.isdigit() and day in every and month in every:
            if hour.isdigit():
                at = f"at {int(hour):02d}:{int(minute):02d}:{int(second):02d} UTC"
                return f"every day {at}" if weekday in every else f"{at} on weekdays {weekday}"
            if hour == "*" and weekday in every:
                return f"every hour at {int(minute):02d}:{int(second):02d} past (UTC)"
        return f"on the schedule '{self.expression}' (seconds first, UTC)"


def normalise(text: str) -> Cron:
    """Check a 5-field, 6-field or ``@daily``-style expression; return its 6-field form."""
    given = " ".join(text.split())
    if given.lower() in _DESCRIPTORS:
        return Cron(_DESCRIPTORS[given.lower()], f"'{given}' is '{_DESCRIPTORS[given.lower()]}'")
    parts = given.split(" ") if given else []
    note = None
    if len(parts) == 5:
        parts = ["0", *parts]
        note = (
            f"read the 5-field cron '{given}' as minute hour day-of-month month day-of-week "
            f"and sent it seconds first: '0 {given}'"
        )
    elif len(parts) != 6:
        raise RagsweepError(
            f"cron '{text}': expected 5 fields (minute hour day-of-month month day-of-week) "
            f"or 6 (seconds first), got {len(parts)}"
        )
    for part, field in zip(parts, _FIELDS, strict=True):
        _check_field(text, part, *field)
    return Cron(" ".join(parts), note)


def _check_field(text: str, part: str, name: str, low: int, high: int, names: dict) -> None:
    for item in part.split(","):
        match = _ITEM.match(item)
        if not match:
            raise RagsweepError(f"cron '{text}': {name} field '{part}': cannot read '{item}'")
        if match["range"] == "?" and name not in ("day of month", "day of week"):
            raise RagsweepError(f"cron '{text}': '?' is allowed only in the day fields")
        if match["step"] is not None and int(match["step"]) == 0:
            raise RagsweepError(f"cron '{text}': {name} field '{part}': a step of 0")
        if match["range"] in ("*", "?"):
            continue
        bounds = [_value(text, v, name, low, high, names) for v in match["range"].split("-")]
        if len(bounds) == 2 and bounds[0] > bounds[1]:
            raise RagsweepError(f"cron '{text}': {name} range '{item}' is backwards")


def _value(text: str, value: str, name: str, low: int, high: int, names: dict) -> int:
    if value.upper() in names:
        return names[value.upper()]
    if not value.isdigit():
        raise RagsweepError(f"cron '{text}': {name} field: '{value}' is not a number")
    number = int(value)
    if not low <= number <= high:
        raise RagsweepError(f"cron '{text}': {name} {number} is out of range {low}-{high}")
    return number
