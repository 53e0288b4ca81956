"""The saved-module format (.tcz): everything needed to run without compiling again.

    b"TCZ1" | u64 header length | header (JSON) | sections...

The header lists the signature, the entry name, the target and, for every section (object
code, constant pool, source ONNX model), its length and SHA-256, so that a truncated or
corrupt file is recognized as such. Files are written to a temporary name and renamed into
place: a failed save never leaves half a file where the user's file was.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path

from tensorc.errors import ArtifactError

MAGIC = b"TCZ1"
VERSION = 1


def is_artifact(path: str | Path) -> bool:
    """True when ``path`` is a file that starts like a tensorc artifact."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def write(path: str | Path, header: dict, sections: dict[str, bytes]) -> None:
    header = dict(header, version=VERSION, sections=[
        {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in sections.items()])
    head = json.dumps(header).encode()
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + struct.pack("<Q", len(head)) + head)
            for data in sections.values():
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read(path: str | Path) -> tuple[dict, dict[str, bytes]]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read it: {exc.strerror}") from None
    if raw[:len(MAGIC)] != MAGIC:
        raise ArtifactError(f"{path} is not a tensorc module (compile one with "
                            f"'tensorc compile model.onnx -o {Path(path).name}')")
    try:
        (head_len,) = struct.unpack_from("<Q", raw, len(MAGIC))
        start = len(MAGIC) + 8
        header = json.loads(raw[start:start + head_len])
    except (struct.error, ValueError):
        raise ArtifactError(f"{path} is truncated or corrupt: its header cannot be read; "
                            f"compile the model again") from None
    if not isinstance(header, dict):
        raise ArtifactError(f"{path} is corrupt: its header is not a JSON object; compile the "
                            f"model again")
    if header.get("version") != VERSION:
        raise ArtifactError(f"{path} was written by another tensorc version (format "
                            f"{header.get('version')}, this one reads {VERSION}); compile again")
    try:
        table = [(str(sec["name"]), int(sec["size"]), str(sec["sha256"]))
                 for sec in header["sections"]]
    except (KeyError, TypeError, ValueError):
        raise ArtifactError(f"{path} is corrupt: its header has no valid section table; "
                            f"compile the model again") from None
    sections: dict[str, bytes] = {}
    pos = start + head_len
    for name, size, sha256 in table:
        data = raw[pos:pos + size]
        if len(data) != size:
            raise ArtifactError(f"{path} is truncated: section {name} has "
                                f"{len(data)} of {size} bytes; compile the model again")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ArtifactError(f"{path} is corrupt: section {name} fails its checksum; "
                                f"compile the model again")
        sections[name] = data
        pos += size
    return header, sections
