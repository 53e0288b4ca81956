"""Artifacts are verified before any code is linked: a whole-file checksum, the format and
tensorc versions, the header's fields, the CPU features the code needs. Saving refuses to
overwrite what is not an artifact, is atomic, wraps OS errors and respects the umask."""
from __future__ import annotations

import json
import os
import stat
import struct

import numpy as np
import pytest
import xxhash
from helpers import make_model, tensor_info
from onnx import helper

import tensorc
import tensorc.runtime.module
import tensorc.target
from tensorc import ArtifactError, TensorcError


def relu_model():
    return make_model([helper.make_node("Relu", ["x"], ["y"])],
                      [tensor_info("x", "float32", (2, 3))], ["y"])


@pytest.fixture(scope="module")
def relu():
    return tensorc.compile(relu_model())


@pytest.fixture(scope="module")
def saved(relu, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("saved") / "relu.tcz"
    relu.save(path, include_source=True)   # every section, the source model included
    return path.read_bytes()


def split(raw: bytes) -> tuple[dict, dict[str, bytes]]:
    """The header and the sections of an artifact's bytes (format 4: the trailing digest
    covers the magic, the header length and the header; each section has its own and starts
    at a multiple of 64 bytes)."""
    (length,) = struct.unpack_from("<Q", raw, 4)
    header = json.loads(raw[12:12 + length])
    sections, pos = {}, 12 + length
    for section in header["sections"]:
        pos += -pos % 64
        sections[section["name"]] = raw[pos:pos + section["size"]]
        pos += section["size"]
    return header, sections


def spans(raw: bytes) -> dict[str, tuple[int, int]]:
    """Where each part of an artifact lies: (start, end) by name."""
    header, _ = split(raw)
    header_end = 12 + struct.unpack_from("<Q", raw, 4)[0]
    where = {"magic": (3, 4), "header length": (4, 12), "header": (12, header_end),
             "trailing digest": (len(raw) - 16, len(raw))}
    pos = header_end
    for section in header["sections"]:
        pos += -pos % 64
        where[section["name"]] = (pos, pos + section["size"])
        pos += section["size"]
    return where


def craft(header: dict, sections: dict[str, bytes], tail: bytes = b"") -> bytes:
    """An artifact with a valid checksum over an edited header (its section table as given):
    the checks behind the checksum must catch what it cannot (a file built by hand)."""
    head = json.dumps(header).encode()
    front = b"TCZ4" + struct.pack("<Q", len(head)) + head
    out = bytearray(front)
    for data in sections.values():
        out += bytes(-len(out) % 64) + data
    return bytes(out) + tail + xxhash.xxh3_128_digest(front)


@pytest.fixture
def no_linking(monkeypatch):
    """Loading must fail before object code is linked into the process."""
    def forbidden(*args, **kwargs):
        raise AssertionError("object code was linked")
    monkeypatch.setattr(tensorc.runtime.module, "NativeLibrary", forbidden)


# ---------------------------------------------------------------------------------------------
# the checksum covers the whole file

def test_every_bit_flip_is_refused(saved, tmp_path, no_linking) -> None:
    header_end = 12 + struct.unpack_from("<Q", saved, 4)[0]
    rng = np.random.default_rng(0)
    positions = list(rng.integers(4, header_end, 150)) + \
        list(rng.integers(header_end, len(saved), 150))
    path = tmp_path / "flipped.tcz"
    for position in positions:
        raw = bytearray(saved)
        raw[position] ^= 1 << int(rng.integers(0, 8))
        path.write_bytes(bytes(raw))
        with pytest.raises(ArtifactError, match="corrupt|truncated|another tensorc") as info:
            tensorc.load(path)
        assert "compile the model again" in str(info.value)


@pytest.mark.parametrize("where", ["magic", "header length", "header", "object.0",
                                   "object.1", "constants", "onnx", "trailing digest"])
@pytest.mark.parametrize("at", ["first", "middle", "last"])
def test_a_flipped_byte_in_each_section_is_refused(saved, tmp_path, no_linking, where,
                                                   at) -> None:
    """Format 4 hashes each byte once: the header part by the trailing digest, each section
    (the entry's object, a kernel's, the constants, the source model) by its own; a flip
    anywhere is still refused inside load."""
    start, end = spans(saved)[where]
    assert end > start, where
    position = {"first": start, "middle": (start + end) // 2, "last": end - 1}[at]
    raw = bytearray(saved)
    raw[position] ^= 0x10
    path = tmp_path / "flipped.tcz"
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="corrupt|truncated|another tensorc") as info:
        tensorc.load(path)
    assert "compile the model again" in str(info.value)


def test_a_flipped_byte_in_a_large_section_is_refused(tmp_path, request) -> None:
    """A section of several hashing chunks (hashed on threads): a flip in its last chunk."""
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])],
                       [tensor_info("x", "float32", (5_000_000,))], ["y"],
                       initializers={"w": np.ones(5_000_000, np.float32)})
    path = tmp_path / "large.tcz"
    tensorc.compile(model).save(path, include_source=False)
    raw = bytearray(path.read_bytes())
    start, end = spans(bytes(raw))["constants"]
    assert end - start > tensorc.runtime.artifact.CHUNK
    raw[end - 100] ^= 0x01
    path.write_bytes(bytes(raw))
    request.getfixturevalue("no_linking")
    with pytest.raises(ArtifactError, match="section constants fails its checksum"):
        tensorc.load(path)


