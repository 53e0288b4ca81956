"""Tuning a model over symbolic dims: the tuning shapes (named or drawn across each range),
tasks keyed by their symbolic workloads, candidates timed at every shape, configs slower at
one never applied, the end-to-end verdict per shape, and the tuned module checked against
onnxruntime at shapes it was and was not tuned at."""
from __future__ import annotations

import argparse
import json

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import tensorc
from models.symbolic import SYMBOLIC_MODELS
from tensorc.autotune.measure import MeasureOptions
from tensorc.autotune.records import TuningLog, make_record, workload_hash
from tensorc.autotune.shapes import default_shapes, dim_levels, resolve_shapes
from tensorc.autotune.symbolic_verdict import compare_symbolic_end_to_end
from tensorc.autotune.task import symbolic_tasks
from tensorc.cli.arguments import parse_tune_shape
from tensorc.cli.main import main
from tensorc.compiler.kernel import workload_key
from tensorc.compiler.kernel_objects import kernel_jobs
from tensorc.compiler.pipeline import optimize_graph
from tensorc.errors import ShapeError, TensorcError
from tensorc.frontend.model import import_model
from tensorc.passes.graph.fuse import fuse
from tensorc.target import Target

SHAPES = [{"batch": 1, "seq": 5}, {"batch": 2, "seq": 37}, {"batch": 3, "seq": 64}]
OPTIONS = dict(repeats=3, min_repeat_seconds=0.002, num_threads=1)


def dense_softmax(hidden: int = 32, out: int = 48):
    """x[batch, seq, hidden] -> MatMul -> Add -> Softmax: a matmul over batch*seq rows and a
    softmax over [batch, seq] rows, both over symbolic dims."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (hidden, out),
                           (rng.standard_normal((hidden, out)) * 0.2).astype("float32").ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, (out,),
                           rng.standard_normal(out).astype("float32"))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes, "dense_softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", out])],
        [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def model():
    return dense_softmax()


@pytest.fixture(scope="module")
def tuned(model, tmp_path_factory):
    log = tmp_path_factory.mktemp("tune") / "tune.jsonl"
    result = tensorc.tune(model, trials=8, log=log, batch=4, threads=1, tune_shapes=SHAPES,
                          options=MeasureOptions(**OPTIONS))
    return result, log


def _symbolic_workloads(model) -> dict[str, str]:
    """Workload hash -> kernel name of the symbolic compile's kernels."""
    target = Target.from_string("llvm")
    _, graph = import_model(model, None, symbolic=True)
    with graph.dims.active():
        graph = optimize_graph(graph, target)
        _, kernels = kernel_jobs(graph, fuse(graph), None, target)
    return {workload_hash(workload_key(k.group, graph)): k.name for k in kernels}


def test_default_shapes_cover_each_range():
    assert dim_levels(1, None) == [1, 7, 64]
    assert dim_levels(0, None) == [1, 7, 64]            # an empty-cache dim starts at 1
    assert dim_levels(1, 16) == [1, 7, 8, 16]
    assert dim_levels(20, 30) == [20, 25, 30]
    assert dim_levels(3, 3) == [3]
    _, graph = import_model(SYMBOLIC_MODELS["bert_encoder"](), None,
                            dim_ranges={"batch": (1, 4), "seq": (1, 100)}, symbolic=True)
    shapes = default_shapes(graph)
    assert shapes[0] == {"batch": 1, "seq": 1}
    assert shapes[-1] == {"batch": 4, "seq": 100}      # both ranges' ends
    assert {s["seq"] for s in shapes} == {1, 7, 50, 100}
    assert {s["batch"] for s in shapes} == {1, 2, 4}
    # unbounded: 1, a small odd size and the middle value
    _, graph = import_model(SYMBOLIC_MODELS["cnn"](), None, symbolic=True)
    assert default_shapes(graph) == [{"batch": 1}, {"batch": 7}, {"batch": 64}]
    assert resolve_shapes(graph, None) == default_shapes(graph)


def test_tuning_shapes_are_checked(model):
    _, graph = import_model(model, None, dim_ranges={"seq": (1, 50)}, symbolic=True)
    assert resolve_shapes(graph, [{"seq": 3, "batch": 2}]) == [{"batch": 2, "seq": 3}]
    with pytest.raises(TensorcError, match=r"gives no value for the dim seq.*'batch': 1"):
        resolve_shapes(graph, [{"batch": 2}])
    with pytest.raises(TensorcError, match=r"names dim 'sequence'.*dims are batch, seq"):
        resolve_shapes(graph, [{"batch": 2, "sequence": 3}])
    with pytest.raises(TensorcError, match=r"tuning shape 2 \(batch=1,seq=51\).*\[1, 50\]"):
        resolve_shapes(graph, [{"batch": 1, "seq": 5}, {"batch": 1, "seq": 51}])
    with pytest.raises(TensorcError, match="non-negative integer"):
        resolve_shapes(graph, [{"batch": 1, "seq": 2.5}])
    # a model of one shape has nothing to name
    with pytest.raises(TensorcError, match="no symbolic input dims"):
        tensorc.tune(model, {"x": (1, 4, 32)}, trials=1, tune_shapes=[{"seq": 4}])


