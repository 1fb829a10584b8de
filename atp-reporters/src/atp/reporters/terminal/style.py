"""How the console report looks on one stream: colour or not, ATP's symbols or their ASCII spelling.

Colour only on a terminal, never with ``NO_COLOR`` set (unless the caller forces it either way);
``✓``, ``σ``, ``±``... only when the stream can encode them, else ``PASS``, ``sd``, ``+/-``.
"""

from __future__ import annotations

import os
from typing import TextIO

from atp.core.bounds import number_in
from atp.core.results import PassRule

COLORS = {"green": "32", "red": "31", "yellow": "33", "dim": "2", "bold": "1"}
"""The ANSI SGR code of each colour the report uses."""
_ASCII = str.maketrans({"±": "+/-", "≤": "<=", "≥": ">=", "—": "-", "σ": "sd", "…": "...", "→": "->"})


def use_color(stream: TextIO, forced: bool | None = None) -> bool:
    if forced is not None:
        return forced
    if os.environ.get("NO_COLOR"):
        return False
    return isatty(stream)


def isatty(stream: TextIO) -> bool:
    """The stream is a terminal (a closed one, or one that cannot say, is not)."""
    is_a_tty = getattr(stream, "isatty", None)
    try:
        return bool(is_a_tty and is_a_tty())
    except (OSError, ValueError):  # a closed stream
        return False


def _can_encode(stream: TextIO, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class Style:
    """The look of the report on one stream: its colours, its symbols, and ATP's own wording
    (``±``, ``≤``, ``σ``, ``—``) spelt in ASCII when the stream cannot encode it."""

    def __init__(self, stream: TextIO, color: bool | None = None) -> None:
        self.color = use_color(stream, color)
        fancy = _can_encode(stream, "✓✗σ…±≤≥—")
        self.fancy = fancy
        self.symbols = {
            "passed": "✓" if fancy else "PASS",
            "failed": "✗" if fancy else "FAIL",
            "error": "!" if fancy else "ERROR",
            "skipped": "-" if fancy else "SKIP",
        }
        self.sigma = "σ" if fancy else "sd"

    def paint(self, text: str, color: str) -> str:
        if not self.color:
            return text
        return f"\033[{COLORS[color]}m{text}\033[0m"

    def text(self, text: str) -> str:
        """ATP's own wording for this stream: ``±``, ``≤``, ``σ``, ``—`` spelt in ASCII when
        the stream cannot encode them."""
        return text if self.fancy else text.translate(_ASCII)

    def number(self, value: float | None, spec: str = ".1f") -> str:
        """A figure, or ``—`` when it is undefined (``None``; never NaN)."""
        number = number_in(value)
        if number is None:
            return self.text("—")
        return format(number, spec)

    def interval(self, bounds: tuple[float, float] | None, spec: str = ".1f") -> str:
        if bounds is None:
            return self.text("—")
        return f"[{self.number(bounds[0], spec)}, {self.number(bounds[1], spec)}]"

    def rule(self, rule: PassRule) -> str:
        """A pass rule in brief: ``≥80%``, ``mean ≥60``."""
        if rule.rule == "pass_rate":
            return self.text(f"≥{(rule.threshold or 0.0) * 100:g}%")
        if rule.rule == "min_score":
            return self.text(f"mean ≥{rule.threshold or 0.0:g}")
        return "all runs pass"
