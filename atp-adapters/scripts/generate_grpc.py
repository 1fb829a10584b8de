#!/usr/bin/env python3
"""Regenerate the Python code of ATP's gRPC service definition (``atp/v1/agent.proto``).

Run it from anywhere after changing the .proto (needs ``grpcio-tools``, a development
dependency)::

    .venv/bin/python atp-adapters/scripts/generate_grpc.py

It runs ``grpc_tools.protoc`` with the folder ``atp/adapters/proto`` as the import root, so the
file is registered under its canonical name ``atp/v1/agent.proto`` (the name other languages'
code and gRPC reflection use), and writes ``agent_pb2.py``, ``agent_pb2.pyi`` and
``agent_pb2_grpc.py`` next to it. Then it post-processes them, in a fixed way:

- the generated code would import ``atp.v1.agent_pb2``, a module that does not exist: inside the
  ``atp`` namespace the module is ``atp.adapters.proto.atp.v1.agent_pb2``, and the import and the
  module name recorded in the message classes are rewritten to it;
- each file gets a ``# ruff: noqa`` line: generated code is not held to the project's lint rules.

``tests/unit/test_grpc_generated.py`` runs :func:`generate` into a temporary folder and fails
when the committed files differ from what it produces.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent.parent / "src" / "atp" / "adapters" / "proto"
"""The import root of the .proto files: ``atp/v1/agent.proto`` is relative to it."""
PROTO_FILES = ("atp/v1/agent.proto",)
PACKAGE = "atp.adapters.proto"
"""The Python package of :data:`PROTO_ROOT`."""
COMMAND = ".venv/bin/python atp-adapters/scripts/generate_grpc.py"
"""The command that refreshes the committed code, for messages."""
NOQA = "# ruff: noqa\n"


def generate(out_dir: Path) -> list[Path]:
    """Generate the code of every .proto into ``out_dir`` (with the layout of :data:`PROTO_ROOT`),
    post-processed; returns the files written, relative to ``out_dir``."""
    from grpc_tools import protoc  # (a development dependency: imported when generating only)

    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    out_dir.mkdir(parents=True, exist_ok=True)
    for proto in PROTO_FILES:
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"-I{include}",
                f"--python_out={out_dir}",
                f"--pyi_out={out_dir}",
                f"--grpc_python_out={out_dir}",
                proto,
            ]
        )
        if code != 0:
            raise SystemExit(f"grpc_tools.protoc failed on {PROTO_ROOT / proto} (exit code {code})")
    written = []
    for proto in PROTO_FILES:
        stem = proto.removesuffix(".proto")
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            path = out_dir / (stem + suffix)
            path.write_text(post_process(path.read_text(encoding="utf-8")), encoding="utf-8")
            written.append(Path(stem + suffix))
    return written


def post_process(text: str) -> str:
    """Generated code made importable inside the ``atp`` namespace (see the module docstring)."""
    for proto in PROTO_FILES:
        module = proto.removesuffix(".proto").replace("/", ".")  # atp.v1.agent
        folder, _, name = module.rpartition(".")
        text = text.replace(
            f"from {folder} import {name}_pb2 as", f"from {PACKAGE}.{folder} import {name}_pb2 as"
        )
        text = text.replace(f"'{module}_pb2'", f"'{PACKAGE}.{module}_pb2'")
    if text.startswith("# -*- coding: utf-8 -*-\n"):
        first, _, rest = text.partition("\n")
        return f"{first}\n{NOQA}{rest}"
    return NOQA + text


def main() -> int:
    written = generate(PROTO_ROOT)
    for path in written:
        print(PROTO_ROOT / path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
