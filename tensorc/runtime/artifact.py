"""The saved-module format (.tcz): everything needed to run without compiling again.

    b"TCZ4" | u64 header length | header (JSON) | sections, each at a multiple of 64 bytes and
    zero-padded to the next | XXH3-128 of the magic, length and header

Every byte is checked: the trailing digest covers the magic, the header length and the
header (the signature, the entry name, the target, the tensorc version that wrote it and, for
every section, its size and digest), each section (object code, constant pool, source ONNX
model) is checked against its own digest from the header, the padding must be zeros, and the
sizes must account for every byte of the file; ``read`` checks all of that before anything is
used. The hash is XXH3-128 (the ``xxhash`` package), which runs at memory speed; a large
section is hashed in chunks of CHUNK bytes on several threads (the package releases the GIL),
its digest the XXH3-128 of its chunks' digests. The checksums guard against corruption, not
tampering: anyone who can write the file can write matching hashes. (Format 3 hashed with
SHA-256, some 1.6 GB/s here: 0.2 s for a model with 350 MB of weights.)

``read`` maps the file rather than reading it: the sections it returns are views of the
mapping, so the constant pool is used where it lies (each section starts 64-byte aligned, as
the kernels want it) and a large model loads without copying its weights.

Files are written to a temporary name in the destination's directory and renamed into place:
a failed save never leaves half a file where the user's file was.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import xxhash

from tensorc.errors import ArtifactError
from tensorc.version import __version__

MAGIC = b"TCZ4"
VERSION = 4
_PREFIX = b"TCZ"            # every format's magic starts so (TCZ1 was format 1, and so on)
_DIGEST = 16                # bytes of the trailing XXH3-128
_FIXED = len(MAGIC) + 8     # magic and header length
ALIGN = 64                  # where each section starts
CHUNK = 16 << 20            # a large section's hashing unit
_HASH_THREADS = min(4, os.cpu_count() or 1)


def digest(data) -> str:
    """The hex digest of ``data`` (any buffer) as the format stores it: XXH3-128, or for more
    than CHUNK bytes, XXH3-128 of the digests of its CHUNK-byte pieces (hashed in parallel)."""
    view = memoryview(data).cast("B")
    if len(view) <= CHUNK:
        return xxhash.xxh3_128_hexdigest(view)
    pieces = [view[k:k + CHUNK] for k in range(0, len(view), CHUNK)]
    with ThreadPoolExecutor(_HASH_THREADS) as pool:
        digests = list(pool.map(xxhash.xxh3_128_digest, pieces))
    return xxhash.xxh3_128_hexdigest(b"".join(digests))


def _padding(offset: int) -> int:
    return -offset % ALIGN


def is_artifact(path: str | Path) -> bool:
    """True when ``path`` is a file that starts like a tensorc artifact (of any format)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC))[:len(_PREFIX)] == _PREFIX
    except OSError:
        return False


def encode(header: dict, sections: dict) -> list:
    """The pieces (bytes and buffers) of an artifact holding ``header`` (made JSON) and
    ``sections`` (name -> bytes or any contiguous buffer), in file order."""
    sections = {name: memoryview(data).cast("B") for name, data in sections.items()}
    header = dict(header, version=VERSION, tensorc_version=__version__, sections=[
        {"name": name, "size": len(data), "xxh3": digest(data)}
        for name, data in sections.items()])
    head = json.dumps(header).encode()
    front = MAGIC + struct.pack("<Q", len(head)) + head
    pieces: list = [front]
    offset = len(front)
    for data in sections.values():
        pieces.append(bytes(_padding(offset)))
        offset += _padding(offset)
        pieces.append(data)
        offset += len(data)
    pieces.append(xxhash.xxh3_128_digest(front))
    return pieces


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
    pieces = encode(header, sections)
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
            for piece in pieces:
                f.write(piece)
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


def read(path: str | Path) -> tuple[dict, dict[str, memoryview]]:
    """The header and sections of the artifact at ``path``, after checking the whole-file
    checksum, the format and tensorc versions, the section table and every section's digest.
    The sections are read-only views of the file mapped into memory."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raw = b""
            else:
                # MAP_POPULATE: the pages are mapped now, in one call, not a fault each
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                raw = mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)
    except FileNotFoundError:
        raise ArtifactError(f"{path}: no such file") from None
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot read it: {exc.strerror}") from None
    return decode(raw, str(path))


def decode(raw, label: str) -> tuple[dict, dict[str, memoryview]]:
    """``read`` over bytes (or a mapping); ``label`` names the file in errors. The sections
    are views of ``raw``."""
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
    if xxhash.xxh3_128_digest(view[:_FIXED + head_len]) != view[end:]:
        raise ArtifactError(f"{label} is truncated or corrupt: it fails its checksum (the "
                            f"file changed after it was written); {again}")
    try:
        header = json.loads(bytes(view[_FIXED:_FIXED + head_len]))
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
    sections: dict[str, memoryview] = {}
    pos = _FIXED + head_len
    for name, size, _ in table:
        pad = view[pos:min(pos + _padding(pos), end)]
        if len(pad) != _padding(pos) or any(pad):
            raise ArtifactError(f"{label} is corrupt: the padding before section {name} is "
                                f"not zeros; {again}")
        pos += len(pad)
        data = view[pos:min(pos + size, end)]
        if len(data) != size:
            raise ArtifactError(f"{label} is truncated: section {name} has {len(data)} of "
                                f"{size} bytes; {again}")
        sections[name] = data
        pos += size
    if pos != end:
        raise ArtifactError(f"{label} is corrupt: {end - pos} bytes follow its last "
                            f"section; {again}")
    for name, _, expected in table:
        if digest(sections[name]) != expected:
            raise ArtifactError(f"{label} is corrupt: section {name} fails its checksum; "
                                f"{again}")
    return header, sections


def section_table(header: dict, label: str) -> list[tuple[str, int, str]]:
    """The header's section table as (name, size, xxh3), checked: unique names, sizes that
    are whole numbers >= 0, hex digests."""
    try:
        table = [(sec["name"], sec["size"], sec["xxh3"]) for sec in header["sections"]]
    except (KeyError, TypeError):
        table = None
    ok = table is not None and all(
        isinstance(name, str) and type(size) is int and size >= 0 and isinstance(hexdigest, str)
        and len(hexdigest) == 2 * _DIGEST for name, size, hexdigest in table)
    if not ok or len({name for name, _, _ in table}) != len(table):
        raise ArtifactError(f"{label} is corrupt: its header has no valid section table; "
                            f"compile the model again")
    return table