def test_the_command_line_spells_a_shape_per_flag():
    assert parse_tune_shape("batch=1,seq=7") == {"batch": 1, "seq": 7}
    assert parse_tune_shape("max_x=9") == {"max_x": 9}          # an 'x' in a name
    assert parse_tune_shape("past + 1=4") == {"past + 1": 4}    # spaces, split at the last =
    assert parse_tune_shape('{"a,b": 3, "c": 1}') == {"a,b": 3, "c": 1}
    for bad in ("batch", "batch=one", "seq=-1", '{"seq": "7"}'):
        with pytest.raises(argparse.ArgumentTypeError, match="tuning shape"):
            parse_tune_shape(bad)


def test_tasks_are_the_symbolic_kernels_timed_where_they_run_their_own_schedule(model):
    _, graph = import_model(model, None, symbolic=True)
    tasks = symbolic_tasks(graph, SHAPES, Target.from_string("llvm"))
    kernels = _symbolic_workloads(model)
    assert {t.workload for t in tasks} <= set(kernels)
    assert any("batch" in t.description for t in tasks)
    for task in tasks:
        # at batch=1, seq=5 every dim is small: the model runs the small-dims variant there
        assert task.shapes == tuple(SHAPES[1:])
        arrays = task.inputs()
        assert len(arrays) == 2
        for at, (batch, seq) in zip(arrays, [(2, 37), (3, 64)]):
            # the activations at the shape's dims (as [batch, seq, ...] or [batch*seq, ...])
            assert any(a.shape[:2] == (batch, seq) or a.shape[0] == batch * seq for a in at)


def test_a_tuned_symbolic_model_is_right_at_every_shape(model, tuned):
    result, log = tuned
    assert result.trials == 8 and result.shapes == ["batch=1,seq=5", "batch=2,seq=37",
                                                     "batch=3,seq=64"]
    records = list(TuningLog(log).records())
    kernels = _symbolic_workloads(model)
    # the records are keyed by the symbolic compile's workloads, and say where they were timed
    assert records and all(r["workload"] in kernels for r in records)
    trials = [r for r in records if not r.get("confirmed")]
    # (a config whose build fails is logged as a build error, never applied; the matmul
    # space over symbolic dims no longer lists the local blocks of run-time size that did)
    assert len(trials) == 8 and all(r["error"] in (None, "build_error") for r in trials)
    assert any(r["error"] is None for r in trials)
    for r in trials:
        assert r["shapes"] == ["batch=2,seq=37", "batch=3,seq=64"]
        if r["error"] is not None:      # built nothing, timed nothing
            assert not r["shape_latencies"] and r["latency"] is None
            continue
        assert len(r["shape_latencies"]) == 2 and all(t > 0 for t in r["shape_latencies"])
        mean = float(np.exp(np.mean(np.log(r["shape_latencies"]))))
        assert r["latency"] == pytest.approx(mean, rel=1e-6)
    confirmed = [r for r in records if r.get("confirmed") and r["error"] is None]
    assert confirmed and all(r["relative"] > 0 for r in confirmed)
    defaults = [r for r in confirmed if r["relative"] == 1.0]
    assert defaults
    # the log applies to the symbolic compile, and the module runs every shape right
    module = tensorc.compile(model, tuning_log=log, num_threads=1)
    assert module.info["tuning"]["tuned_kernels"] >= 1
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 1), (1, 5), (2, 37), (3, 64), (4, 9), (2, 130)]:
        x = rng.standard_normal((batch, seq, 32)).astype("float32")
        np.testing.assert_allclose(module.run({"x": x})["y"], session.run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-6, err_msg=f"batch={batch}, seq={seq}")


def test_the_end_to_end_verdict_is_taken_at_each_shape(tuned):
    result, log = tuned
    e2e = result.end_to_end
    rows = e2e["shapes"]
    if e2e["applied_kernels"]:
        assert [r["shape"] for r in rows] == result.shapes
        # no tuned kernel runs its own schedule at batch=1, seq=5: the same kernels
        assert rows[0].get("same_kernels")
        for row in rows[1:]:
            assert row["default_ms"] > 0 and row["tuned_ms"] > 0
            assert not row["loses"] or row.get("dropped")
        assert not e2e["verdict"]["slower"]
    table = result.table()
    assert "tuned over symbolic dims at 3 shapes" in table
    assert "batch=3,seq=64" in table


