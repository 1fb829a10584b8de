"""``atp validate`` in the kernel: check that an agent speaks ATP before anyone writes tests for it.

Five checks run in order, each through the agent's adapter (so they work for every agent type):

1. ``reachable``: the adapter starts and the agent's health check passes;
2. ``probe``: a small valid request is answered with a response that decodes, has status
   ``completed`` and carries the request's ``task_id``: a suite's test's task when a suite is
   given (:class:`~atp.core.validation.probe.ProbeTask`), else a generic greeting;
3. ``events``: the events sent during that probe are valid, carry the request's ``task_id``,
   come with strictly increasing sequence numbers, and the adapter warned about nothing;
4. ``malformed``: a request that breaks the schema is refused gracefully: a response with status
   ``failed`` (ideally ``error_code: INVALID_REQUEST``) or a refusal of the transport;
5. ``version``: a request of protocol version 2.0 is refused the same way.

Adapters add to them through the kernel's seam (:mod:`atp.core.adapter`): ``reachable`` shows
the agent's own health status (:meth:`~atp.core.adapter.Adapter.health`: ``degraded`` passes
with a note, ``unhealthy`` fails); the adapter's conformance checks of its protocol
(:meth:`~atp.core.adapter.Adapter.conformance`) run right after it, shown like these; and for an
agent that speaks another protocol than ATP (:attr:`~atp.core.adapter.Adapter.foreign_protocol`)
``malformed`` and ``version``, which send raw ATP requests, are skipped with the reason.

A check that an earlier failure makes meaningless is skipped. Each failure says what was seen
and what fixes it. Agent text shown is masked (the config's secrets), shortened and escaped.
:func:`run_validation` runs them and returns a :class:`ValidationOutcome`; the ``atp validate``
command only renders it.

Modules: :mod:`.results` (the Structs), :mod:`.run` (the order of the checks, closing, signals),
:mod:`.reachable`, :mod:`.conformance` and :mod:`.checks` (the checks), :mod:`.probe` and
:mod:`.sink` (one request and what came back), :mod:`.diagnosis` and :mod:`.exceptions` (what an
error means), :mod:`.context` (what the checks share).
"""

from __future__ import annotations

from atp.core.validation.context import CheckContext
from atp.core.validation.diagnosis import diagnose
from atp.core.validation.exceptions import described, error_text, single_exception
from atp.core.validation.probe import MALFORMED_WHAT, PROBE_DESCRIPTION, Answer, ProbeTask
from atp.core.validation.results import CHECKS, CheckResult, ValidationOutcome
from atp.core.validation.run import CLOSE_SECONDS, Validation, run_validation
from atp.core.validation.sink import (
    LOG_TAIL_LINES,
    MAX_DISORDER,
    MAX_WARNINGS,
    SEEN_CHARS,
    TASK_ID_CHARS,
    ProbeSink,
)

__all__ = [
    "CHECKS",
    "CLOSE_SECONDS",
    "LOG_TAIL_LINES",
    "MALFORMED_WHAT",
    "MAX_DISORDER",
    "MAX_WARNINGS",
    "PROBE_DESCRIPTION",
    "SEEN_CHARS",
    "TASK_ID_CHARS",
    "Answer",
    "CheckContext",
    "CheckResult",
    "ProbeSink",
    "ProbeTask",
    "Validation",
    "ValidationOutcome",
    "described",
    "diagnose",
    "error_text",
    "run_validation",
    "single_exception",
]
