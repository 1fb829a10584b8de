"""How long an agent asks ATP to wait before it tries again: ``Retry-After`` in delta-seconds or as
an HTTP-date, ``retry-after-ms``, bounded, and nothing from what makes no sense."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from atp.adapters.network import MAX_RETRY_AFTER, TRANSIENT_STATUSES, is_transient, retry_after
from atp.core.retry import MAX_RETRY_AFTER_SECONDS

NOW = 1_800_000_000.0
"""A fixed "now" (2027-01-15), for the dates."""


def date(offset: float) -> str:
    return formatdate(NOW + offset, usegmt=True)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2", 2.0),
        ("0", 0.0),
        ("120", 120.0),
        (" 7 ", 7.0),
        ("1.5", 1.5),
        ("0.25", 0.25),
    ],
)
def test_delta_seconds(value: str, seconds: float) -> None:
    assert retry_after({"Retry-After": value}, now=NOW) == seconds


def test_an_http_date_is_the_seconds_from_now() -> None:
    assert retry_after({"Retry-After": date(30)}, now=NOW) == 30.0
    assert retry_after({"Retry-After": date(119)}, now=NOW) == 119.0


def test_an_http_date_in_the_past_is_no_wait() -> None:
    assert retry_after({"Retry-After": date(-3600)}, now=NOW) == 0.0
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_the_obsolete_date_formats_are_read_too() -> None:
    assert retry_after({"Retry-After": "Sunday, 06-Nov-94 08:49:37 GMT"}) == 0.0
    assert retry_after({"Retry-After": "Sun Nov  6 08:49:37 1994"}) == 0.0


@pytest.mark.parametrize(
    "value",
    [
        "",
        "soon",
        "-5",
        "1e3",
        "nan",
        "inf",
        "2 seconds",
        "1,5",
        "0x10",
        "Wed, 99 Foo 2015 07:28:00 GMT",
    ],
)
def test_what_makes_no_sense_is_no_wait_at_all(value: str) -> None:
    assert retry_after({"Retry-After": value}, now=NOW) is None


def test_a_long_wait_is_cut_where_the_runner_cuts_it() -> None:
    assert MAX_RETRY_AFTER == MAX_RETRY_AFTER_SECONDS == 120.0  # what the message says is what ATP waits
    assert retry_after({"Retry-After": "121"}, now=NOW) == 120.0
    assert retry_after({"Retry-After": "86400"}, now=NOW) == 120.0
    assert retry_after({"Retry-After": "9" * 400}, now=NOW) == 120.0  # (more digits than a float holds)
    assert retry_after({"Retry-After": date(7 * 86400)}, now=NOW) == 120.0


def test_retry_after_ms_is_milliseconds_and_wins() -> None:
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after-ms": "1500.5"}) == 1.5005
    assert retry_after({"retry-after-ms": "250", "Retry-After": "5"}) == 0.25
    assert retry_after({"retry-after-ms": "10000000"}) == 120.0
    # (one that makes no sense leaves Retry-After to say)
    assert retry_after({"retry-after-ms": "soon", "Retry-After": "5"}) == 5.0
    assert retry_after({"retry-after-ms": "-1"}) is None


def test_headers_of_any_kind_and_case() -> None:
    httpx = pytest.importorskip("httpx")
    assert retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert retry_after({"RETRY-AFTER": "3"}) == 3.0
    assert retry_after([("Retry-After", "4"), ("X-Other", "1")]) == 4.0
    assert retry_after([("retry-after", b"6")]) == 6.0
    assert retry_after({}) is None
    assert retry_after(None) is None
    assert retry_after({"Content-Type": "text/plain"}) is None


def test_the_transient_statuses() -> None:
    assert sorted(TRANSIENT_STATUSES) == [429, 502, 503, 504]
    assert [status for status in range(100, 600) if is_transient(status)] == [429, 502, 503, 504]
