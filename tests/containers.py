"""A real Docker engine for the container tests, and the images they run, built here from
nothing (no registry is reachable): a root filesystem holding Debian's static busybox, imported
with ``docker import``. A Python agent runs in it with the host's interpreter mounted
read-only (:func:`python_mounts`).

The tests skip only when ``ATP_SKIP_DOCKER=1`` is set; otherwise an engine that cannot be
reached fails them, saying how to start one (``.ci/run`` starts one on a fresh machine)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

BUSYBOX_IMAGE = "atp-test/busybox:1"
LABEL_OWNER = "atp.owner"


def engine() -> Any:
    """A Docker SDK client of a running engine, or the test skipped (``ATP_SKIP_DOCKER=1``)
    or failed (no engine)."""
    if os.environ.get("ATP_SKIP_DOCKER") == "1":
        pytest.skip("ATP_SKIP_DOCKER=1")
    import docker

    try:
        found = docker.from_env(timeout=60)
        found.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"no Docker engine is reachable ({exc}); start one (dockerd &) or set ATP_SKIP_DOCKER=1")
    return found


def busybox_image(client: Any) -> str:
    """The busybox image, imported once per engine."""
    import docker

    try:
        client.images.get(BUSYBOX_IMAGE)
        return BUSYBOX_IMAGE
    except docker.errors.ImageNotFound:
        pass
    busybox = shutil.which("busybox") or "/bin/busybox"
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        for folder in ("bin", "tmp", "etc", "root", "proc", "sys", "dev"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in applets:
            if applet == "busybox":
                continue
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(passwd)
        tar.addfile(info, io.BytesIO(passwd))
    subprocess.run(
        ["docker", "import", "--change", "ENV PATH=/bin", "-", BUSYBOX_IMAGE],
        input=data.getvalue(),
        check=True,
        capture_output=True,
    )
    return BUSYBOX_IMAGE


def python_mounts() -> list[str]:
    """The read-only mounts (``HOST:CONTAINER``) that let a busybox container run the host's
    Python interpreter: its installation, and the system's libraries and loader where the
    interpreter looks for them (``/lib`` and ``/lib64`` are links into ``/usr`` on the host)."""
    mounts = [sys.base_prefix]
    for place in ("/lib", "/lib64", "/usr/lib", "/usr/lib64"):
        real = os.path.realpath(place)
        if os.path.isdir(real):
            mounts.append(f"{real}:{place}")
    return mounts


def python() -> str:
    """The host's interpreter, as the container runs it (not the virtual environment's link)."""
    return os.path.realpath(sys.executable)


def atp_containers(client: Any) -> list[str]:
    """The names of every container of ATP's on the engine, running or not."""
    return [c.name for c in client.containers.list(all=True, filters={"label": LABEL_OWNER})]


def agents_folder() -> Path:
    return Path(__file__).resolve().parent / "agents"
