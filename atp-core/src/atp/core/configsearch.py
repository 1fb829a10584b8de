"""Where the configuration is found (docs/config.md, "Where ATP looks").

``--config=FILE`` wins. Without it, ATP looks in the folder of the suite the command runs, then
in the working directory; in each folder, first ``atp.config.yaml`` (or ``atp.config.yml``),
then the ``[tool.atp]`` table of ``pyproject.toml``. The first found is the configuration; a
folder is one project, so a suite's own folder beats the working directory whatever form each
keeps its configuration in. Without a suite (``atp report``, ``atp view``...) only the working
directory is looked in.

Suites of one command that would find different configurations are refused: one command runs
with one configuration (its plugins, run directory, budget), and the message says how to
split the command. :func:`search` says what it found, every folder it looked in and why, so
that an error about a missing agent can name them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from atp.core.errors import ConfigError

CONFIG_NAMES = ("atp.config.yaml", "atp.config.yml")
PYPROJECT = "pyproject.toml"

__all__ = ["CONFIG_NAMES", "PYPROJECT", "Found", "search"]


class Found:
    """What the search found: the config file (``None``: none, ATP's defaults), why it is the
    one, the files looked at, and what the user should hear (a ``[tool.atp]`` table ignored)."""

    def __init__(self, path: Path | None, why: str, looked: Sequence[tuple[Path, str]]) -> None:
        self.path = path
        self.why = why
        self.looked = list(looked)
        """Each folder looked in and what it is (``beside the suite``, ``the working directory``)."""
        self.warnings: list[str] = []
        self.notes: list[str] = []
        """Near misses worth naming in an error: a ``pyproject.toml`` without ``[tool.atp]``."""

    def origin(self) -> str:
        """One sentence for an error: which config was used, or where none was found."""
        if self.path is not None:
            return f"the config is {self.path} ({self.why})"
        names = f"{', '.join(CONFIG_NAMES)} and {PYPROJECT} [tool.atp]"
        folders = " and in ".join(f"{folder} ({what})" for folder, what in self.looked)
        notes = "".join(f"; {note}" for note in self.notes)
        return f"no config file was found (looked for {names} in {folders}{notes})"


def search(suites: Sequence[Path] = (), cwd: Path | None = None) -> Found:
    """The configuration for a command that runs ``suites`` (none: the working directory's),
    found as the module says; suites that would find different ones are a :class:`ConfigError`."""
    where = cwd if cwd is not None else Path.cwd()
    by_folder: dict[Path | None, tuple[Found, Path]] = {}
    for suite in suites:
        folder = suite.parent
        key = _key(folder)
        if key not in by_folder:
            folders = [(where, "the working directory")]
            if key != _key(where):
                folders.insert(0, (folder, "beside the suite"))
            by_folder[key] = (_search_folders(folders), suite)
    if not by_folder:
        return _search_folders([(where, "the working directory")])
    found = list(by_folder.values())
    first, first_suite = found[0]
    for other, other_suite in found[1:]:
        if _key(other.path) != _key(first.path):
            raise ConfigError(
                f"the suites given find different configs: {first_suite} {_uses(first)}, "
                f"{other_suite} {_uses(other)}; one atp command runs with one config: run them "
                f"in separate commands, or name the config for all of them with --config=FILE"
            )
    return first


def _uses(found: Found) -> str:
    return f"uses {found.path}" if found.path is not None else "finds none"


def _key(path: Path | None) -> Path | None:
    if path is None:
        return None
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _search_folders(folders: Sequence[tuple[Path, str]]) -> Found:
    from atp.core.config import TomlDocument

    looked: list[tuple[Path, str]] = []
    notes: list[str] = []
    for folder, what in folders:
        looked.append((folder, what))
        pyproject = folder / PYPROJECT
        path = next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)
        if path is not None:
            found = Found(path, f"found {what}", looked)
            if pyproject.is_file() and TomlDocument.mentions_table(pyproject):
                found.warnings.append(
                    f"{pyproject} has a [tool.atp] table, which is ignored: {path} is the "
                    f"configuration (keep one of them)"
                )
            return found
        if pyproject.is_file():
            if TomlDocument.find(pyproject) is not None:
                return Found(pyproject, f"its [tool.atp] table, found {what}", looked)
            notes.append(f"{pyproject} has no [tool.atp] table")
    found = Found(None, "", looked)
    found.notes = notes
    return found
