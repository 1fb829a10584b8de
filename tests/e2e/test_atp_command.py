"""The `atp` command as a user runs it: real processes, real files, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ATP, EXAMPLES, FIXTURES, ROOT, behave_agent, write
from tests.facts import one_error

QUICKSTART = EXAMPLES / "quickstart" / "suite.yaml"


def atp(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [ATP, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def suite_for(tmp_path: Path, command: list[str], tests: str) -> Path:
    return write(
        tmp_path / "suite.yaml",
        f"test_suite: e2e\nagents:\n  - name: agent\n    type: cli\n    command: {command!r}\ntests:\n{tests}",
    )


def test_quickstart_suite_passes(tmp_path: Path) -> None:
    result = atp("test", f"--suite={QUICKSTART}", "--agent=research-agent", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Suite: competitor_analysis" in out and "Agent: research-agent (cli)" in out
    assert "  ✓ basic_competitor_search" in out and "  ✓ market_shares_are_percentages" in out
    assert "Summary: 3 passed, 0 failed, 0 skipped (100.0%)" in out
    assert list((tmp_path / ".atp" / "runs").iterdir())


def test_design_example_suite_against_the_minimal_agent_exits_0(tmp_path: Path) -> None:
    result = atp(
        "test",
        f"--suite={FIXTURES / 'test_suites' / 'design_example.yaml'}",
        "--agent=minimal-agent",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "  ✓ competitor_analysis_001" in result.stdout
    assert "Summary: 1 passed, 0 failed, 0 skipped" in result.stdout


def test_failing_assertion_exits_1_and_names_the_check(tmp_path: Path) -> None:
    result = atp("test", f"--suite={QUICKSTART}", "--agent=minimal-agent", "--tags=core", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "  ✗ basic_competitor_search" in result.stdout
    assert (
        "    - artifact_exists:report.md: expected artifact 'report.md'; the agent produced result (structured)"
        in result.stdout
    )
    assert (
        "    - behavior:must_use_tools: expected calls to web_search; not called: web_search" in result.stdout
    )
    assert "1 deselected" in result.stdout


def test_malformed_suite_exits_2_with_file_path_and_line(tmp_path: Path) -> None:
    suite = write(
        tmp_path / "broken.yaml",
        """
        test_suite: broken
        tests:
          - id: a
            task: {description: x}
          - id: b
            task: {description: y}
          - id: c
            task: {description: z}
            assertions:
              - type: artifact_exists
                config: {path: a.md}
              - typ: contains
        """,
    )
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    one_error(result.stderr, f"{suite}:12:", "tests[2].assertions[1].typ", "unknown field", "'typ'")
    assert "Traceback" not in result.stderr


def test_usage_and_config_errors_exit_2(tmp_path: Path) -> None:
    missing_agent = atp("test", f"--suite={QUICKSTART}", "--agent=nobody", cwd=tmp_path)
    assert missing_agent.returncode == 2
    assert (
        "no agent named 'nobody' (defined: minimal-agent, research-agent, research-agent-persistent)"
        in missing_agent.stderr
    )
    bad_option = atp("test", f"--suite={QUICKSTART}", "--parallel=0", cwd=tmp_path)
    assert bad_option.returncode == 2 and "--parallel" in bad_option.stderr
    no_match = atp("test", f"--suite={QUICKSTART}", "--agent=research-agent", "--tags=nothing", cwd=tmp_path)
    assert (
        no_match.returncode == 2
        and "matches the selection (tags in the suite: core, smoke)" in no_match.stderr
    )
    unknown_output = atp(
        "test", f"--suite={QUICKSTART}", "--agent=research-agent", "--output=pdf", cwd=tmp_path
    )
    assert unknown_output.returncode == 2 and "unknown output 'pdf'" in unknown_output.stderr


def test_timeout_of_2s_against_an_agent_that_sleeps_forever(tmp_path: Path) -> None:
    suite = suite_for(
        tmp_path,
        behave_agent("sleep"),
        "  - id: sleeper\n    task: {description: x}\n    constraints: {timeout_seconds: 2}\n",
    )
    started = time.monotonic()
    result = atp("test", f"--suite={suite}", "--output=json", "--output-file=results.json", cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert elapsed < 6, elapsed
    data = json.loads((tmp_path / "results.json").read_text())
    run = data["tests"][0]["runs"][0]
    assert run["status"] == "timeout" and 1.9 < run["duration_seconds"] < 3.5
    assert run["error"] == "timed out after 2 s; the agent was stopped"
    assert [e["event_type"] for e in run["events"]] == ["tool_call", "progress"]
    assert run["events"][1]["payload"]["message"] == "thinking hard"
    assert "- timeout: timed out after 2 s; the agent was stopped" in result.stdout


def _start_slow_suite(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    tests = "".join(f"  - id: t{i}\n    task: {{description: x}}\n" for i in range(8))
    suite = suite_for(tmp_path, behave_agent("slow", "0.4"), tests)
    process = subprocess.Popen(
        [ATP, "test", f"--suite={suite}"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    results_file: Path | None = None
    while time.monotonic() < deadline:
        found = list((tmp_path / ".atp" / "runs").glob("*/results.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 2:
            results_file = found[0]
            break
        time.sleep(0.05)
    assert results_file is not None, "no run finished in time"
    return process, results_file.parent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_atp_keeps_finished_runs_and_reports_them(tmp_path: Path, sig: signal.Signals) -> None:
    process, run_dir = _start_slow_suite(tmp_path)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == (130 if sig == signal.SIGINT else 143), stderr
    finished = len((run_dir / "results.jsonl").read_text().splitlines())
    assert 2 <= finished < 8
    assert f"finished runs are kept in {run_dir}" in stderr
    assert (
        "interrupted" in stdout and f"Summary: {finished} passed, 0 failed, {8 - finished} skipped" in stdout
    )
    report = atp("report", str(run_dir), cwd=tmp_path)
    assert report.returncode == process.returncode  # exits as the live run did
    assert f"Summary: {finished} passed, 0 failed, {8 - finished} skipped" in report.stdout
    assert "skipped: not run: the run was interrupted" in report.stdout


def test_killed_atp_leaves_finished_runs_for_atp_report(tmp_path: Path) -> None:
    process, run_dir = _start_slow_suite(tmp_path)
    process.kill()
    process.communicate(timeout=30)
    finished = len((run_dir / "results.jsonl").read_text().splitlines())
    assert finished >= 2
    report = atp("report", "--output=json", "--output-file=partial.json", cwd=tmp_path)
    assert report.returncode == 1, report.stderr  # not every test ran
    data = json.loads((tmp_path / "partial.json").read_text())
    assert data["interrupted"] is True and data["summary"]["passed"] == finished
    assert data["summary"]["incomplete"] == 8 - finished


def test_report_renders_what_the_live_run_rendered(tmp_path: Path) -> None:
    live = atp(
        "test",
        f"--suite={QUICKSTART}",
        "--agent=research-agent",
        "--output=json",
        "--output-file=live.json",
        cwd=tmp_path,
    )
    assert live.returncode == 0
    (run_dir,) = (tmp_path / ".atp" / "runs").iterdir()
    again = atp("report", str(run_dir), "--output=json", "--output-file=again.json", cwd=tmp_path)
    assert again.returncode == 0
    assert (tmp_path / "live.json").read_text() == (tmp_path / "again.json").read_text()
    console = atp("report", str(run_dir), cwd=tmp_path)
    # the live run printed the header first and each test as it finished, then the same summary
    header, body = console.stdout.split("Tests:\n", 1)
    listed, summary = body.split("\n\n", 1)
    # (but for the config the command used, which only atp test knows)
    config = next(line for line in live.stdout.splitlines() if line.startswith("Config: "))
    assert "Config: " not in console.stdout
    assert live.stdout.replace(config + "\n", "", 1).startswith(header)
    assert live.stdout.endswith("\n\n" + summary)
    assert all(live.stdout.count(line + "\n") == 1 for line in listed.splitlines())


def test_json_to_stdout(tmp_path: Path) -> None:
    result = atp("test", f"--suite={QUICKSTART}", "--agent=research-agent", "--output=json", cwd=tmp_path)
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["summary"]["passed"] == 3 and data["agent"] == "research-agent"


def test_config_file_defines_agent_and_defaults(tmp_path: Path) -> None:
    write(
        tmp_path / "atp.config.yaml",
        f"""
        defaults: {{runs_per_test: 2, parallel_workers: 2}}
        agents:
          from-config:
            type: cli
            command: {behave_agent("ok")!r}
        reporting: {{verbose: true}}
        """,
    )
    suite = write(tmp_path / "s.yaml", "test_suite: s\ntests:\n  - id: t\n    task: {description: x}\n")
    result = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Runs per test: 2" in result.stdout and "(σ=0.0)" in result.stdout
    assert "pass@1 1.00, pass@2 1.00" in result.stdout, "verbose from the config: both runs counted"
    listed = atp("list-agents", cwd=tmp_path)
    assert listed.stdout.startswith("from-config  type=cli  ") and "atp.config.yaml:3" in listed.stdout


@pytest.fixture(scope="module")
def wordcount_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin, installed on its own (not into ATP's environment)."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(EXAMPLES / "atp-evaluator-wordcount"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return site


def test_separately_installed_plugin_adds_an_evaluator(tmp_path: Path, wordcount_site: Path) -> None:
    env = {"PYTHONPATH": str(wordcount_site)}
    plugins = atp("plugins", cwd=tmp_path, env=env)
    assert "wordcount  (atp-evaluator-wordcount 1.0.0)\n    evaluators: word_count" in plugins.stdout
    listed = atp("list-evaluators", cwd=tmp_path, env=env)
    assert "word_count" in listed.stdout and "[wordcount]" in listed.stdout
    suite = write(
        tmp_path / "s.yaml",
        f"""
        test_suite: words
        agents:
          - {{name: minimal, type: cli, command: ["python3", "{EXAMPLES / "agents" / "minimal_agent.py"}"]}}
        tests:
          - id: short_answer
            task: {{description: Say hello}}
            assertions:
              - type: word_count
                config: {{name: result, min: 2, max: 10}}
          - id: long_answer
            task: {{description: Say hello}}
            assertions:
              - type: word_count
                config: {{name: result, min: 50}}
        """,
    )
    result = atp("test", f"--suite={suite}", cwd=tmp_path, env=env)
    assert result.returncode == 1, result.stderr
    assert "  ✓ short_answer" in result.stdout
    assert "    - word_count:result: expected at least 50 words; found 4" in result.stdout
    without = atp("test", f"--suite={suite}", cwd=tmp_path)
    assert without.returncode == 2 and "unknown assertion type 'word_count'" in without.stderr


def test_broken_plugin_is_reported_and_the_rest_work(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "atp_broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: atp-broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[atp]\nbroken = atp_broken_plugin_missing_module\n")
    env = {"PYTHONPATH": str(site)}
    plugins = atp("plugins", cwd=tmp_path, env=env)
    assert plugins.returncode == 0
    assert (
        "broken  (atp-broken-plugin 0.1)\n    error: failed to load: ModuleNotFoundError: "
        "No module named 'atp_broken_plugin_missing_module'"
    ) in plugins.stdout
    assert (
        "adapters  (atp-adapters 0.1.0)\n    adapters: cli, python, http, websocket, grpc, container, langgraph, crewai, term-sdk, agent-interface\n    services: tools\n"
        in plugins.stdout
    )
    run = atp("test", f"--suite={QUICKSTART}", "--agent=research-agent", cwd=tmp_path, env=env)
    assert run.returncode == 0
    assert "atp: warning: plugin 'broken': failed to load" in run.stderr
    disabled = atp("plugins", cwd=tmp_path, env={**env, "ATP_DISABLE_PLUGINS": "broken"})
    assert "broken" not in disabled.stdout and disabled.stderr == ""


def test_help_imports_no_heavy_dependency(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom atp.cli.main import main\n"
        "main(['--help']); main(['test', '--help'])\n"
        "heavy = {'httpx', 'docker', 'scipy', 'anthropic', 'jsonschema', 'langgraph', 'crewai', 'numpy',\n"
        "         'msgspec', 'anyio', 'yaml'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    # help loads the plugins (their commands are listed) but not what they register
    assert result.stdout.strip().endswith("[]"), result.stdout[-300:]
    assert "Run a suite against an agent." in result.stdout


def test_version_and_plugins_json(tmp_path: Path) -> None:
    version = atp("version", cwd=tmp_path)
    assert (
        version.returncode == 0 and "atp-kernel 0.1.0" in version.stdout and "atp-cli 0.1.0" in version.stdout
    )
    listing = json.loads(atp("plugins", "--json", cwd=tmp_path).stdout)
    assert {p["name"] for p in listing} >= {"adapters", "evaluators", "reporters"}


def test_readme_quick_start_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "atp test --suite=examples/quickstart/suite.yaml --agent=research-agent" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "test-command" in ci


def test_on_a_terminal_progress_and_colour(tmp_path: Path) -> None:
    """Run `atp test` with its stdout on a pseudo-terminal, as a person at a terminal would."""
    import pty

    main, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    process = subprocess.Popen(
        [ATP, "test", f"--suite={QUICKSTART}", "--agent=research-agent"],
        cwd=tmp_path,
        env=env,
        stdout=secondary,
        stderr=subprocess.PIPE,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=60)
    os.close(main)
    out = b"".join(chunks).decode()
    assert process.returncode == 0
    assert "running: 1/3 runs done" in out and "running: 3/3 runs done" in out
    assert "\x1b[32m✓\x1b[0m basic_competitor_search" in out
    assert "\r\x1b[K" in out  # the progress line is cleared before the report


def test_plugin_adds_a_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write(
        site / "atp_hello_plugin.py",
        '''
        import click

        from atp.core.hookspecs import hookimpl


        @click.command("hello")
        @click.option("--name", default="world")
        def hello(name):
            """Greet someone (a plugin's command)."""
            click.echo(f"hello, {name}")


        @hookimpl
        def atp_register_commands(cli):
            cli.add_command(hello)
        ''',
    )
    dist = site / "atp_hello_plugin-0.1.dist-info"
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: atp-hello-plugin\nVersion: 0.1\n")
    write(dist / "entry_points.txt", "[atp]\nhello = atp_hello_plugin\n")
    env = {"PYTHONPATH": str(site)}
    help_text = atp("--help", cwd=tmp_path, env=env).stdout
    assert "  hello            Greet someone (a plugin's command)." in help_text
    assert "  test             Run a suite against an agent." in help_text
    result = atp("hello", "--name=ATP", cwd=tmp_path, env=env)
    assert result.returncode == 0 and result.stdout == "hello, ATP\n"
    unknown = atp("goodbye", cwd=tmp_path, env=env)
    assert unknown.returncode == 2 and "No such command 'goodbye'" in unknown.stderr
