"""Tasks and search spaces: distinct kernels with weights; every config of a small space
builds and matches numpy; invalid configs are rejected before building."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from tensorc.autotune.task import extract_tasks
from tests.autotune.conftest import matmul_model, single_conv_model
from tensorc.runtime.kernel import build_kernel
from tensorc.compiler.kernel import workload_key
from tensorc.ops.space import InvalidConfigError
from tensorc.target import Target


def test_extract_tasks_counts_identical_kernels_once(tiny_conv):
    tasks = extract_tasks(tiny_conv, measure=True, num_threads=1)
    by_ops = {t.ops: t for t in tasks}
    conv = next(t for ops, t in by_ops.items() if ops[0] == "conv")
    assert conv.weight == 2                      # both convs have the same workload
    assert conv.flops == 2 * 8 * 12 * 12 * 8 * 9 + 8 * 12 * 12  # conv (2 per MAC) + relu
    # conv x2 and the softmax; on AVX2 the two convs' 8 channels fill a block of 8, so that
    # they run blocked between two layout transforms (AVX-512's blocks of 16 they do not fill)
    transforms = [t for t in tasks if t.ops == ("layout_transform",)]
    assert len(transforms) == (2 if Target.host().vector_lanes() == 8 else 0)
    assert all(t.weight == 1 for t in transforms)
    assert sum(t.weight for t in tasks) == 3 + len(transforms)
    assert all(t.default_latency and t.default_latency > 0 for t in tasks)
    assert len({t.workload for t in tasks}) == len(tasks)


def test_task_is_standalone_and_picklable(tiny_conv):
    (task, *_) = extract_tasks(tiny_conv, measure=False)
    copy = pickle.loads(pickle.dumps(task))
    assert workload_key(copy.group, copy.graph) == task.key
    assert copy.workload == task.workload


@pytest.mark.parametrize("model", ["squeezenet", "efficientnet"])
def test_every_task_of_a_model_pickles_with_its_space(model):
    """The tuner sends each candidate's task to its build workers: every space's knobs and
    constraints must pickle (a closure as the filters-in-lanes space's constraint crashed
    the tuning benchmark). SqueezeNet and EfficientNet cover the conv forms (filters in
    lanes, matmul, flattened, depthwise windows, flat phases), pools and reductions."""
    import models
    tasks = extract_tasks(str(models.path(model)), measure=False)
    assert len(tasks) > 5
    for task in tasks:
        space = task.space()
        copy = pickle.loads(pickle.dumps(task))
        assert copy.space().default() == space.default()
        assert pickle.loads(pickle.dumps(space)).violation(space.default()) is None


@pytest.mark.parametrize("which", ["conv", "softmax", "matmul"])
def test_every_config_of_a_small_space_builds_and_matches_numpy(which, tiny_softmax):
    # one conv (the tiny model's chain of two runs blocked on AVX2, a space of 1152 configs)
    # and 16 columns (24 are three AVX2 vectors: 240 configs): small spaces on AVX2 and
    # AVX-512 alike
    model = {"conv": single_conv_model(), "softmax": tiny_softmax,
             "matmul": matmul_model(8, 32, 16)}[which]
    task = next(t for t in extract_tasks(model, measure=False) if which in t.ops)
    space = task.space()
    if which == "matmul":   # B's other panel widths (repacked B): test_algorithm_knob.py
        space = space.pinned(vectors=space.default()["vectors"])
    configs = list(space.configs())
    assert 2 <= len(configs) <= 40
    inputs = task.inputs(seed=3)
    want = task.reference(inputs)[0]
    traces = set()
    for config in configs:
        func = task.schedule(config)
        assert func.attrs["config"] == config
        traces.add(repr(func.attrs["trace"]))
        kernel = build_kernel(func)
        out = np.full(want.shape, np.nan, want.dtype)
        kernel(*inputs, out, num_threads=1)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(config))
    assert len(traces) > 1      # the knobs change the schedule


def test_an_invalid_config_is_rejected_before_building(tiny_matmul):
    (task,) = extract_tasks(tiny_matmul, measure=False)
    bad = dict(task.space().default(), vectors=99)
    with pytest.raises(InvalidConfigError, match="vectors"):
        task.schedule(bad)
