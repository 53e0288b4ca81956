"""Child processes that run one request at a time: length-prefixed pickles over the child's
stdin and stdout. A child that dies or hangs ends alone (its parent sees "crash" or "timeout"
and starts a fresh one on the next call); the measurement's builders and runner are such
children (autotune/measure.py), on this machine or inside a cluster's workers.

>>> worker = Worker()
>>> worker.call("run", job, timeout=20.0)  # ("ok", result), or ("timeout", message) ...
"""
from __future__ import annotations

import ctypes
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

_HEADER = struct.Struct("<Q")
READY_TIMEOUT = 120.0


class Worker:
    """One child process; restarted after it dies or times out. The child ends when the
    thread that started it dies (Linux), so a killed cluster worker leaves no candidate
    running behind it."""

    def __init__(self, memory_limit: int | None = None):
        self.memory_limit = memory_limit
        self.proc: subprocess.Popen | None = None
        self._stderr = None

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tensorc.autotune.measure", "--worker",
             str(self.memory_limit or 0)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        status, value = self._receive(READY_TIMEOUT)
        if status != "ready":
            self.stop()
            raise RuntimeError(f"a measurement worker did not start: {value}")

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - 400))
        return self._stderr.read().decode(errors="replace").strip()

    def _death(self) -> tuple[str, str]:
        code = self.proc.wait()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            what = f"the process died of {name}"
        else:
            what = f"the process exited with status {code}"
        tail = [line for line in self._stderr_tail().splitlines() if line.strip()]
        fatal = [line for line in tail if "Fatal Python error" in line]
        if fatal or tail:
            what += f" ({(fatal or tail)[-1].strip()[:200]})"
        self.stop()
        return "crash", what

    def _receive(self, timeout: float) -> tuple[str, Any]:
        out = self.proc.stdout
        deadline = time.monotonic() + timeout
        data = b""
        need = _HEADER.size
        header_done = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                return "timeout", f"no answer within {timeout:g} s (the process was killed)"
            ready, _, _ = select.select([out], [], [], left)
            if not ready:
                continue
            chunk = os.read(out.fileno(), need - len(data))
            if not chunk:
                return self._death()
            data += chunk
            if not header_done and len(data) >= _HEADER.size:
                (length,) = _HEADER.unpack(data[:_HEADER.size])
                data = data[_HEADER.size:]
                need = length
                header_done = True
            if header_done and len(data) >= need:
                return pickle.loads(data[:need])

    def call(self, kind: str, payload: Any, timeout: float) -> tuple[str, Any]:
        """("ok", result), ("error", message), ("timeout", message) or ("crash", message)."""
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self._start()
        blob = pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(_HEADER.pack(len(blob)) + blob)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._death()
        return self._receive(timeout)


def _send(fd: int, message: Any) -> None:
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(blob)) + blob)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(f, n: int) -> bytes | None:
    data = f.read(n)
    return data if data is not None and len(data) == n else None


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent goes (a measurement that went on
    after its cluster worker was killed would disturb the next one timed on the machine)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def serve(handlers: dict[str, Callable[[Any], Any]], memory_limit: int = 0) -> None:
    """The child's loop: read a request (kind, payload) from stdin, answer ("ok", what
    ``handlers[kind]`` returns) or ("error", message) on the original stdout, until stdin
    closes; ``memory_limit`` (bytes, 0: none) caps its address space."""
    # the protocol owns the original stdout; anything printed goes to stderr
    out_fd = os.dup(1)
    os.dup2(2, 1)
    _die_with_parent()
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    _send(out_fd, ("ready", None))
    stdin = sys.stdin.buffer
    while True:
        header = _read_exact(stdin, _HEADER.size)
        if header is None:
            return
        blob = _read_exact(stdin, _HEADER.unpack(header)[0])
        if blob is None:
            return
        kind, payload = pickle.loads(blob)
        try:
            reply = ("ok", handlers[kind](payload))
        except MemoryError:
            reply = ("error", "out of memory")
        except Exception as exc:        # noqa: BLE001  (reported as the candidate's error)
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _send(out_fd, reply)
