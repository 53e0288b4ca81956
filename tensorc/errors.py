"""Errors a user can cause. Every one names the problem and the fix."""


class TensorcError(Exception):
    """Base class of every error tensorc raises for bad input. ``cli_message``, where set,
    is the message as the command line says it (its flags instead of keyword arguments)."""

    cli_message: str | None = None


class UnsupportedOpError(TensorcError):
    """The model uses ops tensorc cannot compile (all of them are listed at once)."""


class ModelLoadError(TensorcError):
    """The model file is missing, corrupt or truncated."""


class ShapeError(TensorcError):
    """A shape or dtype cannot be inferred, or does not match what an op requires."""


class ConstantRequiredError(ShapeError):
    """A value that decides a shape (Reshape's shape, a Loop's trip count, ...) is computed
    at run time. ``inputs`` names the graph inputs it depends on: compiling again with those
    bound to constants (specializing on their values) removes the problem."""

    def __init__(self, message: str, inputs: tuple[str, ...] = ()):
        super().__init__(message)
        self.inputs = tuple(inputs)


class InputError(TensorcError):
    """A feed passed to Module.run does not match the model's signature."""


class ArtifactError(TensorcError):
    """A saved module (.tcz) is corrupt, truncated or of another version."""


class ScheduleError(TensorcError):
    """A schedule primitive was applied where it is not legal."""


class KernelRuntimeError(TensorcError):
    """Compiled code stopped a run: a runtime check failed (an index out of range, ...)."""


class InvalidModelError(ModelLoadError):
    """The model breaks the ONNX specification (a node's inputs, outputs or attributes
    contradict its operator's schema); onnxruntime rejects such models too."""


class SizeLimitError(ShapeError):
    """A tensor or the memory a model needs exceeds the size limit: checked before anything
    is allocated, so a huge dim or attribute cannot exhaust the machine's memory."""


class SymbolicDimError(ShapeError):
    """Code asked for the value of a symbolic dim (``int(d)``, ``bool(d)``, a comparison the
    dims' ranges cannot decide): its value is known only at run time. ``dim`` is the Dim.
    Raised instead of assuming a value, so code not yet ported to symbolic shapes fails
    loud rather than wrong."""

    def __init__(self, message: str, dim=None):
        super().__init__(message)
        self.dim = dim
