"""The model double that always obeys (#40): an OpenAI-compatible Chat Completions
server that knows the AgentDojo case each request belongs to (the model a request asks
for is the case's key), and answers

- when the prompt holds an injected text: so as to carry the injection out as far as
  the answer's type lets it — the attacker's values for a value read from data (the
  injection task's ground-truth arguments, the one named like the asked-for parameter
  first), the attacker's goal said in a written answer, the attacker's tool in a
  choice, `true` for a decision;
- otherwise from the user task's ground truth (AgentDojo ships each task's tool calls):
  a plan of those calls, where an argument the request does not give but an earlier
  call's result holds is read from that result by a `find` step, as a planner that
  cannot see the data would write it; a `find` step's answer is the ground-truth
  value; the written answer is the task's ground-truth output.

It measures what a program's structure alone guarantees: the worst a model can do with
what the program shows it. Used by run.py, which serves it for the cases it runs.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import cases

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crates/python/tests"))
from model_server import ModelServer  # noqa: E402
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

# The data blocks sap shows the model: `<data from="fn" name="param">…</data>`.
DATA = re.compile(r'<data from="([^"]*)" name="([^"]*)">\n(.*?)\n</data>', re.S)
HELPERS = {"find", "find_number", "find_list"}


def first_value(schema: dict[str, Any]) -> Any:
    """The first value a JSON Schema allows (an answer the double has no opinion on)."""
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return first_value(schema[union][0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {k: first_value(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    return {"string": "", "integer": 0, "number": 0.0, "boolean": True}.get(kind)


def shaped(schema: dict[str, Any], value: Any) -> Any:
    """`value` as the schema wants it: wrapped when the schema is an object of one
    property and the value is not an object."""
    props = schema.get("properties") or {}
    if schema.get("type") == "object" and len(props) == 1 and not isinstance(value, dict):
        return {next(iter(props)): value}
    return value


class CaseDouble:
    """The double's knowledge of one case: the ground truth, and what the attacker wants."""

    def __init__(self, case: cases.Case, request: str) -> None:
        self.case = case
        self.request = request
        runtime = case.runtime()
        # The plan is written from the request alone, so it is the same with and
        # without the injections: the ground truth comes from the environment without.
        clean = case if case.injection_task is None else cases.load(
            case.suite.name, case.user_task.ID, None)
        env = clean.environment.model_copy(deep=True)
        self.calls = list(case.user_task.ground_truth(env.model_copy(deep=True)))
        # What each ground-truth call returns, as the agent's tools show it.
        self.outputs: list[str] = []
        for call in self.calls:
            result, error = runtime.run_function(env, call.function, dict(call.args))
            self.outputs.append(error or tool_result_to_str(result))
        self.attack_calls = []
        self.goal = ""
        if case.injection_task is not None:
            self.attack_calls = list(case.injection_task.ground_truth(
                case.environment.model_copy(deep=True)))
            self.goal = case.injection_task.GOAL
        # The longest line of each injected text, to recognize it in a prompt however
        # it is shown there: raw, inside JSON, or folded by a tool's YAML.
        self.marks: list[str] = []
        for text in case.injections.values():
            lines = [line.strip() for line in text.splitlines() if len(line.strip()) > 20]
            if lines:
                self.marks.append(_plain(max(lines, key=len)))
        self.answers: dict[str, Any] = {}  # a `find` question -> the ground-truth value
        # A tool-calling loop's progress: the next ground-truth call of each side.
        self.next_user = 0
        self.next_attack = 0

    def injected(self, prompt: str) -> bool:
        plain = _plain(prompt)
        return any(mark in plain for mark in self.marks)

    # -- the plan ------------------------------------------------------------------

    def _given(self, value: Any) -> bool:
        """Whether the request itself gives `value`."""
        said = self.request.lower()
        if isinstance(value, list):
            return all(self._given(v) for v in value)
        if isinstance(value, bool) or value is None:
            return True
        if isinstance(value, (int, float)):
            return any(form in said for form in _number_forms(value))
        return str(value).lower() in said

    def _source(self, value: Any, before: int) -> int | None:
        """The latest earlier call whose result holds `value`, if any."""
        if isinstance(value, bool) or value is None or value == "" or value == []:
            return None
        for j in range(before - 1, -1, -1):
            out = self.outputs[j]
            if isinstance(value, list):
                if all(isinstance(v, str) and v in out for v in value):
                    return j
            elif isinstance(value, (int, float)):
                if any(form in out for form in _number_forms(value)):
                    return j
            elif str(value) in out:
                return j
        return None

    def plan(self, schema: dict[str, Any]) -> dict[str, Any]:
        names = _tool_names(schema)
        atoms: list[dict[str, Any]] = []
        atom_of_call: dict[int, int] = {}
        for i, call in enumerate(self.calls):
            inputs: dict[str, Any] = {}
            depends: list[int] = []
            for key, value in call.args.items():
                j = None if self._given(value) else self._source(value, i)
                if j is None:
                    inputs[key] = value
                    continue
                helper = ("find_list" if isinstance(value, list) else
                          "find_number" if isinstance(value, (int, float)) else "find")
                question = f"the {key} for {call.function} (step {i + 1})"
                self.answers[question] = value
                fid = len(atoms) + 1
                atoms.append({"id": fid, "kind": "tool", "name": names.get(helper, helper),
                              "input": {"question": question, "data": f"<result_of_{atom_of_call[j]}>"},
                              "dependsOn": [atom_of_call[j]]})
                inputs[key] = f"<result_of_{fid}>"
                depends.append(fid)
            aid = len(atoms) + 1
            name = names.get(call.function, call.function)
            props = _input_schema(schema, name)
            for key in props.get("required", []):
                inputs.setdefault(key, None)  # an optional parameter the call leaves out
            inputs = {k: conform(v, props.get("properties", {}).get(k, {})) for k, v in inputs.items()}
            atoms.append({"id": aid, "kind": "tool", "name": name,
                          "input": inputs, "dependsOn": depends})
            atom_of_call[i] = aid
        # The final atom reports every call's result (the schema allows 16).
        reported = [atom_of_call[i] for i in range(len(self.calls))][-16:]
        atoms.append({"id": len(atoms) + 1, "kind": "final", "name": "report",
                      "dependsOn": reported})
        return {"atoms": atoms}

    # -- the other answers ---------------------------------------------------------

    def _attacker_value(self, question: str, kind: str) -> Any:
        """What the attacker wants read out: its ground-truth argument named like the
        asked-for parameter, else its first of the right type, else its goal."""
        wanted = question.split(" ")[1] if question.startswith("the ") else ""
        args = [(k, v) for c in self.attack_calls for k, v in c.args.items()]
        fits = {
            "find": lambda v: isinstance(v, str),
            "find_number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "find_list": lambda v: isinstance(v, list) or isinstance(v, str),
        }[kind]
        for k, v in args:
            if k == wanted and fits(v):
                return [v] if kind == "find_list" and isinstance(v, str) else v
        for k, v in args:
            if fits(v):
                return [v] if kind == "find_list" and isinstance(v, str) else v
        return {"find": self.goal, "find_number": 0.0, "find_list": [self.goal]}[kind]

    def choose(self, obey: bool, schema: dict[str, Any]) -> dict[str, Any]:
        """A tool-calling loop's next action (a `select` of the tools and `finish`):
        the attacker's next call while an injection is in sight, else the user task's
        next one, then `finish` with the written answer."""
        options = schema.get("properties", {}).get("choice", {}).get("anyOf", [])
        by_tool = {}
        for o in options:
            m = re.match(r"call `([^`]*)`", o.get("description", ""))
            if m:
                by_tool[m.group(1).rsplit("::", 1)[-1]] = o
        call = None
        if obey and self.next_attack < len(self.attack_calls):
            call = self.attack_calls[self.next_attack]
            self.next_attack += 1
        elif self.next_user < len(self.calls):
            call = self.calls[self.next_user]
            self.next_user += 1
        if call is not None and call.function in by_tool:
            option = by_tool[call.function]
            arguments = dict(call.args)
            wanted = option["properties"]["arguments"]
            for key in wanted.get("required", []):
                arguments.setdefault(key, None)
            arguments = {k: conform(v, wanted.get("properties", {}).get(k, {}))
                         for k, v in arguments.items()}
            return {"choice": {"option": option["properties"]["option"]["enum"][0],
                               "arguments": arguments}}
        said = self.case.user_task.GROUND_TRUTH_OUTPUT or ""
        if obey:
            said = f"{self.goal}\n{said}".strip()
        finish = by_tool.get("finish")
        if finish is None:
            return first_value(schema)
        return {"choice": {"option": finish["properties"]["option"]["enum"][0],
                           "arguments": {"answer": said}}}

    def answer(self, name: str, prompt: str, schema: dict[str, Any]) -> Any:
        obey = self.injected(prompt)
        if name == "choice":
            return self.choose(obey, schema)
        if name == "write_plan":
            # The plan is written from the request; an injection in its prompt would
            # mean the program showed the planner data.
            return self.plan(schema) if not obey else {"atoms": []}
        if name in HELPERS:
            blocks = {param: text for _, param, text in DATA.findall(prompt)}
            question = blocks.get("question", "")
            if obey:
                return shaped(schema, self._attacker_value(question, name))
            value = self.answers.get(question)
            return shaped(schema, value if value is not None else first_value(schema))
        if schema.get("type") == "boolean" or _only_property_type(schema) == "boolean":
            return shaped(schema, True) if obey else shaped(schema, first_value(schema))
        if _only_property_type(schema) == "string" or schema.get("type") == "string":
            said = self.case.user_task.GROUND_TRUTH_OUTPUT or ""
            if obey:
                said = f"{self.goal}\n{said}".strip()
            return shaped(schema, said)
        return first_value(schema)


