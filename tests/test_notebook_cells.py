"""No cell can break a learner's notebook, and no stored output depends on the CPU that ran it (issue 33).

Read from the notebooks' cells, without running them (milliseconds):

- a test cell binds only `check` and names of its own (a leading underscore) that no other kind of cell binds or
  reads, so it cannot rebind what a learner's code or a later demo uses (04's test cell once replaced the recap's
  `attention(q, k, v, mask=None)` with a 3-argument function: a correct module scored 1.2 / 6 and Run All stopped);
- no section rebinds a name that an earlier section reads from the sections before it, so going back to a section
  after running the next one works (04's section 9 once rebound section 8's `W`, `w1` and `w2`);
- no output that nbval compares shows a float below float32's noise (01 stored "3.7e-09" where another CPU prints
  "0.0e+00"), and no stored solution output shows a demo that stopped.

`utils.grading.requires`, in this process: a demo whose exercise is unfinished or wrong prints one line, draws nothing
and lets Run All go on. Running the notebooks (blank, with wrong answers, sections again out of order) is
`tests/test_notebook_runs.py`.
"""

from __future__ import annotations

import ast
import builtins
import json
import re

import nbformat
import pytest
import torch

from utils import notebooks as nbs
from utils.blocks import is_going_further

from .conftest import ASSIGNMENTS
from .notebook_runs import EMPTY_FIGURE, STOPPED, UNFINISHED, sections


@pytest.fixture(params=ASSIGNMENTS)
def solution(request):
    return request.param, nbs.read(nbs.solution_path(request.param))


# -- what a cell binds and reads, scope by scope ----------------------------------------------------------------
_IGNORED = set(dir(builtins)) | {"get_ipython", "display", "__name__"}