def test_padding_between_sections_must_be_zeros(saved, tmp_path, no_linking) -> None:
    where = spans(saved)
    header_end = where["header"][1]
    first = min(start for name, (start, _) in where.items() if name.startswith("object"))
    assert first > header_end, "the first section starts right after the header"
    raw = bytearray(saved)
    raw[first - 1] ^= 0x01
    path = tmp_path / "padded.tcz"
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="padding before section object.0 is not zeros"):
        tensorc.load(path)


def test_edited_header_field_fails_the_checksum(saved, tmp_path) -> None:
    text = saved.replace(b'"arena_size": ', b'"arena_size": 1')   # 24 -> 124, say
    assert text != saved
    path = tmp_path / "edited.tcz"
    path.write_bytes(text)
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        tensorc.load(path)


def test_bytes_after_the_last_section(saved, tmp_path) -> None:
    header, body = split(saved)
    path = tmp_path / "long.tcz"
    path.write_bytes(craft(header, body, tail=b"extra"))
    with pytest.raises(ArtifactError, match="5 bytes follow its last section"):
        tensorc.load(path)


def test_crafted_file_round_trips(saved, tmp_path, relu) -> None:
    """The crafting helper itself makes loadable files (so the tests below test the edits)."""
    header, body = split(saved)
    path = tmp_path / "same.tcz"
    path.write_bytes(craft(header, body))
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tensorc.load(path).run({"x": x})["y"], np.maximum(x, 0))


# ---------------------------------------------------------------------------------------------
# crafted headers (valid checksum)

@pytest.mark.parametrize("field,value,problem", [
    ("arena_size", -1, "arena size -1"),
    ("arena_size", 1 << 50, "arena size"),
    ("arena_size", "24", "arena size '24'"),
    ("inputs", "x", "no inputs list"),
    ("inputs", [["x", [2, -3], "float32"]], "input 'x' has shape [2, -3]"),
    ("inputs", [["x", [2, 3], "float99"]], "unknown dtype 'float99'"),
    ("inputs", [["x", [2, 3]]], "is not [name, shape, dtype]"),
    ("outputs", [], "no outputs"),
    ("outputs", [["y", [2, 3], "float32"], ["y", [2, 3], "float32"]], "repeat a name"),
    ("entry", "entry; rm", "not a symbol name"),
    ("target", "cuda -arch=sm_80", "not a CPU target"),
    ("cpu_features", None, "cpu_features None"),
    ("kernels", [{"name": "k"}], "kernel table"),
])
def test_crafted_header_is_refused(saved, tmp_path, no_linking, field, value, problem) -> None:
    header, body = split(saved)
    header[field] = value
    path = tmp_path / "crafted.tcz"
    path.write_bytes(craft(header, body))
    with pytest.raises(ArtifactError) as info:
        tensorc.load(path)
    message = str(info.value)
    assert problem in message and "corrupt" in message and str(path) in message


@pytest.mark.parametrize("field", ["entry", "arena_size", "cpu_features"])
def test_missing_header_field(saved, tmp_path, no_linking, field) -> None:
    header, body = split(saved)
    del header[field]
    path = tmp_path / "crafted.tcz"
    path.write_bytes(craft(header, body))
    with pytest.raises(ArtifactError, match=f"no header field '{field}'"):
        tensorc.load(path)


def test_other_tensorc_version(saved, tmp_path, no_linking) -> None:
    header, body = split(saved)
    header["tensorc_version"] = "0.0.1"
    path = tmp_path / "old.tcz"
    path.write_bytes(craft(header, body))
    with pytest.raises(ArtifactError, match=f"written by tensorc 0.0.1, this is tensorc "
                       f"{tensorc.__version__}; compile the model again"):
        tensorc.load(path)


# ---------------------------------------------------------------------------------------------
# CPU features

