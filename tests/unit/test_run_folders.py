"""A folder of its own for every run: the command resolved before the move to it, the setting
that keeps the old behaviour, and what is kept or removed after the run (never following what
the agent left)."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from atp.adapters.cli import CliAdapter, CliSettings, resolve_argv, unresolved_files
from atp.adapters.container import ContainerAdapter, ContainerSettings
from atp.core.attempt import make_folder, tidy_folder
from atp.core.protocol import ATPRequest, Context, Task


def request(workspace: Path | None) -> ATPRequest:
    context = Context(workspace_path=str(workspace)) if workspace is not None else None
    return ATPRequest(version="1.0", task_id="t", task=Task(description="d"), context=context)


def test_the_command_is_resolved_against_cwd_before_the_move(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    (tmp_path / "conf").mkdir()
    argv = resolve_argv("python3 -u agent.py --config conf -m agent.py -c agent.py missing.py", tmp_path)
    assert argv == [
        "python3", "-u", str(tmp_path / "agent.py"), "--config", str(tmp_path / "conf"),
        "-m", "agent.py", "-c", "agent.py", "missing.py",
    ]  # fmt: skip
    assert unresolved_files([*argv, "0.7", "--x", "word", "src/main.js"]) == ["missing.py", "src/main.js"]


def test_a_cli_agent_runs_in_the_runs_folder_unless_shared(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text("")
    run = tmp_path / "runs" / "workspaces" / "t.1"
    own = CliAdapter(CliSettings(command=["python3", "agent.py"]), name="a", base_dir=tmp_path)
    assert own.folder_per_run and own.argv == ["python3", str(tmp_path / "agent.py")]
    assert own.working_folder(request(run)) == run
    assert own.working_folder(request(None)) == tmp_path  # (no folder given: its cwd)
    shared = CliAdapter(
        CliSettings(command=["python3", "agent.py"], working_folder="shared"), name="a", base_dir=tmp_path
    )
    assert not shared.folder_per_run and shared.argv == ["python3", "agent.py"]
    assert shared.working_folder(request(run)) == tmp_path
    with pytest.raises(msgspec.ValidationError, match="working_folder"):
        msgspec.convert({"command": "a", "working_folder": "own"}, CliSettings)


def test_a_container_shares_its_workspace_setting_and_refuses_both(tmp_path: Path) -> None:
    assert ContainerAdapter(ContainerSettings(image="i"), name="a", base_dir=tmp_path).folder_per_run
    with_workspace = ContainerSettings(image="i", workspace="work")
    assert not ContainerAdapter(with_workspace, name="a", base_dir=tmp_path).folder_per_run
    shared = ContainerSettings(image="i", working_folder="shared")
    assert not ContainerAdapter(shared, name="a", base_dir=tmp_path).folder_per_run
    with pytest.raises(ValueError, match="working_folder: shared"):
        ContainerSettings(image="i", workspace="work", working_folder="per-run")


def test_a_kept_folder_stays_unless_empty_and_a_removed_one_goes_whole(tmp_path: Path) -> None:
    folder = tmp_path / "t.1"
    make_folder(folder)
    assert tidy_folder(folder, keep=True) == (False, None) and not folder.exists()  # empty: gone
    make_folder(folder)
    (folder / "deep" / "er").mkdir(parents=True)
    (folder / "deep" / "er" / "answer.md").write_text("x")
    assert tidy_folder(folder, keep=True) == (True, None)
    assert (folder / "deep" / "er" / "answer.md").read_text() == "x"
    assert tidy_folder(folder, keep=False) == (False, None) and not folder.exists()
    assert tidy_folder(folder, keep=False) == (False, None)  # (already gone)


def test_what_the_agent_put_in_its_folders_place_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    folder = tmp_path / "t.1"
    make_folder(folder)
    (folder / "link").symlink_to(outside)
    assert tidy_folder(folder, keep=False) == (False, None)
    assert (outside / "precious.txt").read_text() == "keep me"
    folder.symlink_to(outside)  # the folder itself replaced by a link out
    assert tidy_folder(folder, keep=False) == (False, None)
    assert not os.path.lexists(folder) and (outside / "precious.txt").read_text() == "keep me"
    folder.symlink_to(outside)
    make_folder(folder, replace=True)  # a new attempt: the link goes, a fresh folder comes
    assert folder.is_dir() and not folder.is_symlink() and list(folder.iterdir()) == []
    assert (outside / "precious.txt").read_text() == "keep me"
