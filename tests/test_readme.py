"""Every ``tensorc ...`` command in README.md's code blocks runs as written and exits 0, and
every file the ``--help`` examples read exists.

The commands run in a scratch directory outside the checkout, where the README's ``python``
lines ran first (``python -m tensorc.examples`` writes the example models there, as a user
runs it after ``pip install``). Later ones read what earlier ones wrote, and pytest-xdist
may run them on different workers or out of order, so a command whose input an earlier README
command writes (``-o FILE``, ``--log FILE``) runs that command first when the file is missing.
Changes, each for speed only: ``bench`` gets ``--repeat 2 --seconds 0.1``. Skipped:
commands that need nvcc when it is not installed (the CUDA section's compile) and commands
that name a Dask scheduler (``--cluster``: tests/autotune/test_cluster.py tunes through a real
local cluster). The README's
``python`` lines run in a subprocess, in order, before any tensorc command.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tensorc.cli.main import build_parser, main
from tensorc.examples import EXAMPLES

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
    assert any(c.startswith("tensorc bench resnet.onnx") for c in commands)
    assert not any("models/" in c for c in commands)         # no file of the checkout


def _needs_nvcc(words: list[str]) -> bool:
    return words[1] == "compile" and any(w.startswith("cuda") for w in words)


def readme_python_lines() -> list[str]:
    """The setup lines of README.md's sh code blocks that a user runs anywhere: ``python -m
    tensorc...`` and ``python -c`` (not the checkout's ``python -m benchmarks...``)."""
    blocks = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.S)
    return [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()
            if line.startswith(("python -m tensorc", "python -c "))]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("readme")
    env = {**os.environ, "PYTHONPATH": str(README.parent)}      # this checkout's tensorc
    lines = readme_python_lines()
    assert lines[0] == "python -m tensorc.examples"
    for line in lines:
        words = shlex.split(line)
        subprocess.run([sys.executable, *words[1:]], cwd=work, env=env, check=True,
                       capture_output=True)
    for name in EXAMPLES:
        assert (work / f"{name}.onnx").is_file()
    return work


WRITING_FLAGS = ("-o", "--output", "--log", "--outputs", "--trace", "--plot")


def _written(words: list[str]) -> list[str]:
    """The files a command writes: the values of its -o, --log, ... flags."""
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in WRITING_FLAGS]


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


def _epilogs() -> dict[str, str]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"tensorc": parser.epilog, **{name: sub.epilog for name, sub in
                                         commands.choices.items()}}


@pytest.mark.parametrize("command", list(_epilogs()))
def test_help_examples_name_files_that_exist(command: str) -> None:
    """--help named models/mobilenetv2.onnx and models/bert.onnx, which exist only inside
    the checkout or not at all (issue 38): each example reads only the example models
    (python -m tensorc.examples) and files an earlier example of the same help writes."""
    files = {f"{name}.onnx" for name in EXAMPLES}
    lines = [line.strip().split("  #")[0] for line in _epilogs()[command].splitlines()
             if line.strip().startswith(("tensorc ", "python "))]
    assert lines, command
    for line in lines:
        words = shlex.split(line)
        if words[0] == "python":
            files.update(re.findall(r"np\.savez?\('([^']+)'", line))
            continue
        written = _written(words)
        read = [w.split("=", 1)[-1] for w in words[1:]
                if re.search(r"\.(onnx|tcz|npz|npy|jsonl)$", w) and w not in written]
        missing = [name for name in read if name not in files]
        assert not missing, f"{command} --help: {line!r} reads {missing}, which nothing writes"
        files.update(written)