class _Names(ast.NodeVisitor):
    """The global names a cell binds, and those it reads before binding them (in the order Python runs it); a
    function's reads of globals count where it is defined (it reads them when called)."""

    def __init__(self, bound: set[str]) -> None:
        self.bound = bound  # bound so far: the section's earlier cells, then this cell's earlier statements
        self.binds: set[str] = set()
        self.imports: set[str] = set()  # bound by `import x`: rebinding a module to itself changes nothing
        self.reads: set[str] = set()
        self.scopes: list[set[str]] = []

    def _local(self, name: str) -> bool:
        return any(name in scope for scope in self.scopes)

    def _bind(self, name: str) -> None:
        if not self.scopes:
            self.binds.add(name)
            self.bound.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            if not self._local(node.id) and node.id not in self.bound and node.id not in _IGNORED:
                self.reads.add(node.id)
        else:
            self._bind(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.visit_Name(ast.Name(node.target.id, ast.Load()))
        self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value:
            self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for statement in node.body + node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            name = (alias.asname or alias.name).split(".")[0]
            if not self.scopes:
                self.imports.add(name)
            self._bind(name)

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type:
            self.visit(node.type)
        if node.name:
            self._bind(node.name)
        for statement in node.body:
            self.visit(statement)

    def _scope(self, args: ast.arguments | None, body: list[ast.AST]) -> None:
        local: set[str] = set()
        if args is not None:
            local |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    local.add(node.id)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    local.add(node.name)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    local |= {(a.asname or a.name).split(".")[0] for a in node.names}
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    local.add(node.name)
                elif isinstance(node, ast.arg):
                    local.add(node.arg)
        local -= {g for s in body for n in ast.walk(s) if isinstance(n, ast.Global) for g in n.names}
        self.scopes.append(local)
        for statement in body:
            self.visit(statement)
        self.scopes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expr in [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(expr)
        self._scope(node.args, node.body)
        self._bind(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in node.args.defaults:
            self.visit(expr)
        self._scope(node.args, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.bases, *node.decorator_list, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self._scope(None, node.body)
        self._bind(node.name)

    def _comprehension(self, node: ast.AST, parts: list[ast.AST]) -> None:
        generators = node.generators
        self.visit(generators[0].iter)
        self.scopes.append({n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)})
        for i, generator in enumerate(generators):
            if i:
                self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for part in parts:
            self.visit(part)
        self.scopes.pop()

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])


def names(source: str, bound: set[str] | None = None) -> _Names:
    """What `source` (a code cell) binds and reads; `bound`: what is already bound before it (grows)."""
    code = "\n".join("" if re.match(r"\s*[%!]", line) else line for line in source.splitlines())
    visitor = _Names(set() if bound is None else bound)
    visitor.visit(ast.parse(code))
    return visitor


def _grade_id(cell) -> str:
    return nbs.nbgrader_meta(cell).get("grade_id", "?")


# -- a test cell binds nothing another cell uses -----------------------------------------------------------------
def binding_problems(nb) -> list[str]:
    """What is wrong with the names the test cells of `nb` bind (empty: nothing)."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    others = [c for c in code if not nbs.is_test_cell(c)]
    used = {}  # name -> a non-test cell that binds or reads it
    for cell in others:
        found = names(cell.source)
        for name in found.binds | found.reads:
            used.setdefault(name, _grade_id(cell))
    problems = []
    for at, cell in enumerate(code):
        if not nbs.is_test_cell(cell):
            continue
        bound = names(cell.source).binds - {"check", "_"}  # `_`: a throwaway that IPython rebinds after every output
        earlier = set().union(*(names(c.source).binds for c in code[:at] if not nbs.is_test_cell(c)))
        for name in sorted(bound):
            if name in earlier:
                problems.append(f"{_grade_id(cell)} rebinds `{name}`, which an earlier cell bound")
            elif name in used:
                problems.append(f"{_grade_id(cell)} binds `{name}`, which cell {used[name]} uses")
            elif not name.startswith("_"):
                problems.append(f"{_grade_id(cell)} binds `{name}`: give it a name of its own (`_{name}`), so that "
                                f"no cell of the learner's can meet it")
    for cell in others:
        if "check" in names(cell.source).binds | names(cell.source).reads:
            problems.append(f"{_grade_id(cell)} uses `check`, the name every test cell binds to its Checker")
    return problems


@pytest.mark.parametrize("copy", ["solution", "student"])
def test_a_test_cell_binds_only_check_and_names_no_other_cell_uses(solution, copy):
    assignment, nb = solution
    if copy == "student":
        nb = nbs.read(nbs.release_path(assignment))
    problems = binding_problems(nb)
    assert not problems, f"{assignment} ({copy}):\n" + "\n".join(problems)


def test_the_binding_check_finds_04s_old_test_cell():
    """The check above fails on what 04's test cell once did: `def attention(q, k, v)` over the recap's."""
    nb = nbs.read(nbs.solution_path("04_multi_head_attention"))
    cell = next(c for c in nb.cells if _grade_id(c) == "test_MultiHeadAttention")
    cell.source = cell.source.replace("def _attention_reference(", "def attention(").replace(
        "_attention_reference(", "attention(")
    problems = binding_problems(nb)
    assert any("rebinds `attention`" in p for p in problems), problems


# -- going back a section ----------------------------------------------------------------------------------------
def section_rebindings(nb) -> list[str]:
    """Names a section reads from the sections before it that a later section binds again: running that section
    again after the later one reads the later value (04's §8 read §9's `W`, a tensor, where it wanted §2's dict)."""
    parts = sections(nb)
    reads, binds, imports = [], [], []
    for indices in parts:
        bound: set[str] = set()
        read, bind, imported = {}, {}, set()
        for index in indices:
            cell = nb.cells[index]
            if nbs.is_answer_cell(cell):  # the learner's: only the exercise's name is the course's to know
                bound.add(_grade_id(cell))
                bind.setdefault(_grade_id(cell), _grade_id(cell))
                continue
            found = names(cell.source, bound)
            for name in found.reads:
                read.setdefault(name, _grade_id(cell))
            for name in found.binds:
                bind.setdefault(name, _grade_id(cell))
            imported |= found.imports
        reads.append(read)
        binds.append(bind)
        imports.append(imported)
    problems = []
    for s, read in enumerate(reads):
        before = set().union(*(set(b) for b in binds[:s]))
        for t in range(s + 1, len(parts)):
            for name in sorted(set(read) & set(binds[t]) & before):
                if name in imports[t] and all(name in imports[r] for r in range(s) if name in binds[r]):
                    continue  # `import time` again: the same module
                problems.append(f"section {s} ({read[name]}) reads `{name}` from an earlier section, and section "
                                f"{t} binds it again ({binds[t][name]})")
    return problems


def test_no_section_rebinds_a_name_an_earlier_section_reads(solution):
    assignment, nb = solution
    problems = section_rebindings(nb)
    assert not problems, f"{assignment}:\n" + "\n".join(problems)


def test_the_section_check_finds_04s_old_section_9():
    nb = nbs.read(nbs.solution_path("04_multi_head_attention"))
    cell = next(c for c in nb.cells if _grade_id(c) == "jobs_mix")
    cell.source = cell.source.replace("W_now", "W")
    problems = section_rebindings(nb)
    assert any("reads `W`" in p and "jobs_mix" in p for p in problems), problems


# -- optional "going further" cells ------------------------------------------------------------------------------
def going_further(cell) -> bool:
    return cell.cell_type == "code" and is_going_further(cell.source)


def skipped_names_read(nb) -> list[str]:
    """Names that a core cell reads and that only a `# going further` cell binds: with `skip_going_further(True)`,
    Run All would stop there with a NameError."""
    bound: set[str] = set()
    optional: dict[str, str] = {}  # name -> the optional cell that binds it (and no core cell binds it before)
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if nbs.is_answer_cell(cell):
            bound.add(_grade_id(cell))
            optional.pop(_grade_id(cell), None)
            continue
        found = names(cell.source, bound - (set() if going_further(cell) else set(optional)))
        if going_further(cell):
            optional.update({name: _grade_id(cell) for name in found.binds if name not in bound})
        else:
            problems += [f"{_grade_id(cell)} reads `{name}`, which only the optional cell {optional[name]} binds"
                         for name in sorted(found.reads & set(optional))]
            for name in found.binds:
                optional.pop(name, None)
        bound |= found.binds
    return problems


def test_skipping_the_going_further_cells_leaves_the_core_whole(solution):
    """`skip_going_further(True)` in the setup cell makes Run All skip every cell marked `# going further`; no other
    cell may need what they define."""
    assignment, nb = solution
    problems = skipped_names_read(nb)
    assert not problems, f"{assignment}:\n" + "\n".join(problems)


def test_the_going_further_check_finds_a_core_cell_that_needs_an_optional_one():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("# going further: half precision\nhalf = torch.randn(3).half()"),
        nbformat.v4.new_code_cell("print(half.dtype)")])
    problems = skipped_names_read(nb)
    assert len(problems) == 1 and "reads `half`" in problems[0], problems


