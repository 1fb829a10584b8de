"""Finding suite files the way ``atp test PATH...`` promises (docs/cli.md).

A path that is a file is a suite, whatever its name. A folder is searched recursively for
``*.yaml`` and ``*.yml`` files whose text has a top-level ``test_suite:`` key (other YAML, like
``atp.config.yaml`` or a CI workflow, is left alone); hidden folders (``.atp``, ``.git``,
``.venv``) and ``node_modules``/``__pycache__`` are not entered. Suites come in path order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from atp.core.errors import ConfigError
from atp.core.tree import walk_entries
from atp.core.yamlfile import MAX_FILE_BYTES

SUITE_SUFFIXES = (".yaml", ".yml")
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
_SUITE_KEY = re.compile(rb"^[\"']?test_suite[\"']?\s*:", re.MULTILINE)


def is_suite_file(path: Path) -> bool:
    """Whether ``path`` is a YAML file with a top-level ``test_suite`` key."""
    if not path.name.endswith(SUITE_SUFFIXES):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return False
    return bool(_SUITE_KEY.search(head))


def suites_in(folder: Path) -> list[Path]:
    found: list[Path] = []
    entered = lambda name: not name.startswith(".") and name not in SKIPPED_FOLDERS  # noqa: E731
    for path, is_folder in walk_entries(folder, enter=entered):  # (without recursion: any depth)
        if not is_folder and is_suite_file(path):
            found.append(path)
    return found


def find_suites(paths: Iterable[Path], cwd: Path | None = None) -> list[Path]:
    """The suite files that ``paths`` name (the working directory when there are none), each
    once, in the order given."""
    given = list(paths)
    where = cwd or Path.cwd()
    if not given:
        found = suites_in(where)
        if not found:
            raise ConfigError(
                f"no suite files in {where} (a suite is a *.yaml file with a top-level "
                f"'test_suite' key); name one (atp test path/to/suite.yaml) or start with: atp init"
            )
        return found
    suites: list[Path] = []
    for path in given:
        if path.is_dir():
            inside = suites_in(path)
            if not inside:
                raise ConfigError(
                    f"no suite files in the folder {path} (*.yaml files with a 'test_suite' key)"
                )
            suites.extend(inside)
        elif path.exists():
            suites.append(path)
        else:
            raise ConfigError(f"no such suite file or folder: {path}")
    unique: dict[Path, Path] = {}
    for path in suites:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())
