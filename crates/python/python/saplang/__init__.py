"""sap procedures as typed Python functions.

    import saplang
    prog = saplang.load("agent.sap", provider="openai", model="gpt-4o-mini")
    analysis = prog.call("analyze_code", code="def div(a, b): return a / b")

`load` checks and compiles the program in this process (its diagnostics raise
`SapCheckError`); `Program.call` runs any of its functions with keyword arguments, with
the GIL released, and `Program.acall` does the same without blocking the event loop.
`sapc gen python agent.sap -o agent_types.py` writes Pydantic models for the program's
types and a `Program` class whose methods are typed.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import enum
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from . import _native
from ._errors import (
    SapArgumentError,
    SapBudgetError,
    SapCancelledError,
    SapCheckError,
    SapError,
    SapModelError,
    SapRuntimeError,
)

__all__ = [
    "Context",
    "Program",
    "SapArgumentError",
    "SapBudgetError",
    "SapCancelledError",
    "SapCheckError",
    "SapError",
    "SapModelError",
    "SapRuntimeError",
    "load",
    "python_types",
    "validate",
]

__version__: str = _native.__version__

# Before the interpreter finalizes, sap's threads stop entering Python (a thread still
# in it then would abort the process).
atexit.register(_native.close)


def _to_json(value: Any) -> Any:
    """A value as sap takes it: Pydantic models by their JSON form, enums by value."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, enum.Enum):
        return _to_json(value.value)
    if isinstance(value, Mapping):
        return {str(k): _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


# The threads `acall` waits in: each only waits (the GIL released) for a call already
# running on sap's threads, so a few serve any number of calls at once.
_waiters = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="sap-wait")


Context = _native.Context
"""A context kept between calls: pass it as the argument of a function's `Context`
parameter (`program.call("f", ctx=context, …)`); `instruct(text)` and `add_data(label,
value)` add to it, `render()` shows what the model sees of it."""


def _split(arguments: Mapping[str, Any]) -> tuple[dict[str, Any], Context | None]:
    """The arguments as sap takes them, and the context among them, if one was given."""
    given: dict[str, Any] = {}
    context = None
    for key, value in arguments.items():
        if isinstance(value, Context):
            context = value
        else:
            given[key] = _to_json(value)
    return given, context


class Program:
    """A checked, compiled sap program; call any of its functions."""

    def __init__(self, native: _native.Program) -> None:
        self._native = native

    @property
    def functions(self) -> list[str]:
        """The names of the functions that can be called."""
        return self._native.function_names()

    def signature(self, name: str) -> dict[str, Any]:
        """`name`'s parameters (JSON Schemas by name) and its result's schema."""
        return self._native.signature(name)

    def call(self, name: str, /, **arguments: Any) -> Any:
        """Calls `name` with keyword arguments; its result as JSON-like values (dicts,
        lists, strings, numbers, booleans, None). A `Context` parameter gets the
        `saplang.Context` passed for it, or a new one."""
        return self.call_with(name, arguments)

    def call_with(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """`call`, with the arguments as a mapping."""
        given, context = _split(arguments)
        return self._native.call_json(name, given, context)

    async def acall(self, name: str, /, **arguments: Any) -> Any:
        """`call` without blocking the event loop: the call runs on one of the program's
        threads, so many run at once."""
        return await self.acall_with(name, arguments)

    async def acall_with(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """`acall`, with the arguments as a mapping."""
        given, context = _split(arguments)
        pending = self._native.submit(name, given, context)
        try:
            return await asyncio.get_running_loop().run_in_executor(_waiters, pending.wait)
        except asyncio.CancelledError:
            # The task awaiting the call was cancelled: so is the call.
            pending.cancel()
            raise

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._native.function_names():
            raise AttributeError(name)

        def call(**arguments: Any) -> Any:
            return self.call_with(name, arguments)

        call.__name__ = name
        return call


def _call_extern(function: Callable[..., Any], arguments: tuple[Any, ...]) -> Any:
    """Calls a Python function serving an `extern fn` (awaiting it if it is async) and
    gives its result as sap takes it."""
    result = function(*arguments)
    if inspect.isawaitable(result):
        awaitable = result

        async def wait() -> Any:
            return await awaitable

        result = asyncio.run(wait())
    return _to_json(result)


def load(
    path: str | Path,
    *,
    externs: Mapping[str, Callable[..., Any]] | None = None,
    **options: Any,
) -> Program:
    """Checks and compiles the program at `path`. `externs` serves the program's `extern
    fn` declarations with Python functions (sync or async) by name: they get the
    arguments as Python values and their result is read as the declared type. The other
    keywords are `sapc run`'s options:
    provider, model, base_url, structured, stream, temperature, seed, replay, record,
    trace, journal, journal_policy, otlp, max_calls, max_tokens, max_time, max_depth,
    max_iterations, max_model_iterations, context_tokens, concurrency, allow_read,
    allow_write, allow_net, allow_run.
    Unset ones come from `sap.toml` beside the program and the environment, as for
    `sapc run` (by default the transcript beside the program answers)."""
    return Program(_native.load(str(path), options, dict(externs or {})))


def python_types(path: str | Path) -> str:
    """The program's types and functions as a typed Python module, as `sapc gen python`
    writes it."""
    return _native.python_types(str(path))


_adapters: dict[Any, TypeAdapter[Any]] = {}


def validate(annotation: Any, value: Any) -> Any:
    """`value` (as `call` returns it) validated as `annotation`: the generated models'
    way of giving typed results."""
    key = annotation if isinstance(annotation, type) else repr(annotation)
    adapter = _adapters.get(key)
    if adapter is None:
        adapter = _adapters[key] = TypeAdapter(annotation)
    return adapter.validate_python(value)
