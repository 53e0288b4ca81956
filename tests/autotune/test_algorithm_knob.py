"""Knobs that pick the layout of a kernel's weights: a stride-1 3x3 conv's ``algorithm``
(Winograd or the direct formulation the strategy picks without it) and a packed matmul B's
panel width (``vectors``). The tuner's space lists every layout, a record picking one has the
weights repacked at compile time, and a record without the knob (as logs written before the
knob existed are) keeps the layout the strategy picks."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import helper

import tensorc
from tensorc.autotune.measure import Candidate, LocalExecutor, MeasureOptions, measure
from tensorc.autotune.records import TuningLog, make_record
from tensorc.autotune.task import extract_tasks
from tensorc.compiler.pipeline import lower_graph
from tensorc.frontend.model import import_model
from tests.helpers import make_model, ort_run, tensor_info

ZNVER4 = "llvm -mcpu=znver4"


def conv_model(channels: int = 32, size: int = 14, convs: int = 1):
    """``convs`` stride-1 3x3 convs with bias and relu (two or more: a blocked chain)."""
    rng = np.random.default_rng(3)
    nodes, inits, x = [], {}, "x"
    for k in range(convs):
        inits[f"w{k}"] = (rng.standard_normal((channels, channels, 3, 3)) * 0.1).astype(
            "float32")
        inits[f"b{k}"] = rng.standard_normal(channels).astype("float32")
        nodes += [helper.make_node("Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"], pads=[1] * 4),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"])]
        x = f"r{k}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    return make_model(nodes, [tensor_info("x", "float32", (1, channels, size, size))],
                      [tensor_info("y", "float32", (1, channels, size, size))],
                      initializers=inits, name=f"conv3x3_x{convs}")


def _conv_task(model, target: str | None = None):
    tasks = extract_tasks(model, target=target or tensorc.Target.host(), measure=False)
    return next(t for t in tasks if t.ops[0] == "conv")


def _log(folder, task, config):
    folder.mkdir(parents=True, exist_ok=True)
    log = TuningLog(folder / "t.jsonl")
    log.append(make_record(task, config, [], 1e-3))
    return log


def _compiled(model, log):
    """The module compiled with ``log`` (None: untuned) and its conv nodes' attrs and weight
    types as compiled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = tensorc.compile(model, tuning_log=log.path if log else None)
    target = tensorc.Target.host()
    _, graph = import_model(model, None)
    lowered = lower_graph(graph, target, configs=log.best_configs(target) if log else None)
    convs = [(n.attrs, n.inputs[1].type) for g in lowered.groups for n in g.nodes
             if n.op == "conv"]
    return mod, convs


@pytest.mark.parametrize("target", [None, ZNVER4])
@pytest.mark.parametrize("convs", [1, 2])
def test_the_space_of_a_3x3_stride_1_conv_lists_winograd_and_the_direct_conv(target, convs):
    task = _conv_task(conv_model(convs=convs), target)
    knob = task.space().knobs["algorithm"]
    winograd = "winograd_blocked" if convs == 2 else "winograd"
    assert winograd in knob.choices and len(knob.choices) == 2
    # the default is the strategy's choice, the one the kernel has untuned
    assert knob.default == knob.choices[0]
    assert task.schedule().attrs["config"]["algorithm"] == knob.default
    if convs == 2:
        assert set(knob.choices) == {"winograd_blocked", "blocked"}


def test_the_knobs_of_the_algorithm_not_picked_keep_their_defaults():
    """No two configs of the space build the same kernel: the tuner's samples, mutations
    and neighbours leave the other algorithm's knobs at their defaults, and switching the
    algorithm alone gives its default schedule."""
    import random
    space = _conv_task(conv_model()).space()
    default = space.default()
    rng = random.Random(0)
    configs = [space.sample(rng) for _ in range(50)] + space.neighbours(default)
    configs += [space.mutate(c, rng, knobs=3) for c in configs]
    assert {c["algorithm"] for c in configs} == set(space.knobs["algorithm"].choices)
    for config in configs:
        assert space.is_valid(config)
        for name, (knob, value) in space.conditions.items():
            if config[knob] != value:
                assert config[name] == space.knobs[name].default
    other = next(c for c in space.neighbours(default) if c["algorithm"] != default["algorithm"])
    assert {k for k in other if other[k] != default[k]} == {"algorithm"}


def test_a_strided_or_1x1_conv_has_no_algorithm_knob():
    model = make_model(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 2], pads=[1] * 4)],
        [tensor_info("x", "float32", (1, 32, 14, 14))],
        [tensor_info("y", "float32", (1, 32, 7, 7))],
        initializers={"w": np.ones((32, 32, 3, 3), "float32")})
    assert "algorithm" not in _conv_task(model).space().knobs


