"""Every ``tensorc ...`` command in README.md's code blocks runs as written and exits 0.

The commands run in a scratch directory holding a link to ``models/`` (so that the files they
write, mlp.tcz and the like, land there) and in order, since later ones read what earlier ones
wrote. Changes, each for speed only: ``bench`` gets ``--repeat 2 --seconds 0.1``. Skipped:
commands that need nvcc when it is not installed (the CUDA section's compile) and commands
that name a Dask scheduler (``--cluster``: tests/autotune/test_cluster.py tunes through a real
local cluster). Python lines
(``python -m ...``) are not tensorc commands and are not run here.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import models
from tensorc.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_commands() -> list[str]:
    """The ``tensorc`` lines of README.md's sh code blocks, comments removed."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == "tensorc":
                commands.append(shlex.join(words))
    return commands


def test_readme_has_commands() -> None:
    commands = readme_commands()
    assert len(commands) >= 8
    assert any(c.startswith("tensorc bench models/resnet.onnx") for c in commands)


def _needs_nvcc(words: list[str]) -> bool:
    return words[1] == "compile" and any(w.startswith("cuda") for w in words)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("readme")
    for name in ("mlp", "resnet"):
        models.path(name)                      # generated models are written on first use
    (work / "models").symlink_to(models.MODELS_DIR, target_is_directory=True)
    np.save(work / "x.npy", np.random.default_rng(0).standard_normal((1, 784), np.float32))
    return work


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command: str, workdir: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    words = shlex.split(command)
    if _needs_nvcc(words):
        from tensorc.codegen.nvcc import find_nvcc
        if find_nvcc() is None:
            pytest.skip("nvcc is not installed")
    if "--cluster" in words:
        pytest.skip("needs a running Dask scheduler at the README's address")
    if words[1] == "bench":
        words += ["--repeat", "2", "--seconds", "0.1"]
    monkeypatch.chdir(workdir)
    if words[1] == "run" and not (workdir / words[2]).exists():
        assert main(["compile", "models/mlp.onnx", "-o", words[2]]) == 0   # run out of order
    try:
        status = main(words[1:])
    except SystemExit as exit_:          # --version, --help
        status = exit_.code
    captured = capsys.readouterr()
    assert status == 0, f"{command}: exit {status}\n{captured.err[-2000:]}"
    assert "Traceback" not in captured.err
