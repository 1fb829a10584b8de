"""``atp init``: a working starting point in the current folder, or a plugin package to start from.

``atp init`` writes ``atp.config.yaml`` (one agent, ``agent.py`` run with the Python that runs
ATP), ``atp-suite.yaml`` (tests that pass against it) and ``agent.py`` (a stdin/stdout agent to
replace), and adds ``.atp/`` to ``.gitignore``; ``atp test`` passes right after.
``atp init --plugin evaluator|adapter|reporter NAME`` writes a package folder
``atp-<kind>-<name>/`` with a working example of that kind and its tests.

Nothing is overwritten without ``--force``: when a file is already there, nothing is written
and the command exits with code 2.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

import click

CORE_DISTRIBUTION = "atp-kernel"
"""The distribution of ATP's kernel (``atp.core``), which generated plugins depend on."""

CONFIG_FILE = "atp.config.yaml"
SUITE_FILE = "atp-suite.yaml"
AGENT_FILE = "agent.py"
AGENT_NAME = "my-agent"
GITIGNORE = ".gitignore"
IGNORED = ".atp/"
PLUGIN_KINDS = ("evaluator", "adapter", "reporter")
PLUGIN_SUMMARIES = {
    "evaluator": "the assertion type {name}, which checks that an artifact mentions the given words",
    "adapter": "agents of type {name} (an example that answers every task itself)",
    "reporter": "the output {name}, a Markdown table of the tests",
}
PLUGIN_USAGE = {
    "evaluator": "```yaml\nassertions:\n  - type: {name}\n    config: {{path: answer.md, words: [alpha, beta]}}\n```",
    "adapter": "```yaml\nagents:\n  my-agent:\n    type: {name}\n    greeting: Hello\n```",
    "reporter": "```sh\natp test --output={name} --output-file=results.md\n```",
}
_NAME = re.compile(r"[a-z][a-z0-9]*(?:[_-][a-z0-9]+)*\Z")
MAX_NAME = 50


def _template(*parts: str) -> str:
    return resources.files("atp.cli").joinpath("templates", *parts).read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    return text


def core_requirement() -> str:
    """``atp-kernel>=0.1,<0.2``: the kernel's series this ATP belongs to (0.x minor versions
    may change the plugin API; from 1.0, major versions)."""
    from atp.core import __version__

    numbers = [int(n) for n in re.findall(r"\d+", __version__)[:2]] + [0, 0]
    major, minor = numbers[0], numbers[1]
    if major == 0:
        return f"{CORE_DISTRIBUTION}>=0.{minor},<0.{minor + 1}"
    return f"{CORE_DISTRIBUTION}>={major}.{minor},<{major + 1}"


@click.command("init")
@click.argument("name", required=False)
@click.option(
    "--plugin",
    "kind",
    type=click.Choice(PLUGIN_KINDS),
    help="Write a plugin package of this kind, named NAME, instead of a project.",
)
@click.option("--force", is_flag=True, help="Overwrite files that are already there.")
def init_command(name: str | None, kind: str | None, force: bool) -> int:
    """Start testing an agent here: write atp.config.yaml, atp-suite.yaml and agent.py (an
    agent to replace with yours) in the current folder, and ignore .atp/ in .gitignore.

    With --plugin evaluator|adapter|reporter NAME: write a plugin package, atp-KIND-NAME/,
    with a working example and its tests.

    Existing files are left alone (exit code 2) unless --force is given.
    """
    from atp.core.errors import ConfigError

    where = Path.cwd()
    if kind is None:
        if name is not None:
            raise click.UsageError(f"NAME ({name!r}) names a plugin: atp init --plugin evaluator {name}")
        written = init_project(where, force=force)
        click.echo(f"Wrote a starting point in {where}:")
        for line in written:
            click.echo(f"  {line}")
        click.echo("")
        click.echo("Run it (every test passes):   atp test")
        click.echo(f"Then make it yours: put your agent in {AGENT_FILE} (or point the command in")
        click.echo(f"{CONFIG_FILE} at it) and write the tests it should pass in {SUITE_FILE}.")
        return 0
    if name is None:
        raise click.UsageError(f"--plugin {kind} needs a NAME: atp init --plugin {kind} my_{kind}")
    problem = name_problem(name)
    if problem is not None:
        raise ConfigError(problem)
    folder, files = init_plugin(where, kind, name, force=force)
    click.echo(f"Wrote the {kind} plugin {name!r} in {folder}:")
    for path in files:
        click.echo(f"  {path.relative_to(where)}")
    python = python_command()
    click.echo("")
    click.echo(
        f"Test it:  cd {shlex.quote(folder.name)} && {python} -m pip install -e '.[test]' && {python} -m pytest"
    )
    click.echo("          (installs it for ATP with its test extra, pytest; then: atp plugins lists it)")
    return 0


def python_command() -> str:
    """How to name the Python that runs ATP in a command to type: ``python`` when that is the
    one the shell finds (an activated venv), else its path (ATP run as ``.venv/bin/atp``)."""
    found = shutil.which("python")
    here = Path(sys.executable)
    if found is not None and Path(found).absolute().parent == here.absolute().parent:
        return "python"
    return shlex.quote(str(here))


