"""Module: save / load round trips without compiling again, corrupt artifacts, feed checks."""
from __future__ import annotations

import hashlib
import json
import struct

import llvmlite.binding as llvm
import numpy as np
import pytest
import xxhash
from helpers import make_model, ort_run, tensor_info
from onnx import helper

import models
import tensorc
import tensorc.runtime.kernel
import tensorc.codegen.llvm.objects
import tensorc.compiler.llvm
import tensorc.frontend.onnx
from tensorc import ArtifactError, InputError, TensorcError


@pytest.fixture(scope="module")
def lenet():
    model = models.load("lenet5")
    return model, tensorc.compile(model)


def two_input_model():
    """y = relu(x) * 2 (float32[2, 3]); n = ids - 1 (int64[5])."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "two"], ["y"]),
             helper.make_node("Sub", ["ids", "one"], ["n"])]
    return make_model(nodes, [tensor_info("x", "float32", (2, 3)),
                              tensor_info("ids", "int64", (5,))], ["y", "n"],
                      initializers={"two": np.array(2.0, np.float32),
                                    "one": np.array(1, np.int64)})


@pytest.fixture(scope="module")
def small():
    return tensorc.compile(two_input_model())


def lenet_input(seed: int = 0) -> dict[str, np.ndarray]:
    x = np.random.default_rng(seed).standard_normal((1, 1, 28, 28)).astype(np.float32)
    return {"x": x}


# ---------------------------------------------------------------------------------------------
# save / load

def test_save_load_round_trip_gives_identical_outputs(lenet, tmp_path) -> None:
    model, mod = lenet
    path = tmp_path / "lenet.tcz"
    mod.save(path)
    loaded = tensorc.load(path)
    assert loaded.inputs == mod.inputs == [("x", (1, 1, 28, 28), "float32")]
    assert loaded.outputs == mod.outputs
    assert loaded.info == mod.info
    for seed in (0, 1):
        feeds = lenet_input(seed)
        before, after = mod.run(feeds), loaded.run(feeds)
        assert list(after) == ["logits"]
        np.testing.assert_array_equal(after["logits"], before["logits"])
        np.testing.assert_allclose(after["logits"], ort_run(model, feeds)["logits"],
                                   rtol=1e-4, atol=1e-5)
    # a loaded module saves to the same bytes
    again = tmp_path / "again.tcz"
    loaded.save(again)
    assert again.read_bytes() == path.read_bytes()


def test_save_overwrites_and_leaves_no_temporary_files(small, tmp_path) -> None:
    path = tmp_path / "m.tcz"
    path.write_bytes(b"old contents")
    small.save(path, overwrite=True)
    small.save(str(path))   # a str path works too; an artifact is overwritten without asking
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tcz"]
    out = tensorc.load(str(path)).run({"x": -np.ones((2, 3), np.float32),
                                       "ids": np.arange(5, dtype=np.int64)})
    np.testing.assert_array_equal(out["y"], np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(out["n"], np.arange(-1, 4, dtype=np.int64))


def _forbid(name: str):
    def forbidden(*args, **kwargs):
        raise AssertionError(f"{name} ran while loading a saved module")
    return forbidden


def test_load_does_not_run_llvm_optimizer_or_codegen(lenet, tmp_path, monkeypatch) -> None:
    _, mod = lenet
    path = tmp_path / "lenet.tcz"
    mod.save(path)
    feeds = lenet_input(2)
    want = mod.run(feeds)["logits"]

    for attr in ("emit_object", "emit_assembly", "_emit_to_memory"):
        monkeypatch.setattr(llvm.TargetMachine, attr, _forbid(f"TargetMachine.{attr}"))
    for attr in ("create_pass_builder", "create_pipeline_tuning_options",
                 "create_new_module_pass_manager", "create_new_function_pass_manager"):
        monkeypatch.setattr(llvm, attr, _forbid(f"llvmlite.binding.{attr}"))
    monkeypatch.setattr(llvm.ModulePassManager, "run", _forbid("ModulePassManager.run"))
    for module in (tensorc.codegen.llvm.objects, tensorc.compiler.llvm, tensorc.runtime.kernel):
        for attr in ("optimize_module", "emit_object", "emit_assembly"):
            if hasattr(module, attr):
                monkeypatch.setattr(module, attr, _forbid(f"{module.__name__}.{attr}"))
    monkeypatch.setattr(tensorc.compiler.llvm, "compile_graph", _forbid("compile_graph"))
    monkeypatch.setattr(tensorc.frontend.onnx, "import_onnx", _forbid("import_onnx"))
    # MCJIT needs a module to start from: only an empty one may be parsed, never the model's IR
    parsed: list[str] = []
    real_parse = llvm.parse_assembly

    def parse_assembly(text, *args, **kwargs):
        parsed.append(text)
        if "define" in text:
            raise AssertionError("the model's LLVM IR was parsed while loading")
        return real_parse(text, *args, **kwargs)
    monkeypatch.setattr(llvm, "parse_assembly", parse_assembly)

    # the patches do stop compilation: compiling now fails (past the object cache, which
    # holds the lenet fixture's code)
    with pytest.raises(AssertionError, match="ran while loading"):
        tensorc.compile(models.load("lenet5"), cache=False)
    parsed.clear()

    loaded = tensorc.load(path)
    got = loaded.run(feeds)["logits"]
    np.testing.assert_array_equal(got, want)
    assert all(not text.strip() for text in parsed)


def test_load_missing_file(tmp_path) -> None:
    missing = tmp_path / "nowhere" / "model.tcz"
    with pytest.raises(ArtifactError, match="no such file") as info:
        tensorc.load(missing)
    assert str(missing) in str(info.value)


def test_load_a_directory(tmp_path) -> None:
    with pytest.raises(ArtifactError, match="cannot read"):
        tensorc.load(tmp_path)


@pytest.fixture(scope="module")
def saved_bytes(small, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("artifact") / "small.tcz"
    small.save(path)
    return path.read_bytes()


def _header_end(raw: bytes) -> int:
    (length,) = struct.unpack_from("<Q", raw, 4)
    return 12 + length


@pytest.mark.parametrize("where", ["magic", "length", "header", "first_section", "last_byte"])
def test_truncated_artifact(saved_bytes, tmp_path, where) -> None:
    cut = {"magic": 2, "length": 7, "header": (12 + _header_end(saved_bytes)) // 2,
           "first_section": _header_end(saved_bytes) + 10,
           "last_byte": len(saved_bytes) - 1}[where]
    path = tmp_path / "cut.tcz"
    path.write_bytes(saved_bytes[:cut])
    with pytest.raises(ArtifactError) as info:
        tensorc.load(path)
    message = str(info.value)
    assert str(path) in message
    if where == "magic":
        assert "not a tensorc module" in message
    else:
        assert "truncated" in message and "compile the model again" in message


def test_corrupt_section_fails_its_checksum(saved_bytes, tmp_path) -> None:
    raw = bytearray(saved_bytes)
    raw[_header_end(saved_bytes) + 100] ^= 0xFF     # inside the object code
    path = tmp_path / "flipped.tcz"
    path.write_bytes(bytes(raw))
    with pytest.raises(ArtifactError, match="corrupt.*checksum"):
        tensorc.load(path)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_bytes(tmp_path, seed) -> None:
    path = tmp_path / "random.tcz"
    path.write_bytes(np.random.default_rng(seed).bytes(4096))
    with pytest.raises(ArtifactError, match="is not a tensorc module"):
        tensorc.load(path)


def test_random_bytes_after_the_magic(tmp_path) -> None:
    path = tmp_path / "random.tcz"
    path.write_bytes(b"TCZ4" + np.random.default_rng(3).bytes(4096))
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        tensorc.load(path)


def test_artifact_of_the_first_format(tmp_path) -> None:
    path = tmp_path / "old.tcz"
    path.write_bytes(b"TCZ1" + np.random.default_rng(3).bytes(4096))
    with pytest.raises(ArtifactError, match=r"another tensorc version \(format 1, this one "
                       r"reads 4\); compile the model again"):
        tensorc.load(path)


def test_artifact_of_the_second_format(tmp_path) -> None:
    """Format 2 (one whole-file SHA-256 beside the sections' own) is refused by name."""
    head = json.dumps({"version": 2, "tensorc_version": tensorc.__version__,
                       "sections": []}).encode()
    data = b"TCZ2" + struct.pack("<Q", len(head)) + head
    path = tmp_path / "old.tcz"
    path.write_bytes(data + hashlib.sha256(data).digest())
    with pytest.raises(TensorcError, match=r"another tensorc version \(format 2, this one "
                       r"reads 4\); compile the model again"):
        tensorc.load(path)


def test_artifact_of_the_third_format(tmp_path) -> None:
    """Format 3 (SHA-256 per section, sections unaligned, read into memory) is refused by
    name: an artifact saved by the tensorc before this one."""
    head = json.dumps({"version": 3, "tensorc_version": tensorc.__version__,
                       "sections": []}).encode()
    data = b"TCZ3" + struct.pack("<Q", len(head)) + head
    path = tmp_path / "old.tcz"
    path.write_bytes(data + hashlib.sha256(data).digest())
    with pytest.raises(TensorcError, match=r"another tensorc version \(format 3, this one "
                       r"reads 4\); compile the model again"):
        tensorc.load(path)


def test_empty_file(tmp_path) -> None:
    path = tmp_path / "empty.tcz"
    path.write_bytes(b"")
    with pytest.raises(ArtifactError, match="not a tensorc module"):
        tensorc.load(path)


def test_onnx_file_is_not_an_artifact(tmp_path) -> None:
    with pytest.raises(ArtifactError, match="is not a tensorc module"):
        tensorc.load(models.path("mlp"))


def _with_header(header: object, body: bytes = b"") -> bytes:
    """An artifact with ``header`` and ``body`` (sections, padded as the header's length
    puts them) and a valid whole-file checksum: what a crafted file looks like, so that the
    checks behind the checksum are tested."""
    head = json.dumps(header).encode()
    front = b"TCZ4" + struct.pack("<Q", len(head)) + head
    return front + body + xxhash.xxh3_128_digest(front)


_V = {"version": 4, "tensorc_version": tensorc.__version__}


@pytest.mark.parametrize("header", [
    {**_V},                                           # no sections, no entry
    {**_V, "sections": []},                           # no object code
    {**_V, "sections": [{"name": "object.0"}]},       # a section without size
    {**_V, "sections": [{"name": "object.0", "size": -1, "xxh3": "0" * 32}]},
    [1, 2, 3],                                        # not an object at all
    "TCZ1",
])
def test_header_of_the_wrong_structure(tmp_path, header) -> None:
    path = tmp_path / "bad_header.tcz"
    path.write_bytes(_with_header(header))
    with pytest.raises(ArtifactError) as info:
        tensorc.load(path)
    assert str(path) in str(info.value) and "corrupt" in str(info.value)


def test_other_format_version(saved_bytes, tmp_path) -> None:
    end = _header_end(saved_bytes)
    header = json.loads(saved_bytes[12:end])
    header["version"] = 99
    path = tmp_path / "future.tcz"
    path.write_bytes(_with_header(header, saved_bytes[end:-16]))
    with pytest.raises(ArtifactError, match="another tensorc version.*99"):
        tensorc.load(path)


# ---------------------------------------------------------------------------------------------
# feed validation

def good_feeds() -> dict[str, np.ndarray]:
    return {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.float32),
            "ids": np.array([3, -1, 0, 7, 10], np.int64)}


