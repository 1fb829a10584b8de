"""Plain-text tables for the terminal, shared by the commands that print them."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def p_text(value: float | None) -> str:
    """A p-value as printed: three decimals, or scientific below 0.001; "—" for none."""
    if value is None:
        return "—"
    if value == 0.0:
        return "0"
    return f"{value:.3f}" if value >= 0.001 else f"{value:.1e}"


def table(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    """The rows as aligned lines, indented by two spaces; the first row is the header, ruled
    below; the columns numbered in ``right`` are aligned right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for number, row in enumerate(rows):
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append(("  " + "  ".join(cells)).rstrip())
        if number == 0:
            lines.append("  " + "  ".join("-" * width for width in widths))
    return lines
