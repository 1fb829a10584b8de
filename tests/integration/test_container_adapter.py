"""The ``container`` adapter on a real Docker engine, through ``atp test`` as a user runs it: an
agent image built here (busybox, the host's Python mounted read-only) runs end to end with
events and workspace files; its memory limit kills it and the run says so; without a network it
cannot connect; a timeout removes its container and keeps its events; a canary secret appears in
nothing ATP writes; and however ATP ends (SIGINT, SIGTERM, SIGKILL and one more start), no
container of ATP's is left."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ATP, write
from tests.containers import agents_folder, atp_containers, busybox_image, engine, python, python_mounts

CANARY = "canary-7f3a9c2e51d84b06"


@pytest.fixture(scope="module")
def docker() -> Iterator[Any]:
    client = engine()
    busybox_image(client)
    yield client
    client.close()


def suite(folder: Path, tests: str, **agent: str) -> Path:
    mounts = [*python_mounts(), f"{agents_folder()}:/agents"]
    settings = {
        "memory": "96Mi",
        "network": "none",
        "extra": "",
        **agent,
    }
    (folder / "fixture").mkdir(exist_ok=True)
    (folder / "fixture" / "given.txt").write_text("from the fixture\n")
    return write(
        folder / "suite.yaml",
        "test_suite: containers\n"
        "agents:\n"
        "  - name: boxed\n"
        "    type: container\n"
        "    image: atp-test/busybox:1\n"
        f"    command: [{python()!r}, /agents/container_agent.py]\n"
        f"    readonly_mounts: {json.dumps(mounts)}\n"
        f"    resources: {{memory: {settings['memory']}, cpu: '1', pids: 64}}\n"
        f"    network: {settings['network']}\n"
        "    pull: never\n"
        "    grace_seconds: 1\n"
        "    env: {API_TOKEN: '${CANARY_TOKEN}', ATP_TEST_HOST: '${ATP_TEST_HOST:-127.0.0.1}', ATP_TEST_PORT: '${ATP_TEST_PORT:-9}'}\n"
        f"{settings['extra']}"
        f"tests:\n{tests}",
    )


def atp(
    folder: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ATP, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", "CANARY_TOKEN": CANARY, **(env or {})},
    )


def results(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "results.json").read_text())


def test_an_agent_container_runs_end_to_end_with_events_and_workspace_files(
    docker: Any, tmp_path: Path
) -> None:
    path = suite(
        tmp_path,
        (
            "  - id: work\n    task: {description: work, workspace_fixture: fixture}\n"
            "    assertions:\n"
            "      - {type: contains, config: {path: out/result.txt, pattern: inside the container}}\n"
            "  - id: unlisted\n    task: {description: unlisted, workspace_fixture: fixture}\n"
            "    assertions: [{type: contains, config: {path: report.md, pattern: nothing listed}}]\n"
            "  - id: whoami\n    task: {description: whoami}\n"
        ),
    )
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 0, result.stdout + result.stderr
    runs = {t["id"]: t["runs"][0] for t in results(tmp_path)["tests"]}
    assert [e["event_type"] for e in runs["work"]["events"]] == ["progress", "tool_call"]
    assert runs["whoami"]["artifacts"][0]["data"] == {"uid": 65534, "root": "read-only"}  # nobody, by default
    written = {a["path"]: a for a in runs["unlisted"]["artifacts"]}
    assert list(written) == ["report.md"]  # found in the workspace; the fixture's own file is not the agent's
    assert written["report.md"]["size_bytes"] == len("# Report\n\nnothing listed\n") and written["report.md"][
        "content_hash"
    ].startswith("sha256:")
    assert atp_containers(docker) == []


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    user: '0'\n", {"uid": 0, "root": "writable"}),
        ("    user: '0'\n    read_only_rootfs: true\n", {"uid": 0, "root": "read-only"}),
    ],
)
def test_the_user_and_a_read_only_root_filesystem(
    docker: Any, tmp_path: Path, extra: str, expected: dict[str, Any]
) -> None:
    path = suite(tmp_path, "  - id: whoami\n    task: {description: whoami}\n", extra=extra)
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert results(tmp_path)["tests"][0]["runs"][0]["artifacts"][0]["data"] == expected


def test_the_memory_limit_kills_the_agent_and_the_run_says_so(docker: Any, tmp_path: Path) -> None:
    path = suite(tmp_path, "  - id: hungry\n    task: {description: oom}\n", memory="48Mi")
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 1
    [run] = results(tmp_path)["tests"][0]["runs"]
    assert run["error"].startswith(
        "the container ran out of memory (its limit is 48Mi) and the engine killed it"
    )
    assert "ran out of memory" in result.stdout
    assert atp_containers(docker) == []


def test_without_a_network_the_agent_cannot_connect(docker: Any, tmp_path: Path) -> None:
    with socket.socket() as server:  # a port on the host that accepts connections
        server.bind(("0.0.0.0", 0))
        server.listen()
        port = server.getsockname()[1]
        host = _host_address()
        tests = "  - id: net\n    task: {description: network}\n"
        env = {"ATP_TEST_HOST": host, "ATP_TEST_PORT": str(port)}
        atp(tmp_path, "test", f"--suite={suite(tmp_path, tests)}", "--output=json:results.json", env=env)
        outcome = results(tmp_path)["tests"][0]["runs"][0]["artifacts"][0]["data"]["outcome"]
        assert outcome.startswith("refused"), outcome
        # the same agent on the bridge network reaches the host
        atp(
            tmp_path,
            "test",
            f"--suite={suite(tmp_path, tests, network='bridge')}",
            "--output=json:results.json",
            env=env,
        )
        outcome = results(tmp_path)["tests"][0]["runs"][0]["artifacts"][0]["data"]["outcome"]
        assert outcome == "connected"


def _host_address() -> str:
    """An address of this host that a container on the bridge network can reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # no packet is sent: the route's source address
        return str(probe.getsockname()[0])


