"""Where the configuration is found (docs/config.md, "Where ATP looks").

``--config=FILE`` wins. Without it, ATP looks in the folder of the suite the command runs (and,
for a suite below the working directory, in each folder between the two, nearest first: a suite
in ``suites/nested/`` finds ``suites/atp.config.yaml``), then in the working directory; in each folder, first ``atp.config.yaml`` (or ``atp.config.yml``),
then the ``[tool.atp]`` table of ``pyproject.toml``. The first found is the configuration; a
folder is one project, so a suite's own folder beats the working directory whatever form each
keeps its configuration in. Without a suite (``atp report``, ``atp view``...) only the working
directory is looked in.

A config in the working directory that a suite's own one hides is warned about (it is not
used). :meth:`Found.summary` says in a few words which config a command uses (``atp test``
prints it), :meth:`Found.origin` says it in a sentence for an error.

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
BESIDE_THE_SUITE = "beside the suite"
ABOVE_THE_SUITE = "above the suite"
WORKING_DIRECTORY = "the working directory"

__all__ = ["BESIDE_THE_SUITE", "CONFIG_NAMES", "PYPROJECT", "WORKING_DIRECTORY", "Found", "search", "shown"]


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

    def summary(self, cwd: Path | None = None) -> str:
        """In a few words: the config used and why (``myproj/atp.config.yaml (beside the
        suite)``), or ``none found`` and where ATP looked; paths relative to ``cwd`` when below it."""
        if self.path is not None:
            table = " [tool.atp]" if self.path.name == PYPROJECT else ""
            why = self.why.removeprefix("its [tool.atp] table, ").removeprefix("found ")
            return f"{shown(self.path, cwd)}{table} ({why})"
        folders = " and ".join(_place(folder, what, cwd) for folder, what in self.looked)
        return f"none found (looked {folders})"

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
            by_folder[key] = (_search_folders(_folders_of(folder, where)), suite)
    if not by_folder:
        return _search_folders([(where, WORKING_DIRECTORY)])
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


def _folders_of(folder: Path, where: Path) -> list[tuple[Path, str]]:
    """The folders a suite in ``folder`` looks in, in order: its own; for a suite below the
    working directory ``where``, each folder up to it; then the working directory."""
    top = _key(where)
    folders: list[tuple[Path, str]] = []
    current = folder
    if _key(current) != top:
        folders.append((current, BESIDE_THE_SUITE))
        below = top is not None and top in (_key(current) or current).parents
        while below and _key(current.parent) != top and current.parent != current:
            current = current.parent
            folders.append((current, ABOVE_THE_SUITE))
    folders.append((where, WORKING_DIRECTORY))
    return folders


def shown(path: Path, cwd: Path | None = None) -> str:
    """``path`` as a message shows it: relative to ``cwd`` (the working directory) when below it."""
    where = cwd if cwd is not None else Path.cwd()
    try:
        return str(path.absolute().relative_to(where.absolute()))
    except ValueError:
        return str(path)


def _place(folder: Path, what: str, cwd: Path | None) -> str:
    """Where a folder looked in is: ``in the working directory``, ``beside the suite (myproj)``."""
    if what == WORKING_DIRECTORY:
        return f"in {what}"
    return f"{what} ({shown(folder, cwd)})"


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
    looked: list[tuple[Path, str]] = []
    notes: list[str] = []
    for index, (folder, what) in enumerate(folders):
        looked.append((folder, what))
        path, warnings, note = _config_in(folder)
        if note is not None:
            notes.append(note)
        if path is not None:
            where = what if what in (BESIDE_THE_SUITE, ABOVE_THE_SUITE) else f"in {what}"
            why = f"its [tool.atp] table, found {where}" if path.name == PYPROJECT else f"found {where}"
            found = Found(path, why, looked)
            found.warnings.extend(warnings)
            found.warnings.extend(_hidden(path, where, folders[index + 1 :]))
            return found
    found = Found(None, "", looked)
    found.notes = notes
    return found


def _hidden(path: Path, where: str, folders: Sequence[tuple[Path, str]]) -> list[str]:
    """A warning for each configuration in ``folders`` (the working directory) that ``path``
    (found ``where``: beside the suite) hides."""
    warnings = []
    for folder, what in folders:
        try:
            hidden, _, _ = _config_in(folder)
        except ConfigError:  # (a broken file that is not used: not this command's business)
            continue
        if hidden is not None and _key(hidden) != _key(path):
            warnings.append(
                f"{hidden} in {what} is not used: {path}, {where}, is the configuration "
                f"(--config={hidden} uses the other)"
            )
    return warnings


def _config_in(folder: Path) -> tuple[Path | None, list[str], str | None]:
    """The configuration ``folder`` holds (its config file, else a ``pyproject.toml`` with a
    ``[tool.atp]`` table), what to warn of it, and a near miss worth a note."""
    from atp.core.config import TomlDocument

    pyproject = folder / PYPROJECT
    path = next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)
    if path is not None:
        if pyproject.is_file() and TomlDocument.mentions_table(pyproject):
            warning = (
                f"{pyproject} has a [tool.atp] table, which is ignored: {path} is the "
                f"configuration (keep one of them)"
            )
            return path, [warning], None
        return path, [], None
    if pyproject.is_file():
        if TomlDocument.find(pyproject) is not None:
            return pyproject, [], None
        return None, [], f"{pyproject} has no [tool.atp] table"
    return None, [], None