# --- a project ---------------------------------------------------------------------------------


def init_project(where: Path, *, force: bool = False) -> list[str]:
    """Write the project files in ``where``; one line per file, saying what it is."""
    from atp.core.config import CONFIG_NAMES, PYPROJECT, TomlDocument
    from atp.core.errors import ConfigError

    files = {
        CONFIG_FILE: _fill(
            _template("project", "atp.config.yaml.tmpl"), {"AGENT": AGENT_NAME, "AGENT_FILE": AGENT_FILE}
        ),
        SUITE_FILE: _fill(
            _template("project", "atp-suite.yaml.tmpl"),
            {"SUITE": SUITE_FILE, "SUITE_NAME": _suite_name(where)},
        ),
        AGENT_FILE: _template("project", "agent.py.tmpl"),
    }
    if not force:
        taken = [n for n in (*files, *CONFIG_NAMES) if (where / n).exists() or (where / n).is_symlink()]
        pyproject = where / PYPROJECT
        if pyproject.is_file() and TomlDocument.mentions_table(pyproject):
            taken.append(f"{PYPROJECT} (its [tool.atp] table)")
        taken = list(dict.fromkeys(taken))
        if taken:
            raise ConfigError(
                f"{_names(taken)} already "
                f"{'exists' if len(taken) == 1 else 'exist'} in {where}; nothing was written "
                f"(atp init --force overwrites {CONFIG_FILE}, {SUITE_FILE} and {AGENT_FILE})"
            )
    lines = []
    descriptions = {
        CONFIG_FILE: f"the configuration: the agent {AGENT_NAME!r}, which runs {AGENT_FILE}",
        SUITE_FILE: "3 tests the agent passes",
        AGENT_FILE: "the agent: replace its work with yours",
    }
    width = max(len(n) for n in (*files, GITIGNORE))
    for name, text in files.items():
        _write(where / name, text)
        lines.append(f"{name.ljust(width)}  {descriptions[name]}")
    (where / AGENT_FILE).chmod(0o755)
    if add_ignore(where / GITIGNORE):
        lines.append(f"{GITIGNORE.ljust(width)}  ignores {IGNORED} (where ATP keeps its runs)")
    return lines


def _suite_name(where: Path) -> str:
    """The suite's name, from the folder's name (``my_project``), or ``my_agent``."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", where.name).strip("_").lower()
    return name if name and name[0].isalpha() else "my_agent"


def add_ignore(path: Path) -> bool:
    """Add ``.atp/`` to the ``.gitignore`` at ``path`` (creating it) unless it ignores ``.atp``
    already; whether it was written."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    entries = {line.strip() for line in text.splitlines()}
    if entries & {".atp", ".atp/", "/.atp", "/.atp/", ".atp/*", "/.atp/*"}:
        return False
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(f"{text}# ATP's run directories\n{IGNORED}\n", encoding="utf-8")
    return True


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():  # --force: replace the link, not the file it points at
        path.unlink()
    path.write_text(text, encoding="utf-8")


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


# --- a plugin ----------------------------------------------------------------------------------


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a plugin, or ``None``."""
    if len(name) > MAX_NAME or not _NAME.match(name):
        return (
            f"the plugin name {name!r} must be lower-case letters and digits, words joined by '_' "
            f"or '-', starting with a letter, at most {MAX_NAME} characters (like word_count)"
        )
    return None


def plugin_names(kind: str, name: str) -> dict[str, str]:
    """The names a plugin package is made of: its distribution, module, class."""
    ident = name.replace("-", "_")
    return {
        "NAME": name,
        "KIND": kind,
        "DIST": f"atp-{kind}-{name.replace('_', '-')}",
        "PACKAGE": f"atp_{kind}_{ident}",
        "MODULE": kind,
        "CLASS": "".join(part.capitalize() for part in ident.split("_")) + kind.capitalize(),
        "CORE_REQUIREMENT": core_requirement(),
        "SUMMARY": PLUGIN_SUMMARIES[kind].format(name=name),
        "USAGE": PLUGIN_USAGE[kind].format(name=name),
    }


def init_plugin(where: Path, kind: str, name: str, *, force: bool = False) -> tuple[Path, list[Path]]:
    """Write the package of a ``kind`` plugin named ``name`` below ``where``: its folder and
    the files written."""
    from atp.core.errors import ConfigError

    values = plugin_names(kind, name)
    folder = where / values["DIST"]
    package = folder / "src" / values["PACKAGE"]
    files = {
        folder / "pyproject.toml": _template("plugin", "pyproject.toml.tmpl"),
        folder / "README.md": _template("plugin", "README.md.tmpl"),
        package / "__init__.py": _template("plugin", kind, "__init__.py.tmpl"),
        package / f"{kind}.py": _template("plugin", kind, f"{kind}.py.tmpl"),
        folder / "tests" / f"test_{values['PACKAGE']}.py": _template("plugin", kind, "test.py.tmpl"),
    }
    if folder.exists() and not force:
        raise ConfigError(
            f"{folder} already exists; nothing was written (atp init --force writes the package's "
            f"files over the ones there)"
        )
    for path, text in files.items():
        _write(path, _fill(text, values))
    return folder, list(files)
