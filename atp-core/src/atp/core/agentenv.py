"""What an agent is given in ``context.environment`` of every request (the protocol's place for
secrets: "Secrets MUST be passed via context.environment").

Two keys of an agent's definition fill it, the same for every agent type::

    agents:
      - name: research
        type: http
        endpoint: http://127.0.0.1:8000
        env: {REGION: eu-west}             # plain values (an adapter setting, ${VAR} replaced)
        secrets: [SEARCH_API_KEY]          # ATP's environment variable, sent under its name
        # or, to send it under another name:  secrets: {API_KEY: SEARCH_API_KEY}

``secrets`` names environment variables of ATP, never values: a value is never written in a
file. Each one is read when the agent is resolved (before any run): a variable that is not set,
or whose value is too short to be masked (under 4 characters), holds a NUL byte or is larger
than :data:`MAX_VALUE_BYTES`, is an error naming the agent and the variable. Every value is
masked (``***``) in everything ATP writes. ``env`` is the adapter's setting (an adapter says
what it sends with :meth:`~atp.core.adapter.Adapter.request_environment`); a name in both is an
error. How the environment reaches an agent that does not speak ATP is the adapter's to say
(docs/agents.md, "Secrets and context.environment").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from atp.core.secrets import MIN_SECRET_LENGTH

MAX_ENTRIES = 256
"""The most variables one agent's ``secrets`` (and, with them, its ``env``) may send."""
MAX_VALUE_BYTES = 64 * 1024
"""The largest value of one secret, in bytes of UTF-8."""
MAX_TOTAL_BYTES = 1024 * 1024
"""The most bytes the whole environment sent with a request may hold (names and values)."""
VARIABLE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
"""An environment variable name: letters, digits and ``_``, not starting with a digit."""
MAX_NAME_CHARS = 256
_NAME = re.compile(VARIABLE_NAME + r"\Z")


def is_variable_name(value: object) -> TypeGuard[str]:
    """Whether ``value`` is an environment variable name (:data:`VARIABLE_NAME`, at most
    :data:`MAX_NAME_CHARS` characters): what ``secrets`` and a network agent's ``env`` name."""
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS and _NAME.match(value) is not None


class EnvironmentProblem(ValueError):
    """What is wrong with an agent's ``secrets`` (or its environment as a whole)."""


def _name(value: Any, what: str) -> str:
    if not is_variable_name(value):
        shown = repr(value)[:80]
        raise EnvironmentProblem(
            f"{what} {shown} is not an environment variable name (letters, digits and _, not starting with a digit)"
        )
    return value


def secret_sources(spec: Any) -> dict[str, str]:
    """``secrets`` as ``{name sent: variable read}``: a list of variable names (each sent under
    its own name) or a mapping of the name sent to the variable read."""
    if spec is None:
        return {}
    pairs: list[tuple[Any, Any]]
    if isinstance(spec, list):
        pairs = [(item, item) for item in spec]
    elif isinstance(spec, dict):
        pairs = list(spec.items())
    else:
        raise EnvironmentProblem(
            "'secrets' must be a list of environment variable names ([API_KEY]) or a mapping of the "
            "name sent to the variable read ({API_KEY: MY_SERVICE_KEY})"
        )
    if len(pairs) > MAX_ENTRIES:
        raise EnvironmentProblem(f"'secrets' names {len(pairs)} variables; at most {MAX_ENTRIES} may be sent")
    sources: dict[str, str] = {}
    for sent, variable in pairs:
        sent = _name(sent, "the secret name")
        if sent in sources:
            raise EnvironmentProblem(f"'secrets' names {sent} twice")
        sources[sent] = _name(variable, f"the variable of secret {sent}")
    return sources


def read_secrets(spec: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets ``spec`` names, read from ``environ``: ``{name sent: value}``. Raises
    :class:`EnvironmentProblem` naming the variable that is not set or cannot be sent."""
    values: dict[str, str] = {}
    for sent, variable in secret_sources(spec).items():
        which = f"secret {sent}" + (f" (read from {variable})" if variable != sent else "")
        value = environ.get(variable)
        if value is None:
            raise EnvironmentProblem(
                f"{which}: the environment variable {variable} is not set; set it in ATP's environment "
                f"(its value is sent in context.environment, never written in a file)"
            )
        if len(value) < MIN_SECRET_LENGTH:
            raise EnvironmentProblem(
                f"{which}: the value of {variable} has {len(value)} characters; a secret needs at least "
                f"{MIN_SECRET_LENGTH} to be masked in what ATP writes (send a plain value with 'env')"
            )
        if "\0" in value:
            raise EnvironmentProblem(f"{which}: the value of {variable} holds a NUL byte (\\0)")
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise EnvironmentProblem(f"{which}: the value of {variable} is not valid UTF-8 text") from None
        if size > MAX_VALUE_BYTES:
            raise EnvironmentProblem(
                f"{which}: the value of {variable} has {size} bytes; at most {MAX_VALUE_BYTES} may be sent"
            )
        values[sent] = value
    return values


def request_environment(plain: Mapping[str, str], secrets: Mapping[str, str]) -> dict[str, str]:
    """The ``context.environment`` of every request: ``plain`` values and ``secrets`` together.
    A name in both, too many variables or too many bytes is an :class:`EnvironmentProblem`."""
    both = sorted(set(plain) & set(secrets))
    if both:
        raise EnvironmentProblem(
            f"{', '.join(both)} is named in both 'env' and 'secrets'; send each variable from one of them"
        )
    merged = {**plain, **secrets}
    if len(merged) > MAX_ENTRIES:
        raise EnvironmentProblem(
            f"'env' and 'secrets' send {len(merged)} variables; at most {MAX_ENTRIES} may be sent"
        )
    size = sum(
        len(k.encode("utf-8", "replace")) + len(v.encode("utf-8", "replace")) for k, v in merged.items()
    )
    if size > MAX_TOTAL_BYTES:
        raise EnvironmentProblem(
            f"'env' and 'secrets' send {size} bytes; at most {MAX_TOTAL_BYTES} may be sent with each request"
        )
    return merged
