"""Evaluators of the tool calls in a run's trace: which input a tool was called with
(``tool_called_with``) and in which order the tools were called (``tool_sequence``).

Both read the ``tool_call`` events of the trace, whoever recorded them: the agent's own event
stream, or ATP's mock tool server, which records every call an agent makes to a declared tool.
A call is one event; its tool is the payload's ``tool``, compared as it is written (case and all).

``tool_called_with``
    Passes when a call of ``tool`` has an input that matches::

        - type: tool_called_with
          config:
            tool: web_search
            input: {query: climate, filters: {region: eu}}   # a subset of the call's input
            input_regex: {query: "^clim", filters.region: "^(eu|us)$"}
            call: 1          # optional: only the first call of the tool (-1: the last)
            # or times: N (exactly N matching calls; 0: none) or min_times: N (at least N)

    ``input`` is a subset of the call's input: every key it gives is in the input, with an
    equal value. A mapping is compared the same way, as a subset (keys not given are not
    looked at), at any depth. A list is compared item by item: the input's list has as many
    items, in the same order, each compared by these rules (so a mapping inside a list is a
    subset too). Text is compared exactly (case included); numbers by value (``1`` equals
    ``1.0``); ``true``/``false`` equal only themselves (not ``1``/``0``); ``null`` equals only a
    key that is there with the value null.

    ``input_regex`` maps fields to regular expressions. A field is a dotted path into the
    input: ``query``, ``filters.region``; a part made of digits picks an item of a list
    (``urls.0``); a key with a dot in its name cannot be named. The field's value must be
    there, and its text must match the expression (``regex`` module search: anywhere in the
    text unless anchored with ``^``/``$``; ``(?i)`` ignores case). The text of a value that is
    not text is its JSON: ``true``, ``3``, ``{"a": 1}``. Each match may take at most
    ``regex_timeout_seconds`` (the evaluator setting, 1 s by default, as for ``contains``); a
    match stopped at the limit fails the check.

    An input sent as JSON text holding an object (as some frameworks send tool arguments) is
    read as that object.

    Without ``call``, ``times`` or ``min_times``, one matching call is enough. ``call: N`` looks
    only at the N-th call of the tool (1 the first, -1 the last, -2 the one before). ``times``
    and ``min_times`` count the matching calls. The score is the fraction of the conditions
    (the top-level keys of ``input`` and the fields of ``input_regex``) that the closest call
    meets; with ``times``/``min_times``, the share of the count reached.

``tool_sequence``
    The order of all tool calls (of any tool) against ``tools: [a, b, c]``, by ``mode``:

    - ``in_order`` (the default): the listed tools were called in this order, other calls
      allowed before, between and after; a tool listed twice must be called twice (``[a, b]``
      passes for ``a x b y`` and fails for ``b a``). Score: the share of the list found in order.
    - ``exact``: the calls are exactly the list: the same tools, in the same order, as many,
      nothing else. Score: the length of the common start over the longer of the two.
    - ``any_order``: each listed tool was called at least as many times as it is listed, in
      any order; other calls allowed. Score: the share of the listed calls made.
    - ``subset``: every call is of a listed tool (the agent used only these; a run with no
      tool calls passes). Score: the share of the calls that are of listed tools.
    - ``superset``: every listed tool was called at least once; other calls allowed. Score:
      the share of the listed tools called.

A failed check says what the trace shows, in its message and its ``details``: the calls of the
tool with their inputs (bounded previews, secrets masked) and, for each, which field did not
match; the sequence of calls (the first :data:`SHOWN_SEQUENCE` and how many more) and where it
diverged from the list: the first missing or unexpected position.

Configs that would check nothing (no ``input`` nor ``input_regex``, an empty list, ``call: 0``,
``min_times: 0``) and expressions that do not compile are refused when the suite loads.

The evaluators live in modules of their own, whose public names can be imported from here too:
:mod:`~atp.evaluators.tool_called_with`, :mod:`~atp.evaluators.tool_sequence`, how the first
compares a call's input (:mod:`~atp.evaluators.tool_input`) and what both share
(:mod:`~atp.evaluators.tool_reading`).
"""

from atp.evaluators.behavior import INLINE_EVENTS
from atp.evaluators.tool_called_with import (
    DETAIL_CALLS,
    INPUT_CHARS,
    SHOWN_CALLS,
    SHOWN_MISMATCHES,
    CallSeen,
    Found,
    ToolCalledWith,
    ToolCalledWithConfig,
    find_calls,
    wants_text,
)
from atp.evaluators.tool_input import MAX_JSON_INPUT, MISMATCH_CHARS, RegexTimedOut, as_input, parse_field
from atp.evaluators.tool_reading import CHECKPOINT_EVERY, SHOWN_MATCHED
from atp.evaluators.tool_sequence import (
    EXPECTED,
    FOLLOW,
    MODES,
    SHOWN_SEQUENCE,
    Calls,
    Mode,
    ToolSequence,
    ToolSequenceConfig,
    Verdict,
    follow_any_order,
    follow_exact,
    follow_in_order,
    follow_subset,
    follow_superset,
    read_sequence,
)

__all__ = [
    "CHECKPOINT_EVERY",
    "DETAIL_CALLS",
    "EXPECTED",
    "FOLLOW",
    "INLINE_EVENTS",
    "INPUT_CHARS",
    "MAX_JSON_INPUT",
    "MISMATCH_CHARS",
    "MODES",
    "SHOWN_CALLS",
    "SHOWN_MATCHED",
    "SHOWN_MISMATCHES",
    "SHOWN_SEQUENCE",
    "CallSeen",
    "Calls",
    "Found",
    "Mode",
    "RegexTimedOut",
    "ToolCalledWith",
    "ToolCalledWithConfig",
    "ToolSequence",
    "ToolSequenceConfig",
    "Verdict",
    "as_input",
    "find_calls",
    "follow_any_order",
    "follow_exact",
    "follow_in_order",
    "follow_subset",
    "follow_superset",
    "parse_field",
    "read_sequence",
    "wants_text",
]
