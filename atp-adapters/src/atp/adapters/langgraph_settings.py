"""The settings of the ``langgraph`` adapter (:mod:`atp.adapters.langgraph`): which module and
graph to run, the graph's RunnableConfig, and the input and output mappers, each checked when
the suite loads."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any

import msgspec

from atp.adapters.python import PythonSettings, callable_problem

PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


class GraphConfig(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """What the suite may put in the graph's RunnableConfig (callbacks are ATP's own)."""

    recursion_limit: PositiveInt | None = None
    configurable: dict[str, Any] = msgspec.field(default_factory=dict)
    tags: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    run_name: str | None = None
    max_concurrency: PositiveInt | None = None

    def runnable_config(self) -> dict[str, Any]:
        """A fresh RunnableConfig dict of what is set."""
        config: dict[str, Any] = {"configurable": dict(self.configurable)}
        for name in ("recursion_limit", "run_name", "max_concurrency"):
            value = getattr(self, name)
            if value is not None:
                config[name] = value
        if self.tags:
            config["tags"] = list(self.tags)
        if self.metadata:
            config["metadata"] = dict(self.metadata)
        return config


class LangGraphSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    module: str
    """The module defining the graph, as Python imports it (``my_agent``, ``my_pkg.graphs``)."""
    graph: str = "graph"
    """Its attribute (dotted attributes too): a compiled graph, a ``StateGraph`` (compiled once),
    or a function returning one (called once per ``atp test``, with the config when it takes an
    argument)."""
    path: list[str] = msgspec.field(default_factory=list)
    """Folders put at the front of ``sys.path``, relative to the file defining the agent."""
    config: GraphConfig = msgspec.field(default_factory=GraphConfig)
    """The graph's RunnableConfig: ``recursion_limit``, ``configurable``, ``tags``, ``metadata``,
    ``run_name``, ``max_concurrency``."""
    input_key: str = "messages"
    """The state key the task's description goes to: ``messages`` makes it a user message."""
    input_mapper: str | None = None
    """``module:function`` taking the ATPRequest and returning the graph's input."""
    output_mapper: str | None = None
    """``module:function`` taking the final state and returning the artifacts."""

    def __post_init__(self) -> None:
        problem = _module_problem(self.module) or _graph_problem(self.graph)
        if problem is not None:
            raise ValueError(problem)
        PythonSettings(callable=f"{self.module}:{self.graph}", path=self.path)  # checks 'path'
        for setting in ("input_mapper", "output_mapper"):
            value = getattr(self, setting)
            if value is not None:
                problem = callable_problem(value, setting)
                if problem is not None:
                    raise ValueError(problem)
        if not self.input_key:
            raise ValueError("'input_key' is empty: name the state key the task's description goes to")


def _module_problem(value: str) -> str | None:
    if ":" in value:
        module, _, attribute = value.partition(":")
        return (
            f"'module' is the module's name alone, not {value!r}: write module: {module} and "
            f"graph: {attribute or 'graph'}"
        )
    if value.endswith(".py") or "/" in value or "\\" in value:
        stem = PurePath(value.replace("\\", "/")).stem or "my_agent"
        return (
            f"'module' names a module, not a file: {value!r} is a path. Write the module's name "
            f"({stem}) and put its folder in 'path' (relative to the file that defines the agent) "
            f"unless it is that file's folder"
        )
    if not value or not all(part.isidentifier() for part in value.split(".")):
        return f"'module' {value!r} is not a module name (dotted Python identifiers, like my_agent or my_pkg.graphs)"
    return None


def _graph_problem(value: str) -> str | None:
    if not value or not all(part.isidentifier() for part in value.split(".")):
        return (
            f"'graph' {value!r} is not an attribute name (a Python identifier, dotted for an "
            f"attribute of an attribute: graph, agents.research)"
        )
    return None