def test_a_timeout_removes_the_container_and_keeps_the_events(docker: Any, tmp_path: Path) -> None:
    path = suite(
        tmp_path, "  - id: slow\n    task: {description: hang}\n    constraints: {timeout_seconds: 2}\n"
    )
    started = time.monotonic()
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 1
    assert time.monotonic() - started < 30
    [run] = results(tmp_path)["tests"][0]["runs"]
    assert run["status"] == "timeout"
    assert [e["payload"].get("message") for e in run["events"]] == ["about to hang"]
    assert atp_containers(docker) == []


def test_a_canary_secret_appears_nowhere_atp_writes(docker: Any, tmp_path: Path) -> None:
    path = suite(tmp_path, "  - id: leak\n    task: {description: canary}\n")
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json", "-v")
    assert CANARY not in result.stdout + result.stderr
    assert "***" in (tmp_path / "results.json").read_text()
    for file in (tmp_path / ".atp").rglob("*"):
        if file.is_file():
            assert CANARY.encode() not in file.read_bytes(), file
    assert CANARY.encode() not in (tmp_path / "results.json").read_bytes()


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_no_container_is_left_however_atp_ends(docker: Any, tmp_path: Path, how: signal.Signals) -> None:
    tests = "".join(f"  - id: slow{i}\n    task: {{description: hang}}\n" for i in range(2))
    path = suite(tmp_path, tests)
    process = subprocess.Popen(
        [ATP, "test", f"--suite={path}", "--parallel=2"],
        cwd=tmp_path,
        env={**os.environ, "NO_COLOR": "1", "CANARY_TOKEN": CANARY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while len(atp_containers(docker)) < 2:  # both runs' containers are up
        assert time.monotonic() < deadline, "the containers did not start"
        time.sleep(0.2)
    process.send_signal(how)
    process.wait(timeout=60)
    if how == signal.SIGKILL:
        assert len(atp_containers(docker)) == 2  # nothing could remove them...
        again = suite(tmp_path, "  - id: ok\n    task: {description: whoami}\n")
        result = atp(tmp_path, "test", f"--suite={again}")
        assert result.returncode == 0, result.stdout + result.stderr  # ...until the next start
    assert atp_containers(docker) == []


@pytest.mark.parametrize(
    ("extra", "env", "expected"),
    [
        (
            "    docker: /nowhere/docker\n",
            {},
            "the Docker client '/nowhere/docker' cannot be run: /nowhere/docker does not exist",
        ),
        (
            "",
            {"DOCKER_HOST": "unix:///nowhere/docker.sock"},
            "the Docker engine is not reachable at unix:///nowhere/docker.sock",
        ),
    ],
    ids=["no-client", "no-engine"],
)
def test_no_docker_is_a_clear_error_before_any_run(
    tmp_path: Path, extra: str, env: dict[str, str], expected: str
) -> None:
    path = suite(tmp_path, "  - id: t\n    task: {description: whoami}\n", extra=extra)
    result = atp(tmp_path, "test", f"--suite={path}", env=env)
    assert result.returncode == 2 and expected in result.stderr, result.stderr
    assert "set DOCKER_HOST" in result.stderr or "install Docker" in result.stderr
    assert all(not f.read_text() for f in tmp_path.glob(".atp/runs/*/results.jsonl"))  # no run ran


def test_a_missing_image_is_a_clear_error_before_any_run(docker: Any, tmp_path: Path) -> None:
    for pull, expected in (
        ("never", "the image 'atp-test/absent:1' is not on this engine and pull is 'never'"),
        ("missing", "the image 'atp-test/absent:1' is not on this engine and pulling it failed"),
    ):
        path = suite(tmp_path, "  - id: t\n    task: {description: whoami}\n")
        path.write_text(
            path.read_text()
            .replace("image: atp-test/busybox:1", "image: atp-test/absent:1")
            .replace("pull: never", f"pull: {pull}")
        )
        result = atp(tmp_path, "test", f"--suite={path}")
        assert result.returncode == 2 and expected in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ("{memory: lots}", "'lots' is not a memory size (write it like 512Mi, 2Gi or 256M)"),
        ("{memory: 1Mi}", "'1Mi' is less than the 6 MiB the engine accepts"),
        ("{cpu: fast}", "'fast' is not a number of CPUs"),
        ("{cpu: '-1'}", "'-1' is not a number of CPUs between 0 and 1024"),
    ],
)
def test_a_bad_resource_string_is_a_located_suite_error(
    tmp_path: Path, resources: str, expected: str
) -> None:
    path = suite(tmp_path, "  - id: t\n    task: {description: whoami}\n")
    path.write_text(
        path.read_text().replace("resources: {memory: 96Mi, cpu: '1', pids: 64}", f"resources: {resources}")
    )
    result = atp(tmp_path, "test", f"--suite={path}")
    assert result.returncode == 2, result.stderr
    assert f"{path}:8: at agents[0].resources" in result.stderr and expected in result.stderr, result.stderr


