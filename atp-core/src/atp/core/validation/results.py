"""What ``atp validate`` finds: the checks by name, one check's outcome, and the whole validation's."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["CHECKS", "CheckResult", "ValidationOutcome"]

CHECKS = {
    "reachable": "reachable",
    "probe": "answers a probe",
    "events": "events",
    "malformed": "refuses a malformed request",
    "version": "refuses major version 2",
}
"""The checks, by name, with the title each is shown with, in the order they run."""


class CheckResult(msgspec.Struct):
    """The outcome of one check (``passed``, ``failed`` or ``skipped``): a summary, and for a
    failure what was seen and the fix; ``notes`` for what passed but could be better."""

    name: str
    title: str
    outcome: str
    summary: str
    seen: list[str] = msgspec.field(default_factory=list)
    fix: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)
    seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The check as ``atp validate --json`` shows it: what is empty left out, the time
        rounded to the millisecond."""
        data: dict[str, Any] = {
            "name": self.name,
            "title": self.title,
            "outcome": self.outcome,
            "summary": self.summary,
        }
        if self.seen:
            data["seen"] = self.seen
        if self.fix:
            data["fix"] = self.fix
        if self.notes:
            data["notes"] = self.notes
        if self.seconds is not None:
            data["seconds"] = round(self.seconds, 3)
        return data


class ValidationOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The checks of one agent as they ended: ``results`` in the order they ran (those not run
    left out), how many checks there were (``expected``: ATP's and the adapter's), the signal
    that stopped them if one did, and ``foreign``: the protocol the agent speaks when ATP's own
    refusal checks were skipped for it."""

    results: list[CheckResult]
    expected: int
    stopped_by: int | None = None
    foreign: str | None = None

    @property
    def failed(self) -> int:
        """How many checks failed."""
        return sum(1 for r in self.results if r.outcome == "failed")

    @property
    def interrupted(self) -> bool:
        """Whether Ctrl-C or SIGTERM stopped the checks."""
        return self.stopped_by is not None

    @property
    def ok(self) -> bool:
        """Whether every check ran and none failed."""
        return self.failed == 0 and not self.interrupted and len(self.results) == self.expected
