"""Features read off known loop nests."""
from __future__ import annotations

import numpy as np

from tensorc.autotune.features import FEATURE_LENGTH, FEATURE_NAMES, extract_features, \
    store_features
from tensorc.ir import te
from tensorc.ir.lower import lower
from tensorc.ir.schedule import create_schedule
from tensorc.passes.loop import optimize


def _add_kernel(vectorize: bool, parallel: bool):
    a = te.placeholder((64, 32), "float32", name="A")
    b = te.placeholder((32,), "float32", name="B")
    c = te.compute((64, 32), lambda i, j: a[i, j] * b[j] + 1.0, name="C")
    sch = create_schedule(c)
    i, j = sch[c].op_axis
    jo, ji = sch[c].split(j, 8)
    if vectorize:
        sch[c].vectorize(ji)
    if parallel:
        sch[c].parallel(i)
    return optimize(lower(sch, [a, b, c], "k"))


def test_store_features_of_a_known_loop_nest():
    (store,) = store_features(_add_kernel(vectorize=True, parallel=True))
    assert store["executions"] == 64 * 32
    assert store["depth"] == 3
    assert store["vector_lanes"] == 8
    assert store["parallel"] == 64
    assert store["innermost_extent"] == 8
    assert store["float_mul"] == 64 * 32 and store["float_addsub"] == 64 * 32
    assert store["loads"] == 2 * 64 * 32
    # A and C: unit stride along the vector loop; B is reused across the 64 rows
    assert store["stride_1"] == 3
    assert store["global_unique_bytes"] == 4 * (64 * 32 + 32 + 64 * 32)
    assert store["max_reuse"] == 64


def test_feature_vectors_have_a_fixed_length_and_tell_schedules_apart():
    plain = extract_features(_add_kernel(False, False))
    fast = extract_features(_add_kernel(True, True))
    assert plain.shape == fast.shape == (FEATURE_LENGTH,) == (len(FEATURE_NAMES),)
    assert plain.dtype == np.float32
    lanes = FEATURE_NAMES.index("s0.vector_lanes")
    par = FEATURE_NAMES.index("s0.parallel")
    # log2(1 + x): one lane and one thread without vectorize and parallel
    assert plain[lanes] == 1 and fast[lanes] == np.float32(np.log2(9))
    assert plain[par] == 1 and fast[par] == np.float32(np.log2(65))


def _ordered_kernel(rows_outside: bool):
    a = te.placeholder((64, 32), "float32", name="A")
    c = te.compute((64, 32), lambda i, j: a[i, j] * 2.0, name="C")
    sch = create_schedule(c)
    i, j = sch[c].op_axis
    jo, ji = sch[c].split(j, 8)
    sch[c].reorder(*((i, jo, ji) if rows_outside else (jo, i, ji)))
    sch[c].vectorize(ji)
    return optimize(lower(sch, [a, c], "k"))


def test_loop_orders_of_the_same_loops_have_different_features():
    # same loops, same totals, same innermost stride: only the levels tell them apart
    rows_outside = extract_features(_ordered_kernel(True))
    rows_inside = extract_features(_ordered_kernel(False))
    extent = FEATURE_NAMES.index("s0.level2_extent")
    touched = FEATURE_NAMES.index("s0.level2_bytes")
    assert rows_outside[extent] == np.float32(np.log2(1 + 4))    # the column blocks
    assert rows_inside[extent] == np.float32(np.log2(1 + 64))    # the rows
    # A and C, 4 bytes a float: a row of 32, or a column block of 8 across 64 rows
    assert rows_outside[touched] == np.float32(np.log2(1 + 2 * 4 * 32))
    assert rows_inside[touched] == np.float32(np.log2(1 + 2 * 4 * 8 * 64))


def test_prefetches_count_the_lines_they_ask_for():
    a = te.placeholder((64, 32), "float32", name="A")
    c = te.compute((64, 32), lambda i, j: a[i, j] * 2.0, name="C")
    kernels = []
    for ahead in (0, 2):
        sch = create_schedule(c)
        i, j = sch[c].op_axis
        sch[c].vectorize(j)
        if ahead:
            sch[c].prefetch(a, i, ahead)     # a row (two lines) per row
        kernels.append(extract_features(optimize(lower(sch, [a, c], "k"))))
    lines = FEATURE_NAMES.index("sum.prefetched_lines")
    assert kernels[0][lines] == 0 and kernels[1][lines] == np.float32(np.log2(1 + 64 * 2))
