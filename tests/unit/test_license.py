"""The licence: the repository's LICENSE is the MIT licence every distribution declares, and each
distribution ships it (a copy beside its pyproject.toml, named in ``license-files``; a wheel
cannot carry a file from outside its project's folder)."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FOLDERS = ("atp-core", "atp-adapters", "atp-evaluators", "atp-reporters", "atp-executors", "atp-cli")


def test_the_repository_licence_is_the_mit_licence() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 The ATP authors\n")
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    assert "## License\n\nMIT: see [LICENSE](LICENSE)." in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_distribution_declares_and_ships_the_licence(folder: str) -> None:
    pyproject = tomllib.loads((ROOT / folder / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / folder / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
    # license-files as a list of paths is read by hatchling 1.27 and later
    assert "hatchling>=1.27" in pyproject["build-system"]["requires"]
