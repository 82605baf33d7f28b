"""The exceptions a sap program raises in Python."""

from __future__ import annotations


class SapError(Exception):
    """Anything sap could not do: a file that cannot be read, a bad option."""


class SapCheckError(SapError):
    """The program does not check: the message is what `sapc check` prints, with each
    diagnostic's file, line and column."""


class SapArgumentError(SapError, TypeError):
    """A call's arguments do not fit the function (nothing ran), or it has no such
    function."""


class SapRuntimeError(SapError):
    """The program failed while it ran. `location` is `file:line:column` (or None),
    `stack` the sap call stack, innermost first, as (function, location) pairs, and
    the message the located error as `sapc run` prints it."""

    message: str
    location: str | None
    stack: list[tuple[str, str | None]]

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.message = text
        self.location = None
        self.stack = []


class SapBudgetError(SapRuntimeError):
    """A budget of the run ran out (model calls, tokens, time, loop iterations, depth)."""


class SapModelError(SapRuntimeError):
    """The model could not be reached, refused, or never gave an answer of the type."""


class SapCancelledError(SapRuntimeError):
    """The call was cancelled (Ctrl-C, `Pending.cancel`, or asyncio cancelling the task
    that awaited it): it stopped at the model or tool call it waited for."""
