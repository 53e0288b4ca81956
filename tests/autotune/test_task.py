"""Tasks and search spaces: distinct kernels with weights; every config of a small space
builds and matches numpy; invalid configs are rejected before building."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

from tensorc.autotune.task import extract_tasks
from tensorc.codegen.build import build_kernel
from tensorc.compiler.kernel import workload_key
from tensorc.ops.space import InvalidConfigError


def test_extract_tasks_counts_identical_kernels_once(tiny_conv):
    tasks = extract_tasks(tiny_conv, measure=True, num_threads=1)
    by_ops = {t.ops: t for t in tasks}
    conv = next(t for ops, t in by_ops.items() if ops[0] == "conv")
    assert conv.weight == 2                      # both convs have the same workload
    assert conv.flops == 2 * 8 * 12 * 12 * 8 * 9 + 8 * 12 * 12  # conv (2 per MAC) + relu
    assert sum(t.weight for t in tasks) == 3     # conv x2, softmax
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
def test_every_config_of_a_small_space_builds_and_matches_numpy(which, tiny_conv,
                                                                tiny_matmul, tiny_softmax):
    model = {"conv": tiny_conv, "softmax": tiny_softmax, "matmul": tiny_matmul}[which]
    task = next(t for t in extract_tasks(model, measure=False) if which in t.ops)
    space = task.space()
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