def test_secret_values_stay_off_the_command_line_and_labels(tmp_path: Path) -> None:
    from atp.adapters.container import ContainerAdapter, ContainerSettings
    from atp.core.protocol import ATPRequest, Task

    (tmp_path / "a,b").mkdir()
    settings = ContainerSettings(image="x", env={"API_TOKEN": CANARY}, readonly_mounts=["a,b:/data"])
    adapter = ContainerAdapter(settings, name="a", base_dir=tmp_path)
    request = ATPRequest(version="1.0", task_id="t", task=Task(description="d"), metadata={"run_id": "r1"})
    argv = adapter.argv(request, "atp-1")
    assert CANARY not in " ".join(argv) and argv[argv.index("--env") : argv.index("--env") + 2] == [
        "--env",
        "API_TOKEN",
    ]
    assert adapter.encoded_env[b"API_TOKEN"] == CANARY.encode()  # the client passes it on
    assert argv[argv.index("--network") + 1] == "none" and argv[argv.index("--cap-drop") :][:2] == [
        "--cap-drop",
        "ALL",
    ]
    assert "atp.run=r1" in argv and "no-new-privileges" in argv
    assert (
        f'type=bind,"source={tmp_path}/a,b",target=/data,readonly' in argv
    )  # one field, as the client reads it


