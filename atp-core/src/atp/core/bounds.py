"""Numbers from outside ATP checked against bounds, one way everywhere.

An agent's metrics and events, a judge's usage, a baseline or a run file read back, a
command-line option: each may hold NaN, an infinity, a boolean where a number belongs, or a
value so large that the sums and statistics made of it overflow. :func:`number_in` is the
check, for every way a number comes in; :func:`shown_number` words a value that failed it for
the message that says so (an integer of thousands of digits is named by its size, never
printed).

Counts and measurements from outside (tokens, steps, calls, seconds, dollars) are bounded by
:data:`MAX_COUNT`: no measurement is larger, and sums of up to a million such values stay exact
enough for statistics.
"""

from __future__ import annotations

import math

__all__ = ["MAX_BUDGET_USD", "MAX_COUNT", "number_in", "shown_bound", "shown_number"]

MAX_COUNT = 10**15
"""The largest count or measurement a number from outside may be (an agent's tokens, steps or
dollars, a judge's tokens): 10^15. An out-of-bounds value counts as this much wherever a limit
adds it up, so that no limit passes on it."""
MAX_BUDGET_USD = 1e9
"""The largest ``max_cost_usd`` a budget may have (the config's, ``--max-cost-usd``)."""

_SHOWN_CHARS = 40


def number_in(
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> float | None:
    """``value`` as a float when it is a finite real number (an int or a float, never a bool)
    within ``low``..``high`` (``low_open``/``high_open``: the bound itself excluded; ``integer``:
    an int, never a float); else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if integer and not isinstance(value, int):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    if not math.isfinite(number):
        return None
    if number < low or (low_open and number == low) or number > high or (high_open and number == high):
        return None
    return number


def shown_number(value: object) -> str:
    """``value`` (a number from outside, perhaps not a number at all) for a message: an
    integer of more than 20 digits by its size and sign, anything else by a short ``repr``."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        sign = "a negative" if value < 0 else "an"
        try:
            digits = f"{len(str(abs(value)))} digits"
        except ValueError:  # beyond Python's limit on converting an int to text
            digits = f"about {int(abs(value).bit_length() * math.log10(2)) + 1} digits"
        return f"{sign} integer of {digits}"
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ (an in-process agent's object)
        return f"a {type(value).__name__}"
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "…"
    if isinstance(value, (int, float)):
        return text
    return f"{type(value).__name__} {text}"


def shown_bound(number: float) -> str:
    """A bound for a message: ``100``, ``0.5``, ``1e6``, ``1e15`` (not ``1e+06``)."""
    text = f"{number:g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text
