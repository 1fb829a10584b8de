"""Several outputs of one run: ``--output=NAME:FILE`` for each reporter beside the console, the
single form ``--output=NAME --output-file=FILE``, one file per suite when several run, ``atp
report`` rendering any format from a stored run (the latest by default), and the clear errors
of outputs that would clash."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.conftest import ATP
from tests.e2e.test_cli_selection import a_test, atp, suite_file


@pytest.fixture
def project(tmp_path: Path) -> Path:
    suite_file(tmp_path / "suite.yaml", "outputs", a_test("good") + a_test("bad", passes=False))
    return tmp_path


def junit_cases(path: Path) -> dict[str, bool]:
    """Each testcase's name and whether it passed."""
    root = ElementTree.parse(path).getroot()
    return {case.get("name", ""): len(case) == 0 for case in root.iter("testcase")}


def test_each_output_writes_its_own_file_beside_the_console(project: Path) -> None:
    result = atp(project, "test", "--output=junit:out/report.xml", "--output=json:results.json,console")
    assert result.returncode == 1, result.stderr
    assert "Suite: outputs" in result.stdout  # the console report is still on the terminal
    assert junit_cases(project / "out" / "report.xml") == {"good": True, "bad": False}
    assert json.loads((project / "results.json").read_text())["summary"]["failed"] == 1
    assert "junit results written to out/report.xml" in result.stderr
    assert "json results written to results.json" in result.stderr


def test_the_single_form_still_works(project: Path) -> None:
    result = atp(project, "test", "--output=junit", "--output-file=report.xml")
    assert result.returncode == 1, result.stderr
    assert junit_cases(project / "report.xml") == {"good": True, "bad": False}
    # --output-file goes to the one file-writing output given no file of its own
    result = atp(project, "test", "--output=json:r.json", "--output=junit", "--output-file=r.xml")
    assert result.returncode == 1, result.stderr
    assert junit_cases(project / "r.xml") == {"good": True, "bad": False}
    assert json.loads((project / "r.json").read_text())["suite"] == "outputs"


def test_a_named_stdout_replaces_the_console(project: Path) -> None:
    result = atp(project, "test", "--output=json:-", "--output=junit:r.xml")
    assert result.returncode == 1, result.stderr
    assert json.loads(result.stdout)["summary"]["total"] == 2
    assert (project / "r.xml").exists()


def test_several_suites_write_a_file_each_for_every_output(project: Path) -> None:
    other = suite_file(project / "more" / "other.yaml", "other suite", a_test("o"))
    result = atp(project, "test", "suite.yaml", str(other), "--output=junit:r.xml", "--output=json:r.json")
    assert result.returncode == 1, result.stderr
    assert junit_cases(project / "r.outputs.xml") == {"good": True, "bad": False}
    assert junit_cases(project / "r.other_suite.xml") == {"o": True}
    assert json.loads((project / "r.other_suite.json").read_text())["summary"]["passed"] == 1
    for stdout in (
        "--output=json:-",
        "--output=json",
        "--output=junit:/dev/stdout",
    ):  # documents back to back
        refused = atp(project, "test", "suite.yaml", str(other), stdout)
        assert refused.returncode == 2 and "report to stdout takes one suite" in refused.stderr, (
            refused.stderr
        )


def test_suites_of_one_name_do_not_write_over_each_others_files(project: Path) -> None:
    twin = suite_file(project / "twin" / "suite.yaml", "outputs", a_test("twin_test"))
    result = atp(project, "test", "suite.yaml", str(twin), "--output=junit:r.xml")
    assert result.returncode == 1, result.stderr
    assert junit_cases(project / "r.outputs.xml") == {"good": True, "bad": False}
    assert junit_cases(project / "r.outputs-2.xml") == {"twin_test": True}


def test_dev_stdout_adds_to_what_stdout_is(project: Path) -> None:
    log = project / "ci.log"
    log.write_text("an earlier line of the log\n")
    with log.open("a") as out:
        code = subprocess.run(
            [ATP, "test", "--output=junit:/dev/stdout"],
            cwd=project,
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=120,
        ).returncode
    assert code == 1
    text = log.read_text()
    assert text.startswith("an earlier line of the log\n<?xml")  # added to the log; no console beside it
    assert 'name="bad"' in text and "ATP Test Results" not in text
    # a report file named by an open file of atp's that is not stdout is added to as well
    other = project / "other.log"
    other.write_text("kept\n")
    with other.open("a") as err:
        code = subprocess.run(
            [ATP, "test", "-q", "--output=junit:/dev/stderr"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=120,
        ).returncode
    assert code == 1 and other.read_text().startswith("kept\n")
    assert "<testsuites>" in other.read_text()


def test_the_baseline_and_unwritable_folders_are_refused_before_any_run(project: Path) -> None:
    saved = atp(project, "baseline", "save", "--suite=suite.yaml", "--output=base.json")
    assert saved.returncode == 0, saved.stderr
    before = (project / "base.json").read_bytes()
    runs = len(list((project / ".atp" / "runs").iterdir()))
    result = atp(project, "test", "--baseline=base.json", "--output=json:base.json")
    assert result.returncode == 2 and "--output=json:base.json is the input file" in result.stderr, (
        result.stderr
    )
    assert (project / "base.json").read_bytes() == before
    (project / "plain").write_text("a file, not a folder")
    result = atp(project, "test", "--output=junit:plain/x/report.xml")
    assert result.returncode == 2
    assert "--output=junit:plain/x/report.xml:" in result.stderr and "plain is not a folder" in result.stderr
    assert len(list((project / ".atp" / "runs").iterdir())) == runs  # nothing ran


def test_atp_report_renders_any_format_of_the_latest_run(project: Path) -> None:
    assert atp(project, "test", "--output=console").returncode == 1
    result = atp(project, "report", "--output=junit:later.xml", "--output=json:later.json")
    assert result.returncode == 1, result.stderr
    assert junit_cases(project / "later.xml") == {"good": True, "bad": False}
    assert json.loads((project / "later.json").read_text())["summary"]["failed"] == 1
    [run_dir] = (project / ".atp" / "runs").iterdir()
    named = atp(project, "report", str(run_dir), "--output=junit")
    assert named.stdout.startswith("<?xml") and 'name="bad"' in named.stdout


@pytest.mark.parametrize(
    ("outputs", "error"),
    [
        (
            ("--output=json:same.out", "--output=junit:same.out"),
            "--output=junit:same.out and --output=json:same.out would both write same.out",
        ),
        (
            ("--output=json", "--output=junit"),
            "the json and junit reports would both go to standard output; give them files",
        ),
        (("--output=console:c.txt",), "the console reporter writes to the terminal and takes no file"),
        (
            ("--output=json:r.json", "--output-file=x.json"),
            "--output-file needs an --output that writes a file (like json); every one names its own file already",
        ),
        (("--output=json:",), "--output=json: names no file; write json:FILE or json"),
        (("--output=json:suite.yaml",), "--output=json:suite.yaml is the input file "),
        (("--output=nothing:x",), "nothing"),
    ],
)
def test_outputs_that_clash_are_refused_before_any_run(
    project: Path, outputs: tuple[str, ...], error: str
) -> None:
    result = atp(project, "test", *outputs)
    assert result.returncode == 2, result.stdout + result.stderr
    assert error in result.stderr
    assert not (project / ".atp").exists()  # refused before anything ran
