"""The saved-module format (.tcz): everything needed to run without compiling again.

    b"TCZ3" | u64 header length | header (JSON) | sections... | SHA-256 of the magic, length
                                                                and header

Every byte is checked, and hashed once: the trailing SHA-256 covers the magic, the header
length and the header (the signature, the entry name, the target, the tensorc version that
wrote it and, for every section, its length and SHA-256), and each section (object code,
constant pool, source ONNX model) is checked against its own SHA-256 from the header; the
lengths must account for every byte of the file. So no flipped bit, edited field or truncation
goes unnoticed, and ``read`` checks all of that before anything is used. The checksums guard
against corruption, not tampering: anyone who can write the file can write matching hashes.
(Format 2 hashed the sections twice, once alone and once in a whole-file hash. SHA-256 stays:
on a Zen 3, with its SHA extensions, hashlib's SHA-256 ran 2x as fast as its BLAKE2b, the
other stdlib candidate; see the commit that made format 3.)

Files are written to a temporary name in the destination's directory and renamed into place:
a failed save never leaves half a file where the user's file was.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path

from tensorc.errors import ArtifactError
from tensorc.version import __version__

MAGIC = b"TCZ3"
VERSION = 3
_PREFIX = b"TCZ"            # every format's magic starts so (TCZ1 was format 1, TCZ2 format 2)
_DIGEST = 32                # bytes of the trailing SHA-256
_FIXED = len(MAGIC) + 8     # magic and header length


def is_artifact(path: str | Path) -> bool:
    """True when ``path`` is a file that starts like a tensorc artifact (of any format)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC))[:len(_PREFIX)] == _PREFIX
    except OSError:
        return False


def encode(header: dict, sections: dict[str, bytes]) -> bytes:
    """The bytes of an artifact holding ``header`` (made JSON) and ``sections``."""
    header = dict(header, version=VERSION, tensorc_version=__version__, sections=[
        {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in sections.items()])
    head = json.dumps(header).encode()
    front = MAGIC + struct.pack("<Q", len(head)) + head
    return b"".join([front, *sections.values(), hashlib.sha256(front).digest()])


def write(path: str | Path, header: dict, sections: dict[str, bytes],
          overwrite: bool = False) -> None:
    """Write an artifact to ``path`` atomically, with the user's umask.

    An existing file that is not an artifact (the source .onnx, say) is kept unless
    ``overwrite``; every OS error becomes an ArtifactError that names the path.
    """
    path = Path(path)
    if path.is_dir():
        raise ArtifactError(f"cannot save to {path}: it is a directory; give a file name such "
                            f"as {path / 'model.tcz'}")
    if path.exists() and not overwrite and not is_artifact(path):
        raise ArtifactError(f"refusing to overwrite {path}: it exists and is not a tensorc "
                            f"artifact; save elsewhere or pass overwrite=True (CLI: --force)")
    data = encode(header, sections)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ArtifactError(f"cannot save to {path}: {exc.strerror or exc} (in directory "
                            f"{directory}); choose a writable place") from None
    try:
        # mkstemp makes the file 0600; an artifact gets what any new file of the user gets
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise ArtifactError(f"cannot save to {path}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def kind(header: dict) -> str:
    """What a header's artifact holds: "cuda" (a CUDA module, whose header says so) or "cpu"
    (native code for the CPU; such headers carry no kind)."""
    return "cuda" if header.get("kind") == "cuda" else "cpu"


def read(path: str | Path) -> tuple[dict, dict[str, bytes]]:
    """The header and sections of the artifact at ``path``, after checking the whole-file
    checksum, the format and tensorc versions and the section table."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read it: {exc.strerror}") from None
    return decode(raw, str(path))


def decode(raw: bytes, label: str) -> tuple[dict, dict[str, bytes]]:
    """``read`` over bytes; ``label`` names the file in errors."""
    again = "compile the model again"
    if raw[:len(_PREFIX)] != _PREFIX:
        raise ArtifactError(f"{label} is not a tensorc module (compile one with "
                            f"'tensorc compile model.onnx -o {Path(label).name}')")
    if raw[:len(MAGIC)] != MAGIC:
        found = raw[len(_PREFIX):len(MAGIC)].decode(errors="replace") or "?"
        raise ArtifactError(f"{label} was written by another tensorc version (format {found}, "
                            f"this one reads {VERSION}); {again}")
    if len(raw) < _FIXED + _DIGEST:
        raise ArtifactError(f"{label} is truncated: {len(raw)} bytes is too short for a "
                            f"tensorc module; {again}")
    (head_len,) = struct.unpack_from("<Q", raw, len(MAGIC))
    if head_len > len(raw) - _FIXED - _DIGEST:
        raise ArtifactError(f"{label} is truncated or corrupt: its header claims {head_len} "
                            f"bytes, more than the file holds; {again}")
    view = memoryview(raw)           # slices of it copy nothing
    end = len(raw) - _DIGEST         # where the sections end
    if hashlib.sha256(view[:_FIXED + head_len]).digest() != raw[end:]:
        raise ArtifactError(f"{label} is truncated or corrupt: it fails its checksum (the "
                            f"file changed after it was written); {again}")
    try:
        header = json.loads(raw[_FIXED:_FIXED + head_len])
    except ValueError:
        raise ArtifactError(f"{label} is corrupt: its header cannot be read; {again}") from None
    if not isinstance(header, dict):
        raise ArtifactError(f"{label} is corrupt: its header is not a JSON object; {again}")
    if header.get("version") != VERSION:
        raise ArtifactError(f"{label} was written by another tensorc version (format "
                            f"{header.get('version')}, this one reads {VERSION}); {again}")
    if header.get("tensorc_version") != __version__:
        raise ArtifactError(f"{label} was written by tensorc {header.get('tensorc_version')}, "
                            f"this is tensorc {__version__}; {again} with this version")
    table = section_table(header, label)
    sections: dict[str, bytes] = {}
    pos = _FIXED + head_len
    for name, size, sha256 in table:
        data = view[pos:min(pos + size, end)]
        if len(data) != size:
            raise ArtifactError(f"{label} is truncated: section {name} has {len(data)} of "
                                f"{size} bytes; {again}")
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ArtifactError(f"{label} is corrupt: section {name} fails its checksum; "
                                f"{again}")
        sections[name] = data.tobytes()
        pos += size
    if pos != end:
        raise ArtifactError(f"{label} is corrupt: {end - pos} bytes follow its last "
                            f"section; {again}")
    return header, sections


def section_table(header: dict, label: str) -> list[tuple[str, int, str]]:
    """The header's section table as (name, size, sha256), checked: unique names, sizes
    that are whole numbers >= 0, hex digests."""
    try:
        table = [(sec["name"], sec["size"], sec["sha256"]) for sec in header["sections"]]
    except (KeyError, TypeError):
        table = None
    ok = table is not None and all(
        isinstance(name, str) and type(size) is int and size >= 0 and isinstance(digest, str)
        and len(digest) == 64 for name, size, digest in table)
    if not ok or len({name for name, _, _ in table}) != len(table):
        raise ArtifactError(f"{label} is corrupt: its header has no valid section table; "
                            f"compile the model again")
    return table