def test_atp_clean_removes_the_containers_of_atp_processes_that_are_gone(docker: Any, tmp_path: Path) -> None:
    from atp.adapters.container import _here, _owner

    def labelled(owner: str, run: str) -> Any:
        return docker.containers.create(
            "atp-test/busybox:1", ["sleep", "600"], labels={"atp.owner": owner, "atp.run": run}
        )

    gone = labelled(f"1:0@{_here()}", "old")  # pid 1 did not start at 0: its ATP is gone
    mine = labelled(_owner(os.getpid()), "live")  # this process: it runs
    elsewhere = labelled("1:0@another-machine/4026531836", "theirs")  # ATP cannot tell: kept
    try:
        result = atp(tmp_path, "clean")
        assert result.returncode == 0, result.stderr
        assert f"container: removed container {gone.name} (run old)" in result.stdout
        assert sorted(atp_containers(docker)) == sorted([mine.name, elsewhere.name])
    finally:
        mine.remove(force=True)
        elsewhere.remove(force=True)


@pytest.mark.parametrize("network", ["none", "bridge"])
def test_the_mock_tool_server_is_reachable_from_a_container(
    docker: Any, tmp_path: Path, network: str
) -> None:
    path = suite(
        tmp_path,
        (
            "  - id: tools\n"
            "    task: {description: call, input_data: {calls: [{tool: lookup, input: {id: 1}}]}}\n"
            "    tools: [{name: lookup, output: {name: one}}]\n"
            "    assertions: [{type: must_use_tools, config: {tools: [lookup]}}]\n"
        ),
        network=network,
    )
    path.write_text(path.read_text().replace("/agents/container_agent.py", "/agents/tool_caller.py"))
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = results(tmp_path)["tests"][0]["runs"]
    data = run["artifacts"][0]["data"]
    assert not data["endpoint"].startswith("http://127.0.0.1")  # the gateway of the container's network
    assert data["endpoint"].endswith("/tools")  # the path kept: a tool is at {tools_endpoint}/<name>
    [call] = data["calls"]
    assert call["http_status"] == 200 and call["body"]["output"] == {"name": "one"}
    assert [e["payload"]["tool"] for e in run["events"] if e["event_type"] == "tool_call"] == ["lookup"]
    assert atp_containers(docker) == []
    assert not docker.networks.list(filters={"label": "atp.owner"})  # its own network is gone too


def test_memory_and_cpu_strings() -> None:
    from atp.adapters.container import parse_cpu, parse_memory

    assert parse_memory("512Mi") == parse_memory("512M") == parse_memory("512m") == 512 * 1024**2
    assert parse_memory("2Gi") == 2 * 1024**3 and parse_memory("1.5g") == int(1.5 * 1024**3)
    assert parse_memory(64 * 1024**2) == 64 * 1024**2
    assert parse_cpu("1") == 1.0 and parse_cpu(0.5) == 0.5 and parse_cpu("500m") == 0.5
    for bad in ("", "12 parsecs", "-5Mi", "5Mi"):
        with pytest.raises(ValueError):
            parse_memory(bad)
    for bad_cpu in ("0", "nan", "inf", "2000"):
        with pytest.raises(ValueError):
            parse_cpu(bad_cpu)