def test_good_feeds_run(small) -> None:
    out = small.run(good_feeds())
    np.testing.assert_array_equal(out["y"], np.array([[2, 0, 6], [0, 10, 0]], np.float32))
    np.testing.assert_array_equal(out["n"], np.array([2, -2, -1, 6, 9], np.int64))


def test_non_contiguous_feed(small) -> None:
    x = np.asfortranarray(good_feeds()["x"])
    strided = np.arange(10, dtype=np.int64)[::2]
    out = small.run({"x": x, "ids": strided})
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0) * 2)
    np.testing.assert_array_equal(out["n"], strided - 1)


def test_wrong_input_name(small) -> None:
    feeds = good_feeds()
    feeds["X"] = feeds.pop("x")
    with pytest.raises(InputError) as info:
        small.run(feeds)
    message = str(info.value)
    assert "'X'" in message and "unknown" in message          # the name given
    assert "missing ['x']" in message                         # the name expected
    assert "x: float32[2, 3]" in message and "ids: int64[5]" in message


def test_missing_input(small) -> None:
    with pytest.raises(InputError) as info:
        small.run({"x": good_feeds()["x"]})
    message = str(info.value)
    assert "missing ['ids']" in message and "ids: int64[5]" in message


def test_extra_input(small) -> None:
    with pytest.raises(InputError, match=r"unknown \['extra'\]"):
        small.run({**good_feeds(), "extra": np.zeros(1, np.float32)})


