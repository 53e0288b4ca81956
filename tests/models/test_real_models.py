"""The models that look like real exports (issues 3 and 6), compiled by tensorc, match
onnxruntime (float32: rtol 1e-4, atol 1e-4), and their outputs are not degenerate."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import ort_run

import models
import tensorc

# each is a module of models/ with build(), example_inputs() and INPUT_SHAPES
REAL_MODELS = ["resnet50", "mobilenetv2", "bert", "bert_base", "gpt2", "detector", "lstm",
               "squeezenet", "inception", "efficientnet", "yolo", "audio", "aspp", "aspp_mid"]


@pytest.mark.parametrize("name", REAL_MODELS)
def test_model_matches_onnxruntime(name: str) -> None:
    model = models.load(name)
    feeds = models.example_inputs(name)
    got = tensorc.compile(model, input_shapes=models.input_shapes(name)).run(feeds)
    want = ort_run(model, feeds)
    assert list(got) == list(want)
    for out_name, expected in want.items():
        np.testing.assert_allclose(got[out_name], expected, rtol=1e-4, atol=1e-4,
                                   err_msg=f"{name}: output {out_name}")
        # a network whose activations died or saturated would match trivially
        assert expected.std() > 0.05, f"{name}: output {out_name} is nearly constant"
