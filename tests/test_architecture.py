"""The engine's joints (CONTRIBUTING.md, "The grading engine"): which module may import which.

The graph counts every import of a `utils` module, at the top of a file or inside a function, so a late import
cannot hide a cycle. The learner's side of the boundary (the worker, and what it imports) never imports the
grader's side: the two meet only in `utils.protocol`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from utils import notebooks as nbs

UTILS = nbs.ROOT / "utils"
#: Modules that run in the grader's process only; nothing on the learner's side may import them.
GRADER_SIDE = {"remote", "checking", "autograde", "sandbox", "cli", "bench", "release", "sanitize", "submissions"}


def imports_of(path: Path) -> set[str]:
    """The `utils` modules that the file at `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.split(".")[0] == "utils":
                parts = node.module.split(".")
                found.update([parts[1]] if len(parts) > 1 else [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("utils."))
    modules = {p.stem for p in UTILS.glob("*.py")}
    return (found & modules) - {path.stem}


def graph() -> dict[str, set[str]]:
    return {p.stem: imports_of(p) for p in sorted(UTILS.glob("*.py")) if p.stem != "__init__"}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path (a, b, ..., a), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def closure(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_utils_has_no_import_cycle():
    edges = graph()
    assert "remote" in edges and "protocol" in edges["remote"], "the graph is read from the files"
    cycle = find_cycle(edges)
    assert cycle is None, "an import cycle in utils/: " + " -> ".join(cycle)


@pytest.mark.parametrize("learner_side", ["worker", "grading", "blocks", "viz", "protocol"])
def test_the_learner_side_imports_nothing_of_the_graders(learner_side):
    """The worker runs the learner's code; grading, blocks and viz are what the learner's notebooks import."""
    reached = closure(graph(), learner_side)
    assert not reached & GRADER_SIDE, f"utils.{learner_side} reaches {sorted(reached & GRADER_SIDE)}"
