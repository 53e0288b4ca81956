"""The host side of a CUDA module: which kernels to launch, in what order, on what memory.

A model runs as a fixed list of launches, decided at compile time. Every kernel argument is
a place in one of four device regions: the model's inputs, its outputs, the constant pool
(the weights, uploaded once) and the arena (intermediates and the kernels' workspace), plus a
byte offset. Running the model resolves those places against the region's device pointers
and launches each kernel in turn; nothing else happens on the host.

>>> plan.launches[0]
Launch(kernel='k0_fused_matmul_add', grid=(8, 1, 1), block=(256, 1, 1),
       args=[('input', 0, 0), ('const', 0, 0), ('arena', 0, 0)], group='fused_matmul_add')
>>> resolve_args(plan.launches[0], {"input": [px], "output": [py], "const": [pc],
...                                 "arena": [pa]})
[px, pc, pa]
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorc.errors import ArtifactError

REGIONS = ("input", "output", "const", "arena")


@dataclass
class Launch:
    """One kernel launch: grid and block dimensions, and one (region, index, byte offset)
    per kernel parameter; the group it computes and that group's (node name, op) pairs, for
    messages."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[tuple[str, int, int]]
    group: str = ""
    nodes: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "grid": list(self.grid), "block": list(self.block),
                "args": [list(a) for a in self.args], "group": self.group,
                "nodes": [list(n) for n in self.nodes]}

    @staticmethod
    def from_json(data: dict) -> Launch:
        return Launch(str(data["kernel"]), tuple(int(d) for d in data["grid"]),
                      tuple(int(d) for d in data["block"]),
                      [(str(k), int(i), int(o)) for k, i, o in data["args"]],
                      str(data.get("group", "")),
                      tuple((str(n), str(op)) for n, op in data.get("nodes", ())))


@dataclass
class LaunchPlan:
    """The launches of a model, in order, and the size of its device arena."""

    launches: list[Launch] = field(default_factory=list)
    arena_size: int = 0

    @property
    def kernel_names(self) -> list[str]:
        return list(dict.fromkeys(launch.kernel for launch in self.launches))

    def to_json(self) -> dict:
        return {"arena_size": self.arena_size,
                "launches": [launch.to_json() for launch in self.launches]}

    @staticmethod
    def from_json(data: dict) -> LaunchPlan:
        try:
            return LaunchPlan([Launch.from_json(x) for x in data["launches"]],
                              int(data["arena_size"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtifactError(f"the artifact's launch plan is corrupt ({exc}); compile the "
                                f"model again") from None

    def describe(self) -> str:
        lines = [f"{len(self.launches)} launches, device arena {self.arena_size} bytes"]
        for launch in self.launches:
            grid = "x".join(map(str, launch.grid))
            block = "x".join(map(str, launch.block))
            args = ", ".join(f"{k}{i}+{o}" if o else f"{k}{i}" for k, i, o in launch.args)
            lines.append(f"  {launch.kernel}<<<{grid}, {block}>>>({args})")
        return "\n".join(lines)


def resolve_args(launch: Launch, regions: dict[str, list[int]]) -> list[int]:
    """The device pointers of ``launch``'s arguments, given each region's base pointers
    (``regions["input"][k]`` is input k's)."""
    return [regions[kind][index] + offset for kind, index, offset in launch.args]