def test_artifact_needing_a_missing_cpu_feature(relu, saved, tmp_path, monkeypatch) -> None:
    needed = [f[1:] for f in relu.cpu_features.split(",") if f.startswith("+")]
    lost = "avx2" if "avx2" in needed else "sse2"
    assert lost in needed
    real = tensorc.target.host_cpu_features()
    monkeypatch.setattr(tensorc.target, "host_cpu_features", lambda: real - {lost})
    path = tmp_path / "relu.tcz"
    path.write_bytes(saved)
    linked = []
    monkeypatch.setattr(tensorc.runtime.module, "NativeLibrary", lambda *a: linked.append(a))
    with pytest.raises(ArtifactError) as info:
        tensorc.load(path)
    message = str(info.value)
    assert f"needs CPU features this machine lacks: {lost}" in message
    assert "compile the model on this machine" in message
    assert not linked


def test_avx512_artifact_on_a_host_without_it(saved, tmp_path, monkeypatch, no_linking) -> None:
    """An artifact for an AVX-512 CPU, whose feature list comes from its CPU name alone."""
    header, body = split(saved)
    header["target"], header["cpu_features"] = "llvm -mcpu=skylake-avx512", ""
    real = tensorc.target.host_cpu_features()
    monkeypatch.setattr(tensorc.target, "host_cpu_features",
                        lambda: frozenset(f for f in real if not f.startswith("avx512")))
    path = tmp_path / "avx512.tcz"
    path.write_bytes(craft(header, body))
    with pytest.raises(ArtifactError, match="lacks: avx512bw, avx512cd, avx512dq, avx512f, "
                       "avx512vl;"):
        tensorc.load(path)


# ---------------------------------------------------------------------------------------------
# saving

def test_save_refuses_to_overwrite_the_source_model(relu, tmp_path) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(relu_model().SerializeToString())
    before = source.read_bytes()
    with pytest.raises(ArtifactError) as info:
        relu.save(source)
    message = str(info.value)
    assert "refusing to overwrite" in message and "overwrite=True" in message
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    relu.save(source, overwrite=True)
    assert tensorc.load(source).outputs == relu.outputs


def test_save_to_a_directory(relu, tmp_path) -> None:
    with pytest.raises(ArtifactError, match="it is a directory"):
        relu.save(tmp_path)


def test_save_where_no_file_can_be_made(relu, tmp_path) -> None:
    with pytest.raises(ArtifactError, match="cannot save to .*nowhere"):
        relu.save(tmp_path / "nowhere" / "m.tcz")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ArtifactError, match="cannot save to"):
        relu.save(blocker / "m.tcz")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_save_into_a_read_only_directory(relu, tmp_path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(ArtifactError, match="cannot save to .*Permission denied"):
            relu.save(tmp_path / "m.tcz")
    finally:
        tmp_path.chmod(0o755)


def test_failed_save_leaves_the_old_file_and_no_temporary(relu, tmp_path, monkeypatch) -> None:
    path = tmp_path / "m.tcz"
    relu.save(path)
    before = path.read_bytes()

    def full_disk(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(ArtifactError, match="No space left on device"):
        relu.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tcz"]


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_save_respects_the_umask(relu, tmp_path, umask, mode) -> None:
    old = os.umask(umask)
    try:
        relu.save(tmp_path / "m.tcz")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "m.tcz").stat().st_mode) == mode


def test_source_model_is_kept_only_when_asked(relu, tmp_path) -> None:
    relu.save(tmp_path / "with.tcz", include_source=True)
    relu.save(tmp_path / "without.tcz")
    with_source, without = tensorc.load(tmp_path / "with.tcz"), \
        tensorc.load(tmp_path / "without.tcz")
    assert with_source.source_onnx == relu.source_onnx is not None
    assert without.source_onnx is None
    assert (tmp_path / "without.tcz").stat().st_size < (tmp_path / "with.tcz").stat().st_size


# ---------------------------------------------------------------------------------------------
# thread counts

@pytest.mark.parametrize("threads", [-1, 4 * (os.cpu_count() or 1) + 1, 100000, 1.5, True,
                                     "2"])
def test_invalid_thread_count(relu, threads) -> None:
    with pytest.raises(TensorcError, match="num_threads must be a whole number from 0 "
                       r"\(all cores\) to"):
        relu.num_threads = threads
    assert relu.num_threads == 0


@pytest.mark.parametrize("threads", [0, 1, 4 * (os.cpu_count() or 1)])
def test_valid_thread_counts_run(threads) -> None:
    mod = tensorc.compile(relu_model(), num_threads=threads)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(mod.run({"x": x})["y"], np.maximum(x, 0))
    assert mod.num_threads == threads


def test_compile_with_invalid_thread_count() -> None:
    with pytest.raises(TensorcError, match="num_threads"):
        tensorc.compile(relu_model(), num_threads=-1)