def test_skip_going_further_makes_a_marked_cell_print_one_line_instead_of_running():
    from IPython.core.interactiveshell import InteractiveShell

    from utils.blocks import skip_going_further

    shell = InteractiveShell.instance()
    try:
        skip_going_further(True)
        skip_going_further(True)  # the setup cell run twice: one transformer, not two
        assert sum(f.__name__ == "_going_further_cell" for f in shell.input_transformers_post) == 1
        result = shell.run_cell("# NBVAL_IGNORE_OUTPUT\n# going further: the speed race\nraced = 1\n")
        assert result.success and "raced" not in shell.user_ns
        shell.run_cell("core = 1\n")
        assert shell.user_ns["core"] == 1
        skip_going_further(False)
        shell.run_cell("# Going further\nraced = 2\n")
        assert shell.user_ns["raced"] == 2
    finally:
        skip_going_further(False)
        InteractiveShell.clear_instance()


# -- stored outputs that another CPU would print differently -----------------------------------------------------
#: A float in scientific notation: "3.7e-09", "0.0e+00", "1.2e-07".
SCIENTIFIC = re.compile(r"(?<![\w.])[-+]?(\d+(?:\.\d+)?)e([-+]\d+)\b", re.I)
#: Below this, a float32 result's digits are rounding: what the CPU's exp, sum order or vector width made of them.
NOISE = 1e-5


def _constants() -> list[float]:
    """Properties of the float formats themselves (a table of eps and tiny prints them): the same on every CPU."""
    found = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        info = torch.finfo(dtype)
        found += [info.eps, info.tiny, info.smallest_normal, info.resolution]
    return found


def _compared(cell) -> bool:
    """Does nbval compare this cell's outputs with the stored ones?"""
    tags = cell.metadata.get("tags", [])
    return not (re.search(r"#\s*NBVAL_(IGNORE_OUTPUT|SKIP)", cell.source) or "nbval-ignore-output" in tags
                or "nbval-skip" in tags)


def _texts(cell) -> list[str]:
    texts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            texts.append(output.get("text", ""))
        for mime, value in output.get("data", {}).items():
            if mime.startswith("text/") or "json" in mime:
                texts.append(value if isinstance(value, str) else json.dumps(value))
    return texts


def noisy_outputs(nb) -> list[str]:
    """Floats below float32's noise (zero included) in scientific notation in the outputs nbval compares."""
    constants = _constants()
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not _compared(cell):
            continue
        for text in _texts(cell):
            for match in SCIENTIFIC.finditer(text):
                value = abs(float(match.group(0)))
                if value >= NOISE or any(abs(value - c) <= 0.05 * c for c in constants):
                    continue
                line = next(line for line in text.splitlines() if match.group(0) in line)
                found.append(f"cell {index} ({_grade_id(cell)}) shows {match.group(0)}: {line.strip()[:140]}")
    return found


def test_no_compared_output_shows_a_float_below_float32_noise(solution):
    """Print such a difference as a bound ("below 1e-6"), or mark the cell's output as varying where the number is
    not the point: another CPU rounds differently (01 stored 3.7e-09 where an AMD EPYC printed 0.0e+00)."""
    assignment, nb = solution
    found = noisy_outputs(nb)
    assert not found, f"{assignment}:\n" + "\n".join(found)


