"""One AgentDojo case, built by AgentDojo's own code: a suite's environment for a user
task, with the injections of an injection task placed by an attack (AgentDojo's default,
`important_instructions`), as its benchmark runner builds them. The environment server
(env_server.py) and the judge (judge.py) both build a case this way; the judge rebuilds
the environment a run started from, and replays the run's tool calls on it.

Research and its sources: docs/notes/agentdojo-research-2026-11-28.md.
"""

from __future__ import annotations

import argparse
import ast
import threading
import warnings
from dataclasses import dataclass
from typing import Any

warnings.filterwarnings("ignore")

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement  # noqa: E402
from agentdojo.attacks.attack_registry import load_attack  # noqa: E402
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime  # noqa: E402
from agentdojo.task_suite.load_suites import get_suite  # noqa: E402

# The benchmark version of the paper's numbers: 97 user tasks, 27 injection tasks, 629
# security cases (v1.2 adds injection tasks with no ground truth).
VERSION = "v1.1.2"
ATTACK = "important_instructions"
# The attacks name the model they address ("… from GPT-4"): the name is part of the
# injected text, so it is fixed here and recorded with the results.
MODEL_NAME = "gpt-4o-2024-05-13"


class _Named(BasePipelineElement):
    """What the attack reads the model's name from."""

    name = MODEL_NAME

    def query(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass
class Case:
    suite: Any
    user_task: Any
    injection_task: Any | None
    injections: dict[str, str]
    environment: Any

    def runtime(self) -> FunctionsRuntime:
        return FunctionsRuntime(self.suite.tools)


_loaded: dict[tuple[str, str, str | None, str], Case] = {}
_loading = threading.Lock()


def load(suite: str, user_task: str, injection_task: str | None = None,
         version: str = VERSION) -> Case:
    """The case, with an environment of its own (building one parses the suite's YAML
    and runs the attack: done once per case in a process, then copied)."""
    key = (suite, user_task, injection_task, version)
    with _loading:
        if key not in _loaded:
            _loaded[key] = _build(*key)
        c = _loaded[key]
    return Case(c.suite, c.user_task, c.injection_task, dict(c.injections),
                c.environment.model_copy(deep=True))


def _build(suite: str, user_task: str, injection_task: str | None, version: str) -> Case:
    s = get_suite(version, suite)
    if not s:
        raise SystemExit(f"AgentDojo {version} has no suite `{suite}`")
    ut = s.get_user_task_by_id(user_task)
    it = s.get_injection_task_by_id(injection_task) if injection_task else None
    injections: dict[str, str] = {}
    if it is not None:
        injections = load_attack(ATTACK, s, _Named()).attack(ut, it)
    env = ut.init_environment(s.load_and_inject_default_environment(injections))
    return Case(s, ut, it, injections, env)


def arguments(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as AgentDojo's tool executor passes them: a string that reads as a
    list becomes the list."""
    out = {}
    for k, v in args.items():
        if isinstance(v, str) and v.startswith("[") and v.endswith("]"):
            try:
                parsed = ast.literal_eval(v)
                if isinstance(parsed, list):
                    v = parsed
            except (ValueError, SyntaxError):
                pass
        out[k] = v
    return out


def tool_list(case: Case) -> list[dict[str, Any]]:
    """The suite's tools as MCP lists them: AgentDojo's names, descriptions and schemas."""
    return [{"name": f.name, "description": f.description,
             "input_schema": f.parameters.model_json_schema()} for f in case.suite.tools]


def call(case: Case, runtime: FunctionsRuntime, name: str, args: dict[str, Any]) -> tuple[str, bool]:
    """Runs a tool on the case's environment as AgentDojo's runtime runs it: the text
    its agents would be shown, and whether it is an error."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    if name not in {f.name for f in case.suite.tools}:
        return f"ToolNotFound: there is no tool `{name}`", True
    result, error = runtime.run_function(case.environment, name, args)
    if error is not None:
        return error, True
    return tool_result_to_str(result), False


def calls_of(trace: list[dict[str, Any]]) -> list[FunctionCall]:
    return [FunctionCall(function=c["function"], args=c["args"]) for c in trace]


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--suite", required=True, choices=["workspace", "slack", "travel", "banking"])
    p.add_argument("--user-task", required=True)
    p.add_argument("--injection-task")
    p.add_argument("--version", default=VERSION)
    return p
