"""The committed Python code of the gRPC service definition is what the .proto generates today,
and it imports inside the ``atp`` namespace."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

pytest.importorskip("grpc_tools", reason="grpcio-tools (a development dependency) generates the code")

SCRIPT = ROOT / "atp-adapters" / "scripts" / "generate_grpc.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_grpc", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_code_is_what_the_proto_generates(tmp_path: Path) -> None:
    gen = generator()
    written = gen.generate(tmp_path)
    assert {path.name for path in written} == {"agent_pb2.py", "agent_pb2.pyi", "agent_pb2_grpc.py"}
    stale = []
    for path in written:
        committed = gen.PROTO_ROOT / path
        fresh = (tmp_path / path).read_text(encoding="utf-8")
        if not committed.is_file() or committed.read_text(encoding="utf-8") != fresh:
            stale.append(str(path))
    assert not stale, (
        f"the generated gRPC code is not what {', '.join(gen.PROTO_FILES)} generates now ({', '.join(stale)} "
        f"differ); refresh it with: {gen.COMMAND}"
    )


def test_generated_code_imports_inside_the_atp_namespace() -> None:
    from atp.adapters.proto.atp.v1 import agent_pb2, agent_pb2_grpc

    assert agent_pb2.DESCRIPTOR.name == "atp/v1/agent.proto"  # the canonical name, for other languages
    assert agent_pb2.ExecuteStreamItem.__module__ == "atp.adapters.proto.atp.v1.agent_pb2"
    assert agent_pb2_grpc.atp_dot_v1_dot_agent__pb2 is agent_pb2
    service = agent_pb2.DESCRIPTOR.services_by_name["Agent"]
    assert [m.full_name for m in service.methods] == [
        "atp.v1.Agent.Execute",
        "atp.v1.Agent.ExecuteStream",
        "atp.v1.Agent.Health",
    ]
    stream = service.methods_by_name["ExecuteStream"]
    assert stream.server_streaming and not stream.client_streaming
    item = agent_pb2.ExecuteStreamItem(response=b"{}")
    assert item.WhichOneof("item") == "response"
