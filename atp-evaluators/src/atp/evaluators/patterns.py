"""Regular expressions of a suite, matched against an agent's text with a time limit: compiled by
the ``regex`` module (the syntax of Python's ``re``, whose matches can be stopped), and the
setting ``regex_timeout_seconds`` of the evaluators that match them (``contains``, ``schema``,
``tool_called_with``, ``custom_command``)."""

import math
from typing import Annotated, Any

import msgspec

from atp.core.errors import ConfigError
from atp.core.plugins import require

REGEX_TIMEOUT_SECONDS = 1.0
"""How long one regex match of ``contains`` may take, unless the evaluator setting
``regex_timeout_seconds`` says otherwise."""


def compile_regex(
    pattern: str,
    ignore_case: bool,
    key: str = "pattern",
    feature: str = "the contains evaluator with regex: true",
) -> Any:
    """``pattern`` compiled by the ``regex`` module (the syntax of Python's ``re``), whose
    matches can be given a time limit (``search(text, timeout=..., concurrent=True)`` raises
    TimeoutError past it); ValueError naming the config ``key`` when it is not a valid
    expression. ``feature`` is what needs the module, should it be missing."""
    rx = require("regex", install="atp-evaluators", feature=feature)
    try:
        return rx.compile(pattern, rx.V0 | (rx.IGNORECASE if ignore_case else 0))
    except rx.error as exc:
        raise ValueError(f"'{key}' is not a valid regular expression: {exc}") from None


class RegexSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The settings of evaluators that match regular expressions (``contains``, ``schema``,
    ``tool_called_with``)."""

    regex_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = REGEX_TIMEOUT_SECONDS
    """How long one match may take."""


def regex_timeout(settings: Any, evaluator: str) -> float:
    """The time limit of one regex match: the evaluator setting ``regex_timeout_seconds`` (a
    number, or text holding one, as a ``${VAR}`` gives it)."""
    value = settings.get("regex_timeout_seconds", REGEX_TIMEOUT_SECONDS)
    try:
        seconds = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):  # (an int too large for a float: not a number here)
        seconds = math.nan
    if not (0 < seconds <= 3600):
        raise ConfigError(
            f"evaluators.{evaluator}.regex_timeout_seconds must be a positive number of seconds, "
            f"not {value!r}"
        )
    return seconds
