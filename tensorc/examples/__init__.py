"""The example models the README and ``--help`` use, built with seeded random weights:
``python -m tensorc.examples`` writes them into the current directory (or the one given).

    $ python -m tensorc.examples                # mlp.onnx lenet5.onnx resnet.onnx bert.onnx
    $ tensorc compile mlp.onnx -o mlp.tcz

>>> write_examples("examples", ["mlp"])
[PosixPath('examples/mlp.onnx')]
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

# name: what it is (each is a module here with build())
EXAMPLES = {
    "mlp": "MLP 784-256-128-10, input x [1,784] (1 MB)",
    "lenet5": "LeNet-5, input x [1,1,28,28] (0.25 MB)",
    "resnet": "ResNet-10 at 224x224, input input [N,3,224,224], N symbolic (20 MB)",
    "bert": "a 2-layer BERT-style encoder, inputs input_ids and attention_mask "
            "[batch,sequence], both symbolic (2 MB)",
}


def write_examples(directory: str | Path = ".", names: Sequence[str] | None = None
                   ) -> list[Path]:
    """Write the example models ``names`` (default: all of EXAMPLES) as NAME.onnx into
    ``directory`` (made if missing); returns their paths."""
    import onnx

    folder = Path(directory)
    unknown = [n for n in names or () if n not in EXAMPLES]
    if unknown:
        raise ValueError(f"unknown example {', '.join(unknown)}: the examples are "
                         f"{', '.join(EXAMPLES)}")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or EXAMPLES:
        path = folder / f"{name}.onnx"
        onnx.save(importlib.import_module(f"tensorc.examples.{name}").build(), path)
        written.append(path)
    return written