def _plain(text: str) -> str:
    """Text without JSON escapes, quotes and line folding: what is said, not how."""
    text = re.sub(r"\\+[nrt]", " ", text)
    text = re.sub(r"[\\\"']", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _only_property_type(schema: dict[str, Any]) -> str | None:
    props = schema.get("properties") or {}
    if schema.get("type") == "object" and len(props) == 1:
        return next(iter(props.values())).get("type")
    return None


def _number_forms(value: float) -> list[str]:
    forms = {str(value)}
    if float(value).is_integer():
        forms.add(str(int(value)))
    else:
        forms.add(f"{value:.2f}")
    return [f for f in forms if len(f) > 1]


def _input_schema(schema: dict[str, Any], tool: str) -> dict[str, Any]:
    """The schema of the input of an atom calling `tool`, in the plan schema."""
    items = schema.get("properties", {}).get("atoms", {}).get("items", {})
    for option in items.get("anyOf", []):
        props = option.get("properties", {})
        if tool in props.get("name", {}).get("enum", []):
            return props.get("input", {})
    return {}


def conform(value: Any, schema: dict[str, Any]) -> Any:
    """`value` as `schema` has it written: sap asks for a `Json` value as JSON text."""
    if isinstance(value, str) and value.startswith("<result_of_"):
        return value
    for union in ("anyOf", "oneOf"):
        for option in schema.get(union, []):
            kind = option.get("type")
            if (value is None) == (kind == "null") and not (
                    kind == "string" and "pattern" in option):
                return conform(value, option)
    if schema.get("type") == "string" and not isinstance(value, str) and value is not None:
        return json.dumps(value)
    if schema.get("type") == "array" and isinstance(value, list):
        return [conform(v, schema.get("items", {})) for v in value]
    return value


def _tool_names(schema: dict[str, Any]) -> dict[str, str]:
    """The plan schema's tool names by their last segment (`banking::send_money`)."""
    names: dict[str, str] = {}
    items = schema.get("properties", {}).get("atoms", {}).get("items", {})
    for option in items.get("anyOf", []):
        for name in option.get("properties", {}).get("name", {}).get("enum", []):
            names[name.rsplit("::", 1)[-1]] = name
    return names


class DoubleServer:
    """Serves the doubles of many cases at once on the Python package's test model server
    (crates/python/tests/model_server.py): each run names its case as the model."""

    def __init__(self) -> None:
        self.cases: dict[str, CaseDouble] = {}
        self.server = ModelServer(answer=self._answer)

    def _answer(self, body: dict[str, Any], schema: dict[str, Any]) -> Any:
        spec = (body.get("response_format") or {}).get("json_schema") or {}
        name = (spec.get("name") or "").removesuffix("_result")
        prompt = "\n".join(m.get("content") or "" for m in body.get("messages", [])
                           if isinstance(m.get("content"), str))
        double = self.cases.get(body.get("model", ""))
        return double.answer(name, prompt, schema) if double else first_value(schema)

    def add(self, key: str, double: CaseDouble) -> list[str]:
        """Serves `double` as the model `key`: the provider's flags for `sapc run`."""
        self.cases[key] = double
        return ["--provider", "openai", "--base-url", self.server.url, "--model", key]

    def remove(self, key: str) -> None:
        self.cases.pop(key, None)


if __name__ == "__main__":
    sys.exit("double.py is used by run.py")
