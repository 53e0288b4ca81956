"""Every ``tensorc ...`` command in README.md's code blocks runs as written and exits 0.

The commands run in a scratch directory holding a link to ``models/`` (so that the files they
write, mlp.tcz and the like, land there). Later ones read what earlier ones wrote, and pytest-xdist
may run them on different workers or out of order, so a command whose input an earlier README
command writes (``-o FILE``, ``--log FILE``) runs that command first when the file is missing.
Changes, each for speed only: ``bench`` gets ``--repeat 2 --seconds 0.1``. Skipped:
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
from tensorc.cli.main import main

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


def _written(words: list[str]) -> list[str]:
    """The files a README command writes: the values of its -o and --log flags."""
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--log")]


def _run_prerequisites(command: str, workdir: Path) -> None:
    """Run the earlier README commands that write a file ``command`` reads, if it is missing."""
    words = shlex.split(command)
    commands = readme_commands()
    for earlier in commands[:commands.index(command)]:
        earlier_words = shlex.split(earlier)
        for name in _written(earlier_words):
            if name in words and name not in _written(words) and not (workdir / name).exists():
                assert main(earlier_words[1:]) == 0, f"prerequisite {earlier} failed"


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
    _run_prerequisites(command, workdir)
    try:
        status = main(words[1:])
    except SystemExit as exit_:          # --version, --help
        status = exit_.code
    captured = capsys.readouterr()
    assert status == 0, f"{command}: exit {status}\n{captured.err[-2000:]}"
    assert "Traceback" not in captured.err