def test_artifact_paths_out_of_the_workspace_are_refused(docker: Any, tmp_path: Path) -> None:
    path = suite(
        tmp_path,
        (
            "  - id: escape\n    task: {description: escape, workspace_fixture: fixture}\n"
            "    assertions: [{type: contains, config: {path: link, pattern: root}}]\n"
        ),
    )
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 1
    [run] = results(tmp_path)["tests"][0]["runs"]
    refused = [w for w in run["warnings"] if "leads out of the workspace" in w]
    assert [w.split("'")[1] for w in refused] == ["../outside.txt", "link", "/etc/hostname"]
    assert [a["path"] for a in run["artifacts"]] == ["../outside.txt", "link", "/etc/hostname", "fine.txt"]
    assert "size_bytes" not in run["artifacts"][1]  # nothing of /etc/passwd was read
    assert "outside the workspace" in run["checks"][0]["message"]


def test_through_atps_network_the_agent_reaches_the_tools_and_nothing_else_of_the_host(
    docker: Any, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("ATP limits the host's address to the relay with iptables, as root only")
    with socket.socket() as server:  # a service of the host listening on all addresses
        server.bind(("0.0.0.0", 0))
        server.listen()
        tests = (
            "  - id: gateway\n    task: {description: gateway}\n"
            "    tools: [{name: lookup, output: {name: one}}]\n"
        )
        result = atp(
            tmp_path,
            "test",
            f"--suite={suite(tmp_path, tests)}",
            "--output=json:results.json",
            env={"ATP_TEST_PORT": str(server.getsockname()[1])},
        )
    assert result.returncode == 0, result.stdout + result.stderr
    [run] = results(tmp_path)["tests"][0]["runs"]
    data = run["artifacts"][0]["data"]
    assert data["tool_status"] == 200 and data["probe"].startswith("refused"), data
    assert not any("ATP could not limit it" in w for w in run["warnings"])
    rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True).stdout
    assert "br-" not in rules  # the rules went with the network


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("network: none", "network: atp-no-such-network"),
            "the network 'atp-no-such-network' does not exist on this engine",
        ),
        (("cpu: '1'", "cpu: '4096'"), "'4096' is not a number of CPUs between 0 and 1024"),
        (("cpu: '1'", "cpu: '1000'"), "resources.cpu asks for 1000 CPUs; the engine has"),
    ],
)
def test_what_the_engine_would_refuse_at_every_run_is_refused_before_any(
    docker: Any, tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    path = suite(tmp_path, "  - id: t\n    task: {description: whoami}\n")
    path.write_text(path.read_text().replace(*change))
    result = atp(tmp_path, "test", f"--suite={path}")
    assert result.returncode == 2 and expected in result.stderr, result.stdout + result.stderr


def test_a_command_that_is_not_in_the_image_says_so(docker: Any, tmp_path: Path) -> None:
    path = suite(tmp_path, "  - id: t\n    task: {description: whoami}\n")
    path.write_text(path.read_text().replace(f"command: [{python()!r}", "command: ['/no/such/agent'"))
    result = atp(tmp_path, "test", f"--suite={path}", "--output=json:results.json")
    assert result.returncode == 1
    error = results(tmp_path)["tests"][0]["runs"][0]["error"]
    assert error.startswith("the container could not start: ") and "/no/such/agent" in error, error
    assert atp_containers(docker) == []


def test_workspace_files_with_undecodable_names_and_huge_sizes(docker: Any, tmp_path: Path) -> None:
    tests = (
        "  - id: badname\n    task: {description: badname, workspace_fixture: fixture}\n"
        "  - id: sparse\n    task: {description: sparse, workspace_fixture: fixture}\n"
    )
    started = time.monotonic()
    result = atp(tmp_path, "test", f"--suite={suite(tmp_path, tests)}", "--output=json:results.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert time.monotonic() - started < 30  # 2 GiB is not read
    runs = {t["id"]: t["runs"][0] for t in results(tmp_path)["tests"]}
    assert [a["path"] for a in runs["badname"]["artifacts"]] == ["good.txt"]
    assert any("not UTF-8" in w and "bad\\xffname.txt" in w for w in runs["badname"]["warnings"]), runs[
        "badname"
    ]["warnings"]
    [sparse] = runs["sparse"]["artifacts"]
    assert sparse["size_bytes"] == 2 * 1024**3 and "content_hash" not in sparse
