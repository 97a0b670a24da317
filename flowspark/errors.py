"""The error a failed run raises."""

__all__ = ["BytewaxRuntimeError", "FlowsparkRuntimeError"]


class FlowsparkRuntimeError(RuntimeError):
    """A run failed; the message names the step, `__cause__` holds the user's exception."""


BytewaxRuntimeError = FlowsparkRuntimeError
"""Bytewax's name for the same error, so migrated `except` clauses keep working."""