@pytest.mark.parametrize("convs", [1, 2])
def test_records_picking_winograd_or_the_direct_conv_compile_and_match_onnxruntime(
        tmp_path, convs):
    model = conv_model(convs=convs)
    task = _conv_task(model)
    space = task.space()
    x = np.random.default_rng(0).standard_normal((1, 32, 14, 14)).astype("float32")
    want = ort_run(model, {"x": x})["y"]
    seen = set()
    for algorithm in space.knobs["algorithm"].choices:
        config = space.validate({**space.default(), "algorithm": algorithm})
        mod, attrs = _compiled(model, _log(tmp_path / algorithm, task, config))
        assert mod.info["tuning"]["tuned_kernels"] == 1
        assert mod.info["tuning"]["rejected_configs"] == 0
        np.testing.assert_allclose(mod.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
        # the conv the record names runs as the algorithm it picks (the chain's other convs,
        # same workload, too); its weights were repacked for it
        winograd = {bool(a.get("winograd")) for a, _ in attrs}
        assert winograd == {algorithm.startswith("winograd")}
        seen.add(algorithm)
    assert len(seen) == 2


def test_a_record_without_the_algorithm_knob_keeps_todays_choice(tmp_path):
    """A log written before the knob existed: its config lists the formulation's own knobs
    only. It applies, and the conv keeps the formulation (and weights) it has untuned."""
    model = conv_model()
    task = _conv_task(model)
    space = task.space()
    default = space.default()
    untuned_trace = task.schedule().attrs["trace"]
    # a tuned config of the default formulation's own knobs: one that schedules it otherwise
    tuned = next(c for c in space.neighbours(default) if c["algorithm"] ==
                 default["algorithm"] and task.schedule(c).attrs["trace"] != untuned_trace)
    old = {k: v for k, v in tuned.items() if k != "algorithm"}
    mod, attrs = _compiled(model, _log(tmp_path, task, old))
    assert mod.info["tuning"]["tuned_kernels"] == 1
    assert mod.info["tuning"]["rejected_configs"] == 0
    _, untuned = _compiled(model, None)
    assert attrs == untuned
    func = task.schedule(old)
    assert dict(func.attrs["config"]) == dict(tuned)
    assert func.attrs["trace"] == task.schedule(tuned).attrs["trace"]
    x = np.random.default_rng(1).standard_normal((1, 32, 14, 14)).astype("float32")
    np.testing.assert_allclose(mod.run({"x": x})["y"], ort_run(model, {"x": x})["y"],
                               rtol=1e-4, atol=1e-4)


def test_the_tuner_measures_both_algorithms_against_the_same_reference():
    task = _conv_task(conv_model())
    space = task.space()
    configs = [space.validate({**space.default(), "algorithm": a})
               for a in space.knobs["algorithm"].choices]
    options = MeasureOptions(repeats=1, min_repeat_seconds=0.0, num_threads=1)
    with LocalExecutor(build_workers=1) as executor:
        results = measure(executor, [Candidate(task, c) for c in configs], options)
    assert [r.error for r in results] == [None, None]
    assert all(r.latency > 0 for r in results)


def test_a_packed_b_takes_the_panel_width_the_record_picks(tmp_path):
    rng = np.random.default_rng(4)
    b = rng.standard_normal((64, 200)).astype("float32")
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                       [tensor_info("a", "float32", (16, 64))],
                       [tensor_info("y", "float32", (16, 200))], initializers={"b": b})
    (task,) = extract_tasks(model, measure=False)
    space = task.space()
    vectors = space.knobs["vectors"]
    assert len(vectors.choices) > 1 and vectors.default == vectors.choices[0]
    lanes = tensorc.Target.host().vector_lanes("float32")
    a = rng.standard_normal((16, 64)).astype("float32")
    for v in vectors.choices[1:]:
        config = next((c for c in space.configs() if c["vectors"] == v), None)
        assert config is not None
        log = _log(tmp_path / str(v), task, config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = tensorc.compile(model, tuning_log=log.path)
        assert mod.info["tuning"]["tuned_kernels"] == 1
        np.testing.assert_allclose(mod.run({"a": a})["y"], a @ b, rtol=1e-4, atol=1e-4)
        _, graph = import_model(model, None)
        lowered = lower_graph(graph, tensorc.Target.host(),
                              configs=log.best_configs(tensorc.Target.host()))
        (mm,) = [n for g in lowered.groups for n in g.nodes if n.op == "matmul"]
        assert mm.attrs["b_panel"] == v * lanes and mm.inputs[1].type.shape[2] == v * lanes
