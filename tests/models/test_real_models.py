"""The issue-3 test models (exporter-style graphs of real architectures) compiled by tensorc
match onnxruntime (float32: rtol 1e-4, atol 1e-4)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from helpers import ort_run

import tensorc

# each entry is a module of models/ with build(),
# example_inputs() and INPUT_SHAPES
REAL_MODELS = ["mobilenetv2", "bert", "gpt2", "detector", "lstm"]


@pytest.mark.parametrize("name", REAL_MODELS)
def test_model_matches_onnxruntime(name: str) -> None:
    module = importlib.import_module(f"models.{name}")
    model = module.build()
    feeds = module.example_inputs()
    got = tensorc.compile(model, input_shapes=module.INPUT_SHAPES).run(feeds)
    want = ort_run(model, feeds)
    assert list(got) == list(want)
    for out_name, expected in want.items():
        np.testing.assert_allclose(got[out_name], expected, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: output {out_name}")
