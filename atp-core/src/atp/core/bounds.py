"""Numbers from outside ATP checked against bounds, one way everywhere.

An agent's metrics and events, a judge's usage, a baseline or a run file read back, a
command-line option: each may hold NaN, an infinity, a boolean where a number belongs, or a
value so large that the sums and statistics made of it overflow. :func:`number_in` is the
check; :func:`checked_number` is the same check for a setting, which fails with a message
naming what was wrong.
"""

from __future__ import annotations

import math

from atp.core.errors import ConfigError

__all__ = ["checked_number", "number_in"]


def number_in(
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float | None:
    """``value`` as a float when it is a finite real number (an int or a float, never a bool)
    within ``low``..``high`` (``low_open``/``high_open``: the bound itself excluded); else
    ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
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


def checked_number(
    value: object,
    what: str,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """:func:`number_in`, for a setting: a :class:`~atp.core.errors.ConfigError` saying what
    ``what`` must be when ``value`` is not within the bounds."""
    number = number_in(value, low, high, low_open=low_open, high_open=high_open)
    if number is None:
        below = "above" if low_open else "at least"
        above = "below" if high_open else "at most"
        parts = [
            f"{below} {low:g}" if math.isfinite(low) else "",
            f"{above} {high:g}" if math.isfinite(high) else "",
        ]
        bounds = " and ".join(p for p in parts if p)
        raise ConfigError(f"{what} must be a number{' ' + bounds if bounds else ''}, not {value!r}")
    return number
