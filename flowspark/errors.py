"""The error a failed run raises, and the one a run stopped on request raises."""

__all__ = ["BytewaxRuntimeError", "FlowsparkRuntimeError", "RunStopped"]


class FlowsparkRuntimeError(RuntimeError):
    """A run failed; the message names the step, `__cause__` holds the user's exception."""


BytewaxRuntimeError = FlowsparkRuntimeError
"""Bytewax's name for the same error, so migrated `except` clauses keep working."""


class RunStopped(Exception):
    """A run was asked to stop (SIGTERM) and did; `status` is the exit status the command line ends with.

    Not a failure: a run started again with the same recovery directory
    resumes where it stopped.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
