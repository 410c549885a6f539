"""The engine's joints (CONTRIBUTING.md, "The grading engine"): which module may import which.

The graph counts every import of a `utils` module, at the top of a file or inside a function, so a late import
cannot hide a cycle. The learner's side of the boundary (the worker, and what it imports) never imports the
grader's side: the two meet only in `utils.engine.protocol`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from utils import notebooks as nbs

UTILS = nbs.ROOT / "utils"
#: The three audiences of utils/ (CONTRIBUTING.md, "Where code lives"): what the learner's notebooks import, the
#: grading engine, and notebook 08's translator; the rest are the maintainers' and instructors' tools.
LEARNER = {"grading", "blocks", "viz", "diagnose", "failures", "substitute", "attention_variants", "course", "i18n",
           "notebooks", "colab", "results", "visible", "speech", "progress"}
#: Modules that run in the grader's process only; nothing on the learner's side may import them.
GRADER_SIDE = {"engine.remote", "engine.checking", "engine.autograde", "engine.sandbox", "cli", "bench", "release",
               "sanitize", "submissions", "formgrader_csp", "docs", "bootstrap", "visible_make", "figures", "site",
               "lms", "report"}


def module_name(path: Path) -> str:
    """A file's module under utils/, dotted: "grading", "engine.sandbox", "translator" (its __init__)."""
    parts = list(path.relative_to(UTILS).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(UTILS.rglob("*.py")) if module_name(p)}


def imports_of(path: Path) -> set[str]:
    """The `utils` modules that the file at `path` imports, anywhere in it (relative or absolute)."""
    known = modules()
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                stem = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "utils":
                stem = node.module.split(".")[1:]
            else:
                continue
            candidates = [".".join([*stem, alias.name]) for alias in node.names] + [".".join(stem)]
            found.update(c for c in candidates if c in known)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("utils.") for a in node.names if a.name.removeprefix("utils.") in known)
    return found - {name, ""}


def graph() -> dict[str, set[str]]:
    return {name: imports_of(path) for name, path in modules().items()}


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
    assert "engine.protocol" in edges["engine.remote"], "the graph is read from the files"
    assert "engine.protocol" in edges["engine.worker"] and "corpus" not in edges["translator"]
    cycle = find_cycle(edges)
    assert cycle is None, "an import cycle in utils/: " + " -> ".join(cycle)


@pytest.mark.parametrize("learner_side", ["engine.worker", "engine.protocol", "translator", *sorted(LEARNER)])
def test_the_learner_side_imports_nothing_of_the_graders(learner_side):
    """The worker runs the learner's code; grading, blocks, viz and the translator are what notebooks import."""
    reached = closure(graph(), learner_side) | {learner_side}
    assert not reached & GRADER_SIDE, f"utils.{learner_side} reaches {sorted(reached & GRADER_SIDE)}"


def test_every_module_has_one_audience():
    """utils/ is split by audience: the learner's package, engine/, translator/, and the tools."""
    tools = GRADER_SIDE - {m for m in GRADER_SIDE if m.startswith("engine.")}
    for name in modules():
        top = name.split(".")[0]
        assert top in LEARNER | {"engine", "translator"} | tools, f"utils.{name}: which audience? (test_architecture)"


def test_levels_of_the_import_graph():
    """The graph's depth (the review counted 8 levels for 18 files, with a cycle): printed for the record."""
    edges = graph()
    level: dict[str, int] = {}

    def depth(node: str) -> int:
        if node not in level:
            level[node] = 1 + max((depth(n) for n in edges[node]), default=0)
        return level[node]

    deepest = max(depth(n) for n in edges)
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {deepest} levels")
    assert deepest <= 7, {n: d for n, d in sorted(level.items(), key=lambda kv: -kv[1])}


def _imports_in_a_fresh_process(code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", code], cwd=UTILS.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_command_line_is_built_without_torch():
    """`attn check` starts its zygote (which imports torch) before it imports torch itself, so that the two imports
    overlap: building the command line (the translator's commands included) must not import torch."""
    _imports_in_a_fresh_process(
        "import sys, utils.cli\nutils.cli.build_parser()\n"
        "assert 'torch' not in sys.modules, 'building the command line imported torch'\n"
        "import utils.translator\nassert 'torch' not in sys.modules\n"
        "from utils.translator import Translator\nassert 'torch' in sys.modules and Translator.__name__ == 'Translator'")


#: Code for a fresh process that has validated a notebook `nb`: the same notebook made invalid must be refused.
STILL_REFUSES_AN_INVALID_NOTEBOOK = (
    "nb.cells[0]['cell_type'] = 'nonsense'\n"
    "try:\n    nbformat.validate(nb)\nexcept nbformat.ValidationError:\n    pass\n"
    "else:\n    raise AssertionError('an invalid notebook passed')")


def test_the_course_goes_without_jsonschemas_iri_parser_and_still_validates_notebooks():
    """utils/__init__.py keeps jsonschema from building its RFC 3987 parser (a second per process); notebooks are
    validated as before (an invalid one is still refused)."""
    _imports_in_a_fresh_process(
        "import sys, utils.notebooks as nbs, nbformat, jsonschema\n"
        "assert sys.modules.get('rfc3987_syntax') is None\n"
        "nb = nbs.read(nbs.solution_path(nbs.assignments()[0]))\nnbformat.validate(nb)\n"
        + STILL_REFUSES_AN_INVALID_NOTEBOOK)


def test_in_the_course_environment_jupyters_own_processes_go_without_the_iri_parser_too():
    """utils/bootstrap.py writes a startup line (a .pth file) into the virtual environment it installs into, so that
    processes that never import `utils` (JupyterLab, nbgrader, a kernel) skip the parser as well, and still validate."""
    from utils import bootstrap

    path = bootstrap.write_startup()  # what `make install` wrote; written again, so this holds in any virtual env
    if path is None:
        pytest.skip("not a virtual environment: the bootstrap changes nothing for other programs there")
    assert Path(path).read_text().splitlines()[1] == bootstrap.STARTUP_LINE.strip()
    proc = subprocess.run([sys.executable, "-c",
                           "import sys, nbformat, jupyter_events.validators, nbgrader.apps\n"
                           "assert 'utils' not in sys.modules\n"
                           "assert sys.modules.get('rfc3987_syntax') is None, 'the IRI parser was built'\n"
                           "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')])\n"
                           "nbformat.validate(nb)\n" + STILL_REFUSES_AN_INVALID_NOTEBOOK],
                          cwd="/", capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