@pytest.mark.parametrize("shape", [(3, 2), (2, 3, 1), (6,), (1, 2, 3)])
def test_wrong_shape(small, shape) -> None:
    feeds = good_feeds()
    feeds["x"] = np.zeros(shape, np.float32)
    with pytest.raises(InputError) as info:
        small.run(feeds)
    message = str(info.value)
    assert "'x'" in message
    assert "[2, 3]" in message                                 # expected
    assert str(list(shape)) in message                         # given
    assert "float32" in message


@pytest.mark.parametrize("name,dtype", [("x", np.float64), ("x", np.int32),
                                        ("ids", np.int32), ("ids", np.float32)])
def test_wrong_dtype(small, name, dtype) -> None:
    feeds = good_feeds()
    feeds[name] = feeds[name].astype(dtype)
    with pytest.raises(InputError) as info:
        small.run(feeds)
    message = str(info.value)
    expected = {"x": "float32[2, 3]", "ids": "int64[5]"}[name]
    given = f"{np.dtype(dtype).name}{list(feeds[name].shape)}"
    assert repr(name) in message and expected in message and given in message


def test_feeds_not_a_dict(small) -> None:
    with pytest.raises(InputError, match="dict of input name"):
        small.run([good_feeds()["x"], good_feeds()["ids"]])


def test_failed_run_leaves_module_usable(small) -> None:
    with pytest.raises(InputError):
        small.run({"x": np.zeros((2, 3), np.float64), "ids": good_feeds()["ids"]})
    test_good_feeds_run(small)
