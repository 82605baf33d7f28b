"""The types and functions of examples/code_analysis.sap, for Python.

Written by `sapc gen python`; do not edit: generate it again when the program changes.
"""

from __future__ import annotations

import enum
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

import saplang

PROGRAM = "examples/code_analysis.sap"


class Severity(str, enum.Enum):
    Low = "Low"
    Medium = "Medium"
    High = "High"


class Analysis(BaseModel):
    """What the model found in the code."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    bugs: list[str] = Field(description="One sentence per bug found.")
    severity: Severity = Field(description="How bad the worst bug is.")


class Program:
    """The program's functions, typed: each returns the model of its result."""

    def __init__(self, native: saplang.Program) -> None:
        self.native = native

    def analyze_code(self, code: str, *, ctx: saplang.Context | None = None) -> Analysis:
        arguments: dict[str, Any] = {"code": code}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: Analysis = saplang.validate(Analysis, self.native.call_with("analyze_code", arguments))
        return result

    async def analyze_code_async(self, code: str, *, ctx: saplang.Context | None = None) -> Analysis:
        arguments: dict[str, Any] = {"code": code}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: Analysis = saplang.validate(Analysis, await self.native.acall_with("analyze_code", arguments))
        return result

    def suggest_fix(self, analysis: Analysis, *, ctx: saplang.Context | None = None) -> str:
        arguments: dict[str, Any] = {"analysis": analysis}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: str = saplang.validate(str, self.native.call_with("suggest_fix", arguments))
        return result

    async def suggest_fix_async(self, analysis: Analysis, *, ctx: saplang.Context | None = None) -> str:
        arguments: dict[str, Any] = {"analysis": analysis}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: str = saplang.validate(str, await self.native.acall_with("suggest_fix", arguments))
        return result

    def main(self, *, ctx: saplang.Context | None = None) -> None:
        arguments: dict[str, Any] = {}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: None = saplang.validate(None, self.native.call_with("main", arguments))
        return result

    async def main_async(self, *, ctx: saplang.Context | None = None) -> None:
        arguments: dict[str, Any] = {}
        if ctx is not None:
            arguments["ctx"] = ctx
        result: None = saplang.validate(None, await self.native.acall_with("main", arguments))
        return result


def load(path: str = PROGRAM, **options: Any) -> Program:
    """Checks and compiles the program (options as `saplang.load`'s) and returns its typed functions."""
    return Program(saplang.load(path, **options))
