"""Numbers from outside ATP checked against bounds, one way everywhere.

An agent's metrics and events, a judge's usage, a baseline or a run file read back, a
command-line option: each may hold NaN, an infinity, a boolean where a number belongs, or a
value so large that the sums and statistics made of it overflow. :func:`number_in` is the
check, for every way a number comes in.
"""

from __future__ import annotations

import math

__all__ = ["number_in"]


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
