#!/usr/bin/env python3
"""A test agent for the stdin/stdout transport whose file artifacts declare their size and
hash (``size_bytes``, ``content_hash``), truly or not, and send binary content in base64.

What it does is the task's ``input_data.mode``:

    honest         report.md (text), logo.png (a real PNG, base64, content_type image/png),
                   notes.bin (UTF-8 text in base64, content_type application/octet-stream) and
                   data.bin (written in its working folder, named by path): each with its true
                   size and sha256
    hash_mismatch  report.md whose content_hash is another text's sha256
    size_mismatch  report.md whose size_bytes says 120 (the content has 98 bytes)
    file_mismatch  data.bin written in its working folder, 10 bytes, declared as 12
    bad_base64     logo.png (content_type image/png) whose content is not base64
    bad_hash       report.md whose content_hash names md5
"""

import base64
import hashlib
import json
import struct
import sys
import zlib

REPORT = "# Report\n\n## Competitors\n1. Microsoft Teams\n2. Zoom\n3. Google Meet\n\nAll of them sell to any team.\n"
NOTES = "Meeting notes: Microsoft Teams leads; naïve estimate ±5%.\n"


def png() -> bytes:
    """A 1x1 red PNG."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def text_file(path: str, text: str, **declared: object) -> dict[str, object]:
    data = text.encode("utf-8")
    artifact = {"type": "file", "path": path, "content_type": "text/markdown", "content": text}
    artifact.update({"size_bytes": len(data), "content_hash": sha256(data)})
    artifact.update(declared)
    return artifact


def binary_file(path: str, data: bytes, content_type: str) -> dict[str, object]:
    return {
        "type": "file",
        "path": path,
        "content_type": content_type,
        "size_bytes": len(data),
        "content_hash": sha256(data),
        "content": base64.b64encode(data).decode("ascii"),
    }


def written(path: str, data: bytes, size: int) -> dict[str, object]:
    with open(path, "wb") as handle:
        handle.write(data)
    return {"type": "file", "path": path, "size_bytes": size, "content_hash": sha256(data)}


def artifacts(mode: str) -> list[dict[str, object]]:
    if mode == "honest":
        return [
            text_file("report.md", REPORT),
            binary_file("logo.png", png(), "image/png"),
            binary_file("notes.bin", NOTES.encode("utf-8"), "application/octet-stream"),
            written("data.bin", b"0123456789", 10),
        ]
    if mode == "hash_mismatch":
        return [text_file("report.md", REPORT, content_hash=sha256(b"another report"))]
    if mode == "size_mismatch":
        return [text_file("report.md", REPORT, size_bytes=120)]
    if mode == "file_mismatch":
        return [written("data.bin", b"0123456789", 12)]
    if mode == "bad_base64":
        return [{"type": "file", "path": "logo.png", "content_type": "image/png", "content": "not base64!"}]
    if mode == "bad_hash":
        return [
            text_file("report.md", REPORT, content_hash="md5:" + hashlib.md5(REPORT.encode()).hexdigest())
        ]
    raise SystemExit(f"unknown mode {mode!r}")


def main() -> None:
    request = json.loads(sys.stdin.readline())
    mode = (request["task"].get("input_data") or {})["mode"]
    response = {
        "version": "1.0",
        "task_id": request["task_id"],
        "status": "completed",
        "artifacts": artifacts(mode),
        "metrics": {"total_steps": 1},
    }
    print(json.dumps(response), flush=True)


if __name__ == "__main__":
    main()
