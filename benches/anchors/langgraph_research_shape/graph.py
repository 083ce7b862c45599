"""The research planner's shape in LangGraph, for `langgraph dev`: no model, deterministic.

The same 14 supersteps and 20 node executions as `planwright serve`'s `research` assistant on
`input.json` (the `replan` goal of fixtures/research/goals.json, offline model):
prepare_input, create_plan, validate_plan, review_plan, select_next_step, execute_step x4 (Send),
assess_progress, replan, validate_plan, review_plan, select_next_step, execute_step x3 (Send),
assess_progress, synthesize_report. The output is ~15 KB of JSON like serve's.
"""

from typing import Annotated, Any
from typing_extensions import TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.types import Send

SENTENCE = ("Token pricing for the generation model was the largest running cost of the support "
            "assistant, about 70 percent of monthly spend.")


def merge(left: dict | None, right: dict | None) -> dict:
    out = dict(left or {})
    out.update(right or {})
    return out


def concat(left: list | None, right: list | None) -> list:
    return (left or []) + (right or [])


class State(TypedDict, total=False):
    input: str
    constraints: dict
    goal: str
    plan: list
    plan_errors: list
    step_results: Annotated[dict, merge]
    evidence: Annotated[list, concat]
    execution_history: Annotated[list, concat]
    knowledge_gaps: list
    replan_count: int
    final_report: str
    status: str
    errors: list
    blocked_reason: Any
    usage: dict


def history(node: str, detail: str) -> dict:
    return {"node": node, "detail": detail, "ok": True}


def step(i: int, section: str) -> dict:
    return {"id": f"step_{i}", "description": f"Find notes on {section} for customer support retrieval-augmented generation",
            "depends_on": [], "acceptance_criteria": [{"min_sources": 2}, {"covers": [section]}],
            "query": f"{section} retrieval-augmented generation support", "section": section}


def prepare_input(s: State) -> dict:
    return {"goal": s["input"], "replan_count": 0, "errors": [], "knowledge_gaps": [], "blocked_reason": None,
            "usage": {"calls": [], "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "execution_history": [history("prepare_input", f"goal: {s['input']}; 43 source notes; max_steps 6")]}


def create_plan(s: State) -> dict:
    plan = [step(i + 1, sec) for i, sec in enumerate(["cost", "staffing", "risks", "adoption"])]
    return {"plan": plan, "execution_history": [history("create_plan", "4 steps")]}


def validate_plan(s: State) -> dict:
    return {"plan_errors": [], "execution_history": [history("validate_plan", f"{len(s['plan'])} steps valid")]}


def review_plan(s: State) -> dict:
    return {"execution_history": [history("review_plan", "approved without review")]}


def select_next_step(s: State) -> dict:
    return {"execution_history": [history("select_next_step", "ready steps")]}


def ready(s: State) -> list:
    done = s.get("step_results") or {}
    return [Send("execute_step", {"step": st}) for st in s["plan"] if st["id"] not in done]


def execute_step(p: dict) -> dict:
    st = p["step"]
    findings = [{"note_id": f"rag-0{k}", "sentence": SENTENCE, "score": 0.8 - k / 10} for k in range(5)]
    return {"step_results": {st["id"]: {"status": "done", "findings": findings, "section": st["section"],
                                        "started_ms": 0, "ended_ms": 1}},
            "evidence": [{"source_id": f["note_id"], "summary": "Pricing: " + f["sentence"]} for f in findings[:1]],
            "execution_history": [history("execute_step", f"{st['id']}: 5 findings")]}


def assess_progress(s: State) -> dict:
    return {"execution_history": [history("assess_progress", f"{len(s['step_results'])} steps done")]}


def after_assess(s: State) -> str:
    if s.get("replan_count", 0) == 0:
        return "replan"
    if len(s["step_results"]) < len(s["plan"]):
        return "select_next_step"
    return "synthesize_report"


def replan(s: State) -> dict:
    plan = s["plan"] + [step(i + 5, sec) for i, sec in enumerate(["staffing changes", "training", "metrics"])]
    return {"plan": plan, "replan_count": s.get("replan_count", 0) + 1,
            "execution_history": [history("replan", "3 steps added for staffing")]}


def synthesize_report(s: State) -> dict:
    sections = "\n\n".join(f"## {st['section'].title()}\n\n{SENTENCE} {SENTENCE}" for st in s["plan"])
    return {"final_report": f"# Research brief: {s['goal']}\n\n{sections}", "status": "ok",
            "execution_history": [history("synthesize_report", "report written")]}


g = StateGraph(State)
for fn in [prepare_input, create_plan, validate_plan, review_plan, select_next_step, execute_step,
           assess_progress, replan, synthesize_report]:
    g.add_node(fn.__name__, fn)
g.add_edge(START, "prepare_input")
g.add_edge("prepare_input", "create_plan")
g.add_edge("create_plan", "validate_plan")
g.add_edge("validate_plan", "review_plan")
g.add_edge("review_plan", "select_next_step")
g.add_conditional_edges("select_next_step", ready, ["execute_step"])
g.add_edge("execute_step", "assess_progress")
g.add_conditional_edges("assess_progress", after_assess, ["replan", "select_next_step", "synthesize_report"])
g.add_edge("replan", "validate_plan")
g.add_edge("synthesize_report", END)
graph = g.compile()
