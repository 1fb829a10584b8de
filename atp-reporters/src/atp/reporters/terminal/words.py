"""How the console report words figures, times, counts and lists of runs or tests.

Pure functions from a value to the text the report shows for it; none knows about colour or
the stream (see :mod:`atp.reporters.terminal.style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from atp.core.adaptive import Adaptive
from atp.core.bounds import number_in

PREVIEW_CHARS = 300
"""Agent text previewed or quoted in the report (an artifact's content, a retry's reason, a list
of check names) is cut at this many characters."""
MAX_IDS_SHOWN = 20
"""Test ids listed on one summary line (unstable tests, tests not in the run); the rest are counted."""


def finite(value: float | None) -> bool:
    """``value`` is a figure to show: a finite number, not ``None``."""
    return number_in(value) is not None


def p_text(value: float | None) -> str:
    """A p-value to two significant figures (``0.003``, ``0.03``, ``1``); ``—`` when undefined."""
    number = number_in(value)
    if number is None:
        return "—"
    return "0" if number == 0.0 else f"{number:.2g}"


def runs_label(runs: int, adaptive: Adaptive | None) -> str:
    """How many runs a test has planned: ``5``, or ``auto (3-20)`` for an adaptive run count."""
    return f"auto ({adaptive.min_runs}-{adaptive.max_runs})" if adaptive is not None else str(runs)


def run_labels(planned: set[tuple[int, Adaptive | None]]) -> list[str]:
    """The distinct run counts the tests plan, fixed ones first: ``["1", "5", "auto (3-20)"]``."""
    ordered = sorted(planned, key=lambda p: (p[1] is not None, p[0], p[1].min_runs if p[1] else 0))
    return list(dict.fromkeys(runs_label(runs, adaptive) for runs, adaptive in ordered))


def shown_path(path: Path) -> str:
    """A path relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def seconds(value: float) -> str:
    if value < 10:
        return f"{value:.2f}s"
    if value < 120:
        return f"{value:.1f}s"
    return f"{int(value // 60)}m{value % 60:04.1f}s"


def clock(value: float) -> str:
    """Whole seconds, for a time that ticks: ``7s``, ``2m05s``, ``1h02m05s``."""
    whole = max(int(value), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 error``, ``2 errors``."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def which_runs(numbers: Sequence[int]) -> str:
    """``run 2``, ``runs 1,3``, ``runs 1-4,7``."""
    if len(numbers) == 1:
        return f"run {numbers[0]}"
    spans: list[str] = []
    ordered = sorted(set(numbers))
    start = previous = ordered[0]
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        if previous - start >= 2:
            spans.append(f"{start}-{previous}")
        else:
            spans.extend(str(n) for n in range(start, previous + 1))
        if number is not None:
            start = previous = number
    return f"runs {','.join(spans)}"


def waited(value: float) -> str:
    """A retry's wait: ``0.5 s``, ``1.25 s``, ``30 s``."""
    number = number_in(value)
    return f"{round(number, 2):g} s" if number is not None else "? s"


def usd(value: float) -> str:
    """Money spent or allowed: ``$0.42``, ``$1.00``; ``$0.0031`` below a cent."""
    return f"${value:.4f}" if 0 < abs(value) < 0.01 else f"${value:.2f}"


def id_list(ids: Sequence[str]) -> str:
    """Test ids (each printable), at most :data:`MAX_IDS_SHOWN` of them, the rest counted."""
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")