def test_the_noise_check_finds_01s_old_output():
    nb = nbs.read(nbs.solution_path("01_attention_intuition"))
    cell = next(c for c in nb.cells if _grade_id(c) == "softmax_after")
    cell.outputs = [nbs.nbformat.v4.new_output("stream", name="stdout", text=(
        "dim= 0: largest difference from torch.softmax 0.0e+00\ndim= 2: largest difference from torch.softmax 3.7e-09\n"))]
    assert len(noisy_outputs(nb)) == 2, noisy_outputs(nb)
    cell.outputs[0].text = "eps 1.2e-07, difference 2.5e-03\n"  # float32's eps and a real difference: fine
    assert noisy_outputs(nb) == []


def test_no_stored_solution_output_shows_a_demo_that_stopped_or_an_empty_figure(solution):
    """The stored run of a solution: every demo ran (`requires` never had to stop one) and drew something."""
    assignment, nb = solution
    found = []
    for index, cell in enumerate(nb.cells):
        for text in _texts(cell) if cell.cell_type == "code" else []:
            for line in text.splitlines():
                if UNFINISHED.match(line.strip()) or STOPPED.match(line.strip()) or EMPTY_FIGURE.search(line):
                    found.append(f"cell {index} ({_grade_id(cell)}): {line.strip()[:200]}")
    assert not found, f"{assignment}:\n" + "\n".join(found)


# -- requires: one line, nothing drawn ---------------------------------------------------------------------------
@pytest.fixture
def pyplot(monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    monkeypatch.setattr("utils.grading._SKIPPED_FOR", set())
    yield plt
    plt.close("all")


def test_a_demo_of_an_unfinished_exercise_prints_one_line_and_draws_nothing(pyplot, capsys):
    from utils.grading import requires

    def softmax(x):
        raise NotImplementedError()

    with requires("softmax"):
        pyplot.subplots(1, 2)
        softmax(torch.zeros(3))
        print("never printed")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and UNFINISHED.match(lines[0]), lines
    assert pyplot.get_fignums() == []


def test_a_demo_of_a_wrong_answer_prints_one_line_with_the_error_and_draws_nothing(pyplot, capsys):
    from utils.grading import requires

    kept = pyplot.figure()  # a figure from an earlier cell stays
    with requires("split_heads"):
        pyplot.subplots()
        torch.zeros(4, 5).view(3, 7)  # what a wrong answer of the wrong shape meets
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and STOPPED.match(lines[0]) and "RuntimeError" in lines[0], lines
    assert pyplot.get_fignums() == [kept.number]
    # a variable the stopped demo would have made: the next demo says so in one line as well
    with requires("split_heads"):
        print(undefined_by_the_stopped_demo)  # noqa: F821
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and UNFINISHED.match(lines[0]), lines


def test_a_finished_demo_keeps_its_output_and_the_stop_button_still_stops(pyplot, capsys):
    from utils.grading import requires

    with requires("softmax"):
        print("the demo's output")
        pyplot.subplots()
    assert capsys.readouterr().out == "the demo's output\n" and len(pyplot.get_fignums()) == 1
    with pytest.raises(KeyboardInterrupt), requires("softmax"):
        raise KeyboardInterrupt


# -- words a learner can trust -----------------------------------------------------------------------------------
#: Prose that describes the old demos (they raised) or outputs the student copy does not store.
UNTRUE = re.compile(r"\b(raises?|stops?\s+with)\s+`NotImplementedError`|\b(stored|committed)\s+here\b"
                    r"|抛出\s*`NotImplementedError`|以\s*`NotImplementedError`\s*停下|这里保存的运行|此处提交的", re.I)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_student_copy_says_what_its_cells_do_and_how_to_grade_on_colab(lang):
    """Demos print one line until their exercise works (they do not raise), the student copy stores no run to point
    to, and the cell under each notebook's first exercise says how to grade with the hidden tests on Colab, where no
    notebook file exists for `attn check`."""
    from utils import release

    problems = []
    for assignment in ASSIGNMENTS:
        nb = nbs.read(nbs.release_path(assignment, release.release_dir(lang)))
        for cell in nb.cells:
            if cell.cell_type == "markdown" and (found := UNTRUE.search(cell.source)):
                problems.append(f"{assignment} ({lang}) {_grade_id(cell)}: {found.group(0)!r}")
        first = next(i for i, c in enumerate(nb.cells) if nbs.is_test_cell(c))
        under = nb.cells[first + 1]
        if not (under.cell_type == "markdown" and "from utils import colab; colab.check()" in under.source):
            problems.append(f"{assignment} ({lang}): the cell under the first test cell does not say how to grade on Colab")
    assert not problems, "\n".join(problems)
