"""JSON Schemas of the suite format and of ``atp.config.yaml``, for editors.

:func:`suite_schema` and :func:`config_schema` build JSON Schema draft-07 documents (the draft
YAML editors support, through yaml-language-server) from ATP's own Structs
(:class:`~atp.core.suite.SuiteSpec`, :class:`~atp.core.config.ConfigSpec`) and from the installed
plugins: each assertion's ``config`` is checked against its evaluator's ``Config``, each service's
key on a test or the suite's defaults (``tools``) against the service's ``Config``, each agent's
settings against its adapter's ``Settings``, each ``evaluators.<name>`` section against the
evaluator's ``Settings``, chosen by ``type`` (or name) with ``if``/``then``. A plugin class whose
Struct cannot be described as a JSON Schema is left unchecked (any mapping).

A schema describes the structure; what only ATP checks when a file loads (a regular expression
that does not compile, weights all 0, a test id used twice, an evaluator's own cross-field
rules) is not in it. ``atp schema suite`` and ``atp schema config`` print them.

:func:`struct_keys` lists a Struct's keys (name, type, required or default) for
``atp list-evaluators --verbose``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import msgspec.inspect as mi

from atp.core.agentenv import VARIABLE_NAME
from atp.core.config import ConfigDefaults, ConfigSpec
from atp.core.suite import (
    AssertionSpec,
    DefaultsSpec,
    ScoringSpec,
    SuiteSpec,
    TaskSpec,
    TestSpec,
    services_of,
)

if TYPE_CHECKING:
    from atp.core.adapter import Adapter
    from atp.core.evaluator import Evaluator
    from atp.core.service import Service

DRAFT = "http://json-schema.org/draft-07/schema#"
_REF = "#/definitions/{name}"
_MAX_TIMEOUT = 86400
_TIMEOUT = {"type": "number", "exclusiveMinimum": 0, "maximum": _MAX_TIMEOUT}
_VARIABLE = f"^{VARIABLE_NAME}$"
"""An environment variable name (an agent's ``secrets:``)."""

SUITE_DESCRIPTIONS: dict[type[msgspec.Struct], dict[str, str]] = {
    SuiteSpec: {
        "test_suite": "The suite's name.",
        "version": "The suite format's version (1.x).",
        "defaults": "Settings every test gets unless it sets its own.",
        "agents": "Agents to test: a name, a type (the adapter) and its settings; or only the name "
        "of an agent of atp.config.yaml.",
        "quarantine": "Ids of tests whose failures are reported but do not fail the run.",
        "tests": "The tests.",
    },
    TestSpec: {
        "id": "Unique within the suite.",
        "name": "Shown in reports (default: the id).",
        "tags": "For selecting tests: atp test --tags=smoke,core (either), smoke+fast (both), !slow (not).",
        "task": "What the agent is asked.",
        "constraints": "Sent to the agent; timeout_seconds is also enforced.",
        "assertions": "The checks of each run.",
        "runs_per_test": "How many times the test runs.",
        "skip": "true, or the reason: the test is listed as skipped and not run.",
    },
    TaskSpec: {
        "description": "The task, as the agent reads it.",
        "input_data": "Data for the task.",
        "expected_artifacts": "What the agent should produce: {type, format, name}, or a file name "
        "(report.md).",
        "workspace_fixture": "A folder, relative to the suite file, copied into a fresh workspace "
        "for every run.",
    },
    AssertionSpec: {
        "type": "Which evaluator checks it (atp list-evaluators).",
        "config": "What the evaluator checks (atp list-evaluators --verbose).",
        "name": "The check's name in reports.",
        "critical": "When its checks fail, the run fails, whatever its score.",
        "negate": "Reverse its checks' verdicts: it passes where it would fail, and fails where it would "
        "pass (a check with nothing to judge, like a missing artifact, still fails).",
    },
}

CONFIG_DESCRIPTIONS: dict[str, str] = {
    "version": "The config format's version (1.x).",
    "defaults": "Below the suites' own defaults.",
    "agents": "Agents by name: a type (the adapter) and its settings.",
    "evaluators": "Settings per evaluator, by its name; timeout_seconds limits one evaluation.",
    "reporting": "Default reporters, verbosity and where run directories go.",
    "limits": "What one run of an agent may send ATP.",
    "secrets": "Values masked as *** in everything ATP writes; ${VAR} reads the environment.",
    "plugins": "The project's own plugins: module names, or .py files relative to this file.",
    "budget": "What one atp test may spend before it starts no more runs (docs/reliability.md).",
    "quarantine_file": "A file of test ids (one per line) whose failures do not fail the run.",
    "executors": "Settings per executor (atp test --executor=NAME), like dask: {address: ...}.",
}


class _Components:
    """JSON Schema definitions of many Structs at once (msgspec names two Structs of one name
    apart), and the reference to each."""

    def __init__(self, types: list[Any]) -> None:
        usable: list[Any] = []
        for cls in dict.fromkeys(types):
            try:
                msgspec.json.schema(cls)
            except Exception:  # a type msgspec cannot describe: left unchecked
                continue
            usable.append(cls)
        refs, definitions = msgspec.json.schema_components(usable, ref_template=_REF)
        self.definitions: dict[str, Any] = dict(definitions)
        self._refs = dict(zip(usable, refs, strict=True))

    def ref(self, cls: Any) -> dict[str, Any] | None:
        """``{"$ref": ...}`` to the definition of ``cls``, or ``None`` when it has none."""
        found = self._refs.get(cls)
        return dict(found) if found is not None else None

    def definition(self, cls: Any) -> dict[str, Any] | None:
        """The object schema of the Struct ``cls`` (its definition), or ``None``."""
        ref = self.ref(cls)
        if ref is None or "$ref" not in ref:
            return None
        found = self.definitions.get(ref["$ref"].rsplit("/", 1)[-1])
        return found if isinstance(found, dict) and found.get("type") == "object" else None

    def add_aliases(self, *nested: type[msgspec.Struct]) -> None:
        """Each Struct's other spellings of its keys (its ``aliases``, :mod:`atp.core.spelling`)
        as properties of their own, described as such: the Structs described and ``nested``
        ones (defined by their name)."""
        for cls in (*self._refs, *nested):
            definition = self.definition(cls) or self.definitions.get(cls.__name__)
            properties = definition.get("properties", {}) if definition is not None else {}
            for alias, key in getattr(cls, "aliases", {}).items():
                if key in properties and alias not in properties:
                    properties[alias] = {
                        **{k: v for k, v in properties[key].items() if k != "description"},
                        "description": f"Another spelling of {key!r} (give one of them).",
                    }

    def inline(self, cls: Any) -> dict[str, Any]:
        """The definition of ``cls`` taken out of the definitions (for the root)."""
        ref = self.ref(cls)
        assert ref is not None and "$ref" in ref
        return dict(self.definitions.pop(ref["$ref"].rsplit("/", 1)[-1]))


def _describe(schema: dict[str, Any], descriptions: Mapping[str, str]) -> None:
    properties = schema.get("properties", {})
    for key, text in descriptions.items():
        found = properties.get(key)
        if found is None or "description" in found:
            continue
        if "$ref" in found:  # draft-07 ignores the keywords beside a $ref
            properties[key] = {"description": text, "allOf": [found]}
        else:
            properties[key] = {"description": text, **found}


def _type_choice(names: list[str], summaries: Mapping[str, str], what: str) -> dict[str, Any]:
    choice: dict[str, Any] = {"type": "string", "minLength": 1}
    if names:
        choice["enum"] = names
        choice["enumDescriptions"] = [summaries.get(n, "") for n in names]
    choice["description"] = what
    return choice


def _merged_settings(components: _Components, settings: Any, common: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema with the keys ``common`` and those of the Struct ``settings`` (its
    required keys and whether it allows others)."""
    definition = components.definition(settings) if settings is not None else None
    if definition is None:
        return {"type": "object", "properties": dict(common)}
    merged: dict[str, Any] = {
        "type": "object",
        "properties": {**copy.deepcopy(definition.get("properties", {})), **common},
    }
    if definition.get("required"):
        merged["required"] = list(definition["required"])
    if "additionalProperties" in definition:
        merged["additionalProperties"] = definition["additionalProperties"]
    if definition.get("description"):
        merged["description"] = definition["description"]
    return merged


def _agent_schema(
    components: _Components, adapters: Mapping[str, type[Adapter]], *, in_suite: bool
) -> dict[str, Any]:
    names = sorted(adapters)
    common: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1, "description": "The agent's name."},
        "type": _type_choice(
            names,
            {n: adapters[n].summary for n in names},
            "The adapter ATP speaks to the agent through (atp plugins).",
        ),
        "timeout": {**_TIMEOUT, "description": "Seconds any run of the agent may take, at most."},
        "rate_limit": {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": 1_000_000},
                {
                    "type": "string",
                    "pattern": r"^\s*[0-9]*\.?[0-9]+\s*/\s*(s|sec|second|m|min|minute|h|hour)\s*$",
                },
            ],
            "description": "How fast runs may start against the agent: runs per second, or like 10/s, 30/min, 2/h.",
        },
        "secrets": {
            "anyOf": [
                {"type": "array", "items": {"type": "string", "pattern": _VARIABLE}, "maxItems": 256},
                {
                    "type": "object",
                    "additionalProperties": {"type": "string", "pattern": _VARIABLE},
                    "propertyNames": {"pattern": _VARIABLE},
                    "maxProperties": 256,
                },
            ],
            "description": (
                "ATP's environment variables sent (masked) in context.environment of every request: "
                "names ([API_KEY]) or {name sent: variable read}."
            ),
        },
    }
    schema: dict[str, Any] = {"type": "object", "properties": common}
    if in_suite:
        schema["required"] = ["name"]
        schema["description"] = (
            "An agent (name, type and settings), or only the name of an agent of atp.config.yaml."
        )
    else:
        schema["required"] = ["type"]
    branches = []
    for name in names:
        branches.append(
            {
                "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                "then": _merged_settings(components, adapters[name].Settings, common),
            }
        )
    if branches:
        schema["allOf"] = branches
    return schema


def _document(title: str, root: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    root.pop("title", None)
    version = root["properties"].get("version")
    if version is not None:  # ``version: 1.0`` (a YAML number) is read as "1.0"
        root["properties"]["version"] = {**version, "type": ["string", "number"]}
    document: dict[str, Any] = {"$schema": DRAFT, "title": title, **root}
    if definitions:
        document["definitions"] = dict(sorted(definitions.items()))
    return document


def suite_schema(
    evaluators: Mapping[str, type[Evaluator]],
    adapters: Mapping[str, type[Adapter]],
    services: Mapping[str, type[Service]] | None = None,
) -> dict[str, Any]:
    """The JSON Schema of a suite file, with the installed evaluators', adapters' and services'
    types; ``services`` by default are those of the plugin manager ``evaluators`` comes from."""
    if services is None:
        services = services_of(evaluators)
    names = sorted(evaluators)
    configs = [evaluators[n].Config for n in names]
    settings = [adapters[n].Settings for n in sorted(adapters)]
    service_configs = [services[k].Config for k in sorted(services)]
    components = _Components(
        [SuiteSpec, TestSpec, DefaultsSpec, TaskSpec, AssertionSpec, *configs, *settings, *service_configs]
    )
    components.add_aliases(ScoringSpec)
    for cls, descriptions in SUITE_DESCRIPTIONS.items():
        definition = components.definition(cls)
        if definition is not None:
            _describe(definition, descriptions)
    assertion = components.definition(AssertionSpec)
    assert assertion is not None
    assertion["properties"]["type"] = _type_choice(
        names, {n: evaluators[n].summary for n in names}, "Which evaluator checks it (atp list-evaluators)."
    )
    branches = []
    for name in names:
        config = components.ref(evaluators[name].Config) or {"type": "object"}
        branches.append(
            {
                "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                "then": {"properties": {"config": config}},
            }
        )
    if branches:
        assertion["allOf"] = branches
    for cls, whose in ((TestSpec, "this test's"), (DefaultsSpec, "every test's")):
        definition = components.definition(cls)
        assert definition is not None
        for key in sorted(services):
            service = services[key]
            config = components.ref(service.Config) or {}
            definition["properties"][key] = {
                "description": f"{service.summary or key} (a service for {whose} runs; null: none)",
                "anyOf": [config, {"type": "null"}],
            }
    root = components.inline(SuiteSpec)
    root["properties"]["agents"] = {
        "type": "array",
        "items": _agent_schema(components, adapters, in_suite=True),
        "description": root["properties"]["agents"].get("description", ""),
    }
    return _document("ATP test suite", root, components.definitions)


def config_schema(
    adapters: Mapping[str, type[Adapter]], evaluators: Mapping[str, type[Evaluator]]
) -> dict[str, Any]:
    """The JSON Schema of ``atp.config.yaml`` (and of ``[tool.atp]`` in ``pyproject.toml``),
    with the installed adapters' and evaluators' settings."""
    names = sorted(evaluators)
    settings = [adapters[n].Settings for n in sorted(adapters)]
    own = [s for s in (evaluators[n].Settings for n in names) if s is not None]
    components = _Components([ConfigSpec, *settings, *own])
    components.add_aliases(ConfigDefaults)
    root = components.inline(ConfigSpec)
    _describe(root, CONFIG_DESCRIPTIONS)
    properties = root["properties"]
    properties["agents"] = {
        "description": properties["agents"]["description"],
        "type": "object",
        "additionalProperties": _agent_schema(components, adapters, in_suite=False),
    }
    timeout = {**_TIMEOUT, "description": "Seconds one evaluation may take (default 60)."}
    per_evaluator = {
        name: {
            **_merged_settings(components, evaluators[name].Settings, {"timeout_seconds": timeout}),
            "description": evaluators[name].summary or name,
        }
        for name in names
    }
    properties["evaluators"] = {
        "description": properties["evaluators"]["description"],
        "type": "object",
        "properties": per_evaluator,
        "additionalProperties": {"type": "object", "properties": {"timeout_seconds": timeout}},
    }
    properties["plugins"] = {
        "description": properties["plugins"]["description"],
        "type": "array",
        "items": {"type": "string", "minLength": 1},
    }
    return _document("ATP configuration (atp.config.yaml)", root, components.definitions)


BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def _whole_bounds(value: Any) -> Any:
    """``value`` with every bound that is a whole float written as an int. ``Meta(ge=0)`` and
    ``Meta(ge=0.0)`` are equal, so Python's cache of ``Annotated`` types hands out whichever
    was made first: without this, the text would depend on the order modules were imported."""
    if isinstance(value, dict):
        return {
            key: int(item)
            if key in BOUNDS and isinstance(item, float) and item.is_integer()
            else _whole_bounds(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_whole_bounds(item) for item in value]
    return value


def schema_text(schema: Mapping[str, Any]) -> str:
    """A schema as the JSON text ``atp schema`` prints (stable, for a committed copy)."""
    return json.dumps(_whole_bounds(schema), indent=2, ensure_ascii=False) + "\n"


# --- a Struct's keys, for people -------------------------------------------------------------


class StructKey(NamedTuple):
    """One key of a Struct: its name, its type in words, and whether it is required or its
    default."""

    name: str
    type: str
    required: bool
    default: str | None


def struct_keys(cls: type[msgspec.Struct]) -> list[StructKey]:
    """The keys of the Struct ``cls`` (``[]`` for one msgspec cannot describe)."""
    try:
        info = mi.type_info(cls)
    except Exception:
        return []
    if not isinstance(info, mi.StructType):
        return []
    keys = []
    for field in info.fields:
        default: str | None = None
        if not field.required:
            value = field.default
            if value is msgspec.NODEFAULT and field.default_factory is not msgspec.NODEFAULT:
                try:
                    value = field.default_factory()
                except Exception:
                    value = msgspec.NODEFAULT
            default = "-" if value is msgspec.NODEFAULT else _value_text(value)
        keys.append(StructKey(field.encode_name, type_text(field.type), field.required, default))
    return keys


def _value_text(value: Any) -> str:
    try:
        return msgspec.json.encode(value).decode()
    except Exception:
        return repr(value)


def type_text(info: mi.Type) -> str:
    """A msgspec type in words: ``int >= 1``, ``list[str] | null``, ``mapping``."""
    if isinstance(info, mi.UnionType):
        return " | ".join(type_text(t) for t in info.types)
    if isinstance(info, mi.NoneType):
        return "null"
    if isinstance(info, mi.BoolType):
        return "bool"
    if isinstance(info, (mi.IntType, mi.FloatType)):
        word = "int" if isinstance(info, mi.IntType) else "number"
        bounds = [
            f"{op} {value}"
            for op, value in ((">", info.gt), (">=", info.ge), ("<", info.lt), ("<=", info.le))
            if value is not None
        ]
        return f"{word} {' and '.join(bounds)}" if bounds else word
    if isinstance(info, mi.StrType):
        return "str"
    if isinstance(info, mi.LiteralType):
        return " | ".join(_value_text(v) for v in info.values)
    if isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return f"list[{type_text(info.item_type)}]"
    if isinstance(info, mi.DictType):
        return f"mapping[{type_text(info.key_type)}, {type_text(info.value_type)}]"
    if isinstance(info, (mi.StructType, mi.TypedDictType, mi.DataclassType)):
        return "mapping"
    if isinstance(info, mi.AnyType):
        return "any"
    return type(info).__name__.removesuffix("Type").lower()
