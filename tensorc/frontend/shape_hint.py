"""The shape to suggest for an input whose dims the model leaves open, for the messages of
``compile`` and ``check``: a leading batch dim is 1, image height and width come from the
model's metadata where its exporter wrote them (ultralytics writes ``imgsz: [320, 320]``), and
any other open dim is 1, which the hint calls a placeholder, since nothing says it fits.

>>> shape_hint("images", ["batch", 3, "h", "w"], proto).cli     # proto says imgsz: [320, 320]
'--input-shape images=1x3x320x320'
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import onnx

# metadata_props keys that exporters use for the image size a model was trained at
IMAGE_SIZE_KEYS = ("imgsz", "img_size", "image_size", "input_size")


@dataclass
class ShapeHint:
    """A suggested shape for input ``name``: which of its dims are placeholders (1 with
    nothing to go on) and the metadata entry the others came from, if any."""
    name: str
    dims: list[int]
    placeholders: list[int]
    source: str | None = None

    @property
    def cli(self) -> str:
        return f"--input-shape {self.name}={'x'.join(str(d) for d in self.dims)}"

    @property
    def python(self) -> str:
        return f"input_shapes={{{self.name!r}: {tuple(self.dims)}}}"

    @property
    def note(self) -> str | None:
        """What the suggestion rests on, where that is more than a batch of 1."""
        parts = []
        if self.source:
            parts.append(f"the image size of {self.name!r} is from the model's metadata "
                         f"({self.source})")
        if self.placeholders:
            dims = ", ".join(str(d) for d in self.placeholders)
            several = len(self.placeholders) > 1
            parts.append(f"dim{'s' if several else ''} {dims} of {self.name!r} "
                         f"{'are placeholders' if several else 'is a placeholder'} (1: the "
                         f"model does not say what fits; give your data's sizes)")
        return "; ".join(parts) or None

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.dims, "placeholder_dims": self.placeholders,
                "source": self.source}


def metadata_image_size(proto: onnx.ModelProto) -> tuple[str, list[int]] | None:
    """The (entry, [height, width]) of the image size in the model's metadata_props, or
    None; one number means a square."""
    props = {p.key: p.value for p in proto.metadata_props}
    for key in IMAGE_SIZE_KEYS:
        if key in props:
            numbers = [int(n) for n in re.findall(r"\d+", props[key])]
            if len(numbers) in (1, 2) and all(n > 0 for n in numbers) and \
                    re.fullmatch(r"[\s\[\](),\d]*", props[key]):
                size = numbers * 2 if len(numbers) == 1 else numbers
                return f"{key}: {props[key]}", size
    return None


def shape_hint(name: str, dims: Sequence[int | str | None] | None,
               proto: onnx.ModelProto) -> ShapeHint:
    """The shape to suggest for input ``name`` of declared (or partly bound) ``dims``."""
    if dims is None:
        return ShapeHint(name, [1], [0])
    image = metadata_image_size(proto)
    out, placeholders, source = [], [], None
    for index, dim in enumerate(dims):
        if isinstance(dim, int):
            out.append(dim)
        elif index == 0 and len(dims) >= 2:
            out.append(1)                               # a batch of one
        elif image and len(dims) == 4 and index >= 2:
            source = image[0]
            out.append(image[1][index - 2])
        else:
            placeholders.append(index)
            out.append(1)
    return ShapeHint(name, out, placeholders, source)