def test_a_config_slower_at_a_shape_is_dropped_end_to_end(model, tmp_path):
    """A softmax without vectors is slower at every large shape: given as the tuned config
    (a confirmed record that claims a gain), the verdict finds the model slower, drops it,
    and the log applies it no more."""
    _, graph = import_model(model, None, symbolic=True)
    target = Target.from_string("llvm")
    tasks = symbolic_tasks(graph, SHAPES[1:], target)
    [softmax] = [t for t in tasks if "softmax" in t.description]
    default = softmax.space().default()
    assert default["vectorize"] is True
    slow = default.replace(vectorize=False)
    log = TuningLog(tmp_path / "tune.jsonl")
    log.append(make_record(softmax, slow, None, 1e-6, confirmed=True, threads=1,
                           latencies=[1e-6, 1e-6], relative=0.5))
    assert log.best_configs(target, threads=1).best[softmax.workload]["config"] == dict(slow)
    e2e = compare_symbolic_end_to_end(model, None, None, [{"batch": 4, "seq": 256}], target,
                                      log.path, 1, tasks)
    assert e2e["dropped"] == [softmax.workload]
    assert e2e["applied_kernels"] == 0 and not e2e["verdict"]["slower"]
    assert softmax.workload not in log.best_configs(target, threads=1).best
    [dropped] = [r for r in log.records() if r["error"] == "slower_at_a_shape"]
    assert "batch=4,seq=256" in dropped["message"]


def test_only_confirmed_configs_not_slower_at_any_shape_apply(model, tmp_path):
    _, graph = import_model(model, None, symbolic=True)
    target = Target.from_string("llvm")
    [softmax] = [t for t in symbolic_tasks(graph, SHAPES[1:], target)
                 if "softmax" in t.description]
    default = softmax.space().default()
    other = default.replace(vectorize=False)
    log = TuningLog(tmp_path / "tune.jsonl")
    # the search's single measurements (unconfirmed) never apply over symbolic dims
    log.append(make_record(softmax, other, None, 1e-6, threads=1, latencies=[1e-6, 1e-6]))
    assert softmax.workload not in log.best_configs(target, threads=1).best
    log.append(make_record(softmax, default, None, 2e-6, confirmed=True, threads=1,
                           latencies=[2e-6, 2e-6], relative=1.0))
    log.append(make_record(softmax, other, None, 1.5e-6, confirmed=True, threads=1,
                           latencies=[1e-6, 2.25e-6], relative=0.75))
    assert log.best_configs(target, threads=1).best[softmax.workload]["config"] == dict(other)
    log.append(make_record(softmax, other, None, error="slower_at_a_shape", confirmed=True,
                           threads=1, latencies=[1e-6, 2.25e-6]))
    best = log.best_configs(target, threads=1).best[softmax.workload]
    assert best["config"] == dict(default)


def test_cuda_refuses_symbolic_dims_and_says_how_to_bind_them():
    with pytest.raises(ShapeError) as caught:
        tensorc.compile(SYMBOLIC_MODELS["bert_encoder"](), target="cuda")
    text = str(caught.value)
    assert "input_ids: int64[batch,seq]: dim 0 ('batch'), dim 1 ('seq')" in text
    assert "input_shapes={'input_ids'" in text and "--input-shape input_ids=" in text
    assert "CUDA back end compiles one shape" in text and "target 'llvm'" in text


def test_tune_command_takes_shapes_and_ranges(model, tmp_path, capsys):
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    log = tmp_path / "tune.jsonl"
    argv = ["tune", str(path), "--trials", "2", "--log", str(log), "--threads", "1",
            "--batch", "2", "--tune-shape", "batch=2,seq=37", "--tune-shape", "seq=40,batch=1",
            "--dim-range", "seq=1:64", "--no-end-to-end", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["shapes"] == ["batch=2,seq=37", "batch=1,seq=40"]
    assert report["trials"] == 2
    assert main(["tune", str(path), "--trials", "1", "--tune-shape", "batch=1,seq=65",
                 "--dim-range", "seq=1:64", "--log", str(log)]) == 2
    assert "outside its range [1, 64]" in capsys.readouterr().err


def test_shapes_where_every_kernel_is_small_leave_nothing_to_tune(model, tmp_path):
    with pytest.raises(TensorcError, match=r"nothing to tune at these shapes.*at most 8"):
        tensorc.tune(model, trials=2, log=tmp_path / "t.jsonl", threads=1,
                     tune_shapes=[{"batch": 1, "seq": 5}, {"batch": 2, "seq": 4}])
