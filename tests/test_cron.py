"""Cron expressions: 6 fields, seconds first, UTC; a 5-field one never silently runs hourly."""

import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.kubeflow.cron import normalise


def test_a_5_field_cron_gets_a_seconds_field_and_a_note():
    cron = normalise("0 2 * * *")
    assert cron.expression == "0 0 2 * * *"
    assert "5-field" in cron.note and "'0 0 2 * * *'" in cron.note
    assert cron.describe() == "every day at 02:00:00 UTC"


def test_a_6_field_cron_is_kept_as_it_is():
    cron = normalise("30  15 4 * * MON-FRI")
    assert (cron.expression, cron.note) == ("30 15 4 * * MON-FRI", None)
    assert cron.describe() == "at 04:15:30 UTC on weekdays MON-FRI"


def test_an_hourly_6_field_cron_says_so():
    assert normalise("0 2 * * * *").describe() == "every hour at 02:00 past (UTC)"


@pytest.mark.parametrize(
    ("given", "expected"),
    [("@daily", "0 0 0 * * *"), ("@HOURLY", "0 0 * * * *"), ("@weekly", "0 0 0 * * 0")],
)
def test_descriptors_are_spelled_out(given, expected):
    assert normalise(given).expression == expected


@pytest.mark.parametrize(
    "given",
    ["*/15 * * * *", "0 0 1,15 * ?", "0 0 2 ? JAN-MAR SUN", "0 0/30 8-18 * * 1-5", "@yearly"],
)
def test_valid_expressions_pass(given):
    assert len(normalise(given).expression.split()) == 6


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("0 25 * * *", "hour 25 is out of range 0-23"),
        ("0 0 0 32 * *", "day of month 32 is out of range 1-31"),
        ("0 0 2 * * 7", "day of week 7 is out of range 0-6"),
        ("* * *", "expected 5 fields"),
        ("0 0 0 1 1 * 2027", "got 7"),
        ("", "got 0"),
        ("0 0 0 * * FUNDAY", "'FUNDAY' is not a number"),
        ("0 0 5-2 * * *", "range '5-2' is backwards"),
        ("0 */0 * * * *", "a step of 0"),
        ("? 0 0 * * *", "'?' is allowed only in the day fields"),
        ("0 0 2 * * %", "cannot read '%'"),
        ("@every 1h", "expected 5 fields"),
    ],
)
def test_bad_expressions_say_what_is_wrong(given, message):
    with pytest.raises(RagsweepError, match="cron") as error:
        normalise(given)
    assert message in str(error.value)
