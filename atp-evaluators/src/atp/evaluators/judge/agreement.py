"""How well two raters agree: Cohen's kappa on pass/fail, Spearman's rank correlation on
scores, and the confusion counts. Pure functions over lists, for ``atp judge calibrate``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple


class Confusion(NamedTuple):
    """The judge's pass/fail against the people's, a pass counted as positive."""

    both_pass: int
    judge_only_pass: int
    """The judge passed what people failed (a false pass: the costly kind for a CI gate)."""
    people_only_pass: int
    """The judge failed what people passed."""
    both_fail: int

    @property
    def total(self) -> int:
        return sum(self)

    @property
    def agreement(self) -> float | None:
        return (self.both_pass + self.both_fail) / self.total if self.total else None


def confusion(judge: Sequence[bool], people: Sequence[bool]) -> Confusion:
    if len(judge) != len(people):
        raise ValueError("the two ratings differ in length")
    pairs = list(zip(judge, people, strict=True))
    return Confusion(
        both_pass=sum(1 for j, p in pairs if j and p),
        judge_only_pass=sum(1 for j, p in pairs if j and not p),
        people_only_pass=sum(1 for j, p in pairs if not j and p),
        both_fail=sum(1 for j, p in pairs if not j and not p),
    )


def cohen_kappa(judge: Sequence[bool], people: Sequence[bool]) -> float | None:
    """Cohen's kappa: (observed - chance agreement) / (1 - chance agreement). ``None`` when it
    is undefined: no ratings, or both raters gave one and the same answer throughout."""
    table = confusion(judge, people)
    n = table.total
    if n == 0:
        return None
    observed = (table.both_pass + table.both_fail) / n
    judge_pass = (table.both_pass + table.judge_only_pass) / n
    people_pass = (table.both_pass + table.people_only_pass) / n
    chance = judge_pass * people_pass + (1 - judge_pass) * (1 - people_pass)
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties given the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        rank = (start + end) / 2 + 1
        for position in range(start, end + 1):
            result[order[position]] = rank
        start = end + 1
    return result


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n != len(y):
        raise ValueError("the two ratings differ in length")
    if n < 2:
        return None
    mean_x, mean_y = sum(x) / n, sum(y) / n
    sxx = sum((a - mean_x) ** 2 for a in x)
    syy = sum((b - mean_y) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    return sxy / math.sqrt(sxx * syy)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's correlation of the ranks (ties averaged). ``None`` with fewer
    than two pairs or when either side is constant."""
    return pearson(ranks(x), ranks(y))
