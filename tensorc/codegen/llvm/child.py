"""A long-lived forked child that runs LLVM for this process, so that an LLVM abort (one of its
internal assertions) kills only the child.

Forking a child per kernel cost 25-150 ms from a large process (a test runner, the tuner:
page tables of every loaded library copied, then torn down), several times what LLVM takes
for a small kernel. The child is forked once, on first use, and serves one request at a time
over a pair of pipes (length-prefixed pickles); when it dies, the request it had fails
(:class:`ChildCrashed`, with its signal and the last line it wrote on stderr) and the next
call forks a fresh one. It runs the code as it was when it was forked: :func:`stop` makes
the next call fork a fresh child (tests that patch the code the child runs).

>>> run_in_child(_emit, llvm_ir, target, True, 3)     # _emit's value, or its exception
"""
from __future__ import annotations

import atexit
import faulthandler
import os
import pickle
import signal
import struct
import tempfile
import threading
from typing import Any, Callable

_HEADER = struct.Struct("<Q")


class ChildCrashed(Exception):
    """The child died while it ran a request."""


class _Child:
    def __init__(self) -> None:
        self.errors = tempfile.TemporaryFile()
        request_read, request_write = os.pipe()
        result_read, result_write = os.pipe()
        pid = os.fork()
        if pid == 0:            # the child: never returns into the caller's code
            status = 0
            try:
                os.close(request_write)
                os.close(result_read)
                faulthandler.disable()                  # a crash here is expected and handled
                os.dup2(self.errors.fileno(), 2)        # LLVM's assertion text, for the error
                _serve(request_read, result_write)
            except BaseException:   # noqa: BLE001
                status = 1
            finally:
                os._exit(status)
        os.close(request_read)
        os.close(result_write)
        self.pid, self.owner = pid, os.getpid()
        self.requests, self.results = request_write, result_read

    def call(self, fn: Callable, args: tuple) -> tuple[bool, Any]:
        self.errors.seek(0, os.SEEK_END)
        said_before = self.errors.tell()
        blob = pickle.dumps((fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _write(self.requests, _HEADER.pack(len(blob)) + blob)
            reply = _read_message(self.results)
        except OSError:         # the pipe broke: the child is gone
            reply = None
        if reply is None:
            raise ChildCrashed(self._death(said_before))
        return pickle.loads(reply)

    def _death(self, said_before: int) -> str:
        self.close()
        _, wait_status = os.waitpid(self.pid, 0)
        self.errors.seek(said_before)
        said = self.errors.read().decode(errors="replace").strip().splitlines()
        said = f": {said[-1][-300:]}" if said else ""
        self.errors.close()
        if os.WIFSIGNALED(wait_status):
            return f"signal {signal.Signals(os.WTERMSIG(wait_status)).name}{said}"
        return f"exit status {os.WEXITSTATUS(wait_status)}{said}"

    def close(self) -> None:
        for fd in (self.requests, self.results):
            try:
                os.close(fd)
            except OSError:
                pass

    def stop(self) -> None:
        """End the child: it sees the end of its requests and exits."""
        self.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass
        self.errors.close()


_child: _Child | None = None
_lock = threading.Lock()


def run_in_child(fn: Callable, *args) -> Any:
    """``fn(*args)`` (a module-level function, picklable arguments and value) run in the
    child; a Python exception there is raised here, a death raises :class:`ChildCrashed`."""
    global _child
    with _lock:
        if _child is not None and _child.owner != os.getpid():
            _child = None       # a forked copy of this process: the child is its parent's
        if _child is None:
            _child = _Child()
        try:
            ok, value = _child.call(fn, args)
        except ChildCrashed:
            _child = None
            raise
        except BaseException:
            # this call interrupted (KeyboardInterrupt) with its reply unread: the next call
            # starts a fresh child
            _child.stop()
            _child = None
            raise
    if not ok:
        raise value
    return value


def stop() -> None:
    """End the child, if there is one; the next call forks a fresh one."""
    global _child
    with _lock:
        if _child is not None and _child.owner == os.getpid():
            _child.stop()
        _child = None


def _forget_in_a_forked_copy() -> None:
    """A process forked from this one (a build pool's worker) forks its own child when it
    needs one, and must not wait on a lock that a thread of its parent held at the fork."""
    global _child, _lock
    _child, _lock = None, threading.Lock()


atexit.register(stop)
os.register_at_fork(after_in_child=_forget_in_a_forked_copy)


def _serve(requests: int, results: int) -> None:
    while True:
        message = _read_message(requests)
        if message is None:
            return              # the parent closed the pipe or exited
        try:
            fn, args = pickle.loads(message)
            reply = pickle.dumps((True, fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:   # noqa: BLE001 (carried to the parent)
            reply = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
        _write(results, _HEADER.pack(len(reply)) + reply)


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_message(fd: int) -> bytes | None:
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    return _read_exact(fd, _HEADER.unpack(header)[0])
