"""The hostile-input helpers are the only way in (issue 26): a tree is walked, copied or removed
only by ``atp.core.tree`` (no recursion, bounded), and the in-process adapters call the agent's
objects only through ``atp.core.isolation`` (every ``BaseException`` the agent's)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

SOURCES = sorted(ROOT.glob("atp-*/src/atp/**/*.py"))
TREE_HELPERS = ROOT / "atp-core/src/atp/core/tree.py"
RECURSIVE = {("shutil", "rmtree"), ("shutil", "copytree"), ("os", "walk")}

IN_PROCESS = [
    path
    for path in SOURCES
    if path.parent.name == "adapters" and path.stem.split("_")[0] in ("python", "langgraph", "crewai")
]
AGENT_OBJECTS = {
    "function",
    "mapper",
    "factory",
    "found",
    "target",
    "self.function",
    "self.mapper",
    "self.factory",
    "self.input_mapper",
    "self.output_mapper",
    "crew.kickoff",
    "found.compile",
    "importlib.import_module",
}
"""What holds the agent's code in those modules: called directly, what it raises would reach
ATP's own control flow."""
ISOLATION_HELPERS = {"call_agent", "await_agent"}


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def calls(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [(node.lineno, dotted(node.func)) for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_trees_are_walked_copied_and_removed_by_the_tree_helpers_only() -> None:
    found = []
    for path in SOURCES:
        if path == TREE_HELPERS:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in ("shutil", "os"):
                names = {(node.module, alias.name) for alias in node.names}
                found += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for _, n in names & RECURSIVE]
        found += [
            f"{path.relative_to(ROOT)}:{line} calls {name}"
            for line, name in calls(path)
            if tuple(name.split(".")) in RECURSIVE
        ]
    assert not found, "recursive tree functions outside atp.core.tree:\n" + "\n".join(found)


def direct_calls(path: Path) -> list[tuple[int, str]]:
    """Calls of the agent's objects that do not run inside the isolation helpers: not in a
    function the module hands to one of them (``call_agent(self._load)``), nor in a lambda (a
    factory the module makes and hands over)."""
    tree = ast.parse(path.read_text(), str(path))
    handed = {dotted(called).rsplit(".", 1)[-1] for called in handed_over(tree)}
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, exempt: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in handed:
            exempt = True
        if isinstance(node, ast.Lambda):
            exempt = True
        if isinstance(node, ast.Call) and not exempt and dotted(node.func) in AGENT_OBJECTS:
            found.append((node.lineno, dotted(node.func)))
        for child in ast.iter_child_nodes(node):
            visit(child, exempt)

    visit(tree, False)
    return found


def handed_over(tree: ast.AST) -> list[ast.expr]:
    """What is run through an isolation helper: ``call_agent(f, ...)``, ``await_agent(f(...))``
    and ``anyio.to_thread.run_sync(call_agent, f, ...)`` hand over ``f``."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        args = node.args
        if dotted(node.func) == "anyio.to_thread.run_sync" and dotted(args[0]) in ISOLATION_HELPERS:
            args = args[1:]
        elif dotted(node.func) not in ISOLATION_HELPERS:
            continue
        if args:
            found.append(args[0].func if isinstance(args[0], ast.Call) else args[0])
    return found


def test_the_in_process_adapters_call_agent_code_through_the_isolation_helpers_only() -> None:
    assert {path.stem for path in IN_PROCESS} >= {"python", "langgraph", "crewai"}
    direct = [
        f"{path.relative_to(ROOT)}:{line} calls {name}(...) directly"
        for path in IN_PROCESS
        for line, name in direct_calls(path)
    ]
    assert not direct, "agent code called outside call_agent/await_agent:\n" + "\n".join(direct)
    used = {name for path in IN_PROCESS for _, name in calls(path)} & ISOLATION_HELPERS
    assert used == ISOLATION_HELPERS


ARTIFACT_HELPERS = ROOT / "atp-core/src/atp/core/artifacts.py"
DECODING = {"base64.b64decode", "b64decode", "base64.standard_b64decode", "binascii.a2b_base64", "a2b_base64"}


def test_artifact_content_is_decoded_by_the_artifact_helpers_only() -> None:
    """Issue 27: an artifact's inline content is decoded (base64 for a binary ``content_type``)
    and checked against its ``size_bytes`` and ``content_hash`` in one place, atp.core.artifacts;
    evaluators and adapters use it (``content_of``, ``inline_content``, ``encode_content``)."""
    found = [
        f"{path.relative_to(ROOT)}:{line} calls {name}"
        for path in SOURCES
        if path != ARTIFACT_HELPERS
        for line, name in calls(path)
        if name in DECODING
    ]
    assert not found, "base64 decoded outside atp.core.artifacts:\n" + "\n".join(found)
    assert {name for _, name in calls(ARTIFACT_HELPERS)} & DECODING
