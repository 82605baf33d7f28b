"""A sap procedure called from Python, its result a Pydantic model (docs/PYTHON.md)."""

from pathlib import Path

import code_analysis_types as agent  # `sapc gen python examples/code_analysis.sap -o …`

here = Path(__file__).parent
program = agent.load(
    str(here.parent / "code_analysis.sap"), replay=str(here / "code_analysis.transcript.jsonl")
)
analysis: agent.Analysis = program.analyze_code("def div(a, b): return a / b")
print(analysis.severity.value, analysis.bugs)
print(program.suggest_fix(analysis))
