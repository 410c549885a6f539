"""Run a notebook's cells the ways a learner does, in one kernel, and report what each cell showed.

A learner does not only press Run All once on a finished notebook: they press it on the blank copy, with a wrong answer
in it, and they go back to a section after the next one has run. `run` executes passes of cells (each with its index in
its notebook) one after the other in one kernel and returns what every cell showed in each pass. Two probes watch what
the outputs alone would not tell: every figure the kernel displays says in its text how many of its axes show nothing
("<Figure: 2 axes, 1 empty>"), and every test cell is followed by a look at the names bound before it that it rebound.
`tests/test_notebook_runs.py` asserts on these runs; the whole set (every notebook blank, with a wrong answer in every
exercise, and finished with each section run again after the next one, slow cells included) runs as a script:

    .venv/bin/python tests/notebook_runs.py            # all notebooks, or name some: 02 07
    .venv/bin/python tests/notebook_runs.py --quick    # without the slow cells that run only the course's own code
"""

from __future__ import annotations

import ast
import copy
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nbformat import NotebookNode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from utils import notebooks as nbs  # noqa: E402

#: Run in the kernel before the notebook: a displayed figure's text says how many of its axes show nothing at all.
FIGURE_PROBE = '''
import matplotlib.figure


def _attn_describe_figure(fig):
    def has_data(ax):
        if any(len(line.get_xdata()) and len(line.get_ydata()) for line in ax.lines):
            return True
        for collection in ax.collections:
            try:
                if len(collection.get_paths()) or len(collection.get_offsets()):
                    return True
            except Exception:
                return True
        return bool(ax.patches or ax.images or ax.texts or ax.tables or ax.artists)

    shown = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    return f"<Figure: {len(shown)} axes, {sum(not has_data(ax) for ax in shown)} empty>"


matplotlib.figure.Figure.__repr__ = _attn_describe_figure  # a displayed figure's text/plain is its repr
del _attn_describe_figure
'''
#: Run before and after each test cell: the names bound before it that it rebound (but `check`, names with a leading
#: underscore and IPython's). New names are left to the static check (tests/test_notebook_cells.py): Triton's interpreter
#: copies its own module's names into the globals of a kernel it runs, which are the notebook's.
BEFORE_TEST = ("_attn_names = {k: id(v) for k, v in globals().items() if not k.startswith('_') "
               "and k not in ('In', 'Out', 'exit', 'quit', 'get_ipython', 'check')}")
AFTER_TEST = ("print('rebound:', sorted(k for k, v in globals().items() if k in _attn_names and _attn_names[k] != id(v)))")
EMPTY_FIGURE = re.compile(r"<Figure: (\d+) axes, ([1-9]\d*) empty>")
#: The one line `utils.grading.requires` prints instead of a demo's output (English: the runs speak English).
UNFINISHED = re.compile(r"^\(finish the exercise .+ above to see this cell's output, then run this cell again\)$")
STOPPED = re.compile(r"^\(this cell calls .+ above and stopped with .+\)$")
HEADING = re.compile(r"^## ", re.M)


@dataclass
class Shown:
    """What one cell showed in one pass."""

    index: int
    grade_id: str
    outputs: list
    rebound: list[str] = field(default_factory=list)  # a test cell's: the names bound before it that it rebound

    @property
    def errors(self) -> list[str]:
        return [f"{o.get('ename')}: {o.get('evalue', '')[:300]}" for o in self.outputs if o.output_type == "error"]

    @property
    def stderr(self) -> str:
        return "".join(o.get("text", "") for o in self.outputs if o.output_type == "stream" and o.name == "stderr")

    @property
    def lines(self) -> list[str]:
        text = "".join(o.get("text", "") for o in self.outputs if o.output_type == "stream" and o.name == "stdout")
        return [line for line in text.splitlines() if line.strip()]

    @property
    def displays(self) -> list[str]:
        return [str(o.get("data", {}).get("text/plain", "")) for o in self.outputs
                if o.output_type in ("display_data", "execute_result")]

    @property
    def empty_figures(self) -> list[str]:
        return [d for d in self.displays if EMPTY_FIGURE.search(d)]

    @property
    def skipped(self) -> bool:
        """Did `requires` print its line instead of the demo's output?"""
        return any(UNFINISHED.match(line) or STOPPED.match(line) for line in self.lines)

    def __str__(self) -> str:
        return f"cell {self.index} ({self.grade_id})"


@dataclass
class Run:
    notebook: str
    passes: dict[str, list[Shown]] = field(default_factory=dict)
    seconds: float = 0.0


def grade_id(cell: NotebookNode) -> str:
    return nbs.nbgrader_meta(cell).get("grade_id") or cell.get("id", "?")


def sections(nb: NotebookNode) -> list[list[int]]:
    """The indices of the code cells of each section: the set-up before section 1, then one list per '## ' heading."""
    found: list[list[int]] = [[]]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and HEADING.search(cell.source):
            found.append([])
        elif cell.cell_type == "code":
            found[-1].append(index)
    return found


def run(passes: dict[str, list[tuple[int, NotebookNode]]], *, cwd: Path = nbs.ROOT, env: dict[str, str] | None = None,
        timeout: int = 600, notebook: str = "") -> Run:
    """Execute `passes` (name -> the cells to run, in order, each with its index in its notebook) one after the other
    in one fresh kernel; the cells are copied, so a notebook's cells can run in several passes."""
    from nbclient import NotebookClient

    probe = nbs.nbformat.v4.new_code_cell(FIGURE_PROBE)
    copies = {name: [(index, copy.deepcopy(original)) for index, original in todo] for name, todo in passes.items()}
    for position, cell in enumerate((c for todo in copies.values() for _, c in todo), 1):
        cell.outputs = []
        cell.id = f"run-{position}"  # a cell can run in several passes: each copy has an id of its own
    # nbclient writes each executed cell back into its notebook at the position it is given: one notebook of every
    # cell of every pass, in order
    scratch = nbs.nbformat.v4.new_notebook(cells=[probe] + [c for todo in copies.values() for _, c in todo])
    client = NotebookClient(scratch, timeout=timeout, kernel_name="python3", allow_errors=True, record_timing=False,
                            resources={"metadata": {"path": str(cwd)}})
    result = Run(notebook)
    start = time.monotonic()
    extra = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    with client.setup_kernel(env=nbs.kernel_env(extra), stderr=subprocess.DEVNULL):
        client.execute_cell(probe, 0, store_history=False)
        assert not [o for o in scratch.cells[0].outputs if o.output_type == "error"], scratch.cells[0].outputs
        position = 1
        for name, todo in copies.items():
            shown = []
            for index, cell in todo:
                test = nbs.is_test_cell(cell)
                if test:
                    _quietly(client, BEFORE_TEST)
                client.execute_cell(cell, position)
                shown.append(Shown(index, grade_id(cell), scratch.cells[position].outputs))
                if test:
                    said = _quietly(client, AFTER_TEST)
                    shown[-1].rebound = ast.literal_eval(said.split("rebound:", 1)[1].strip())
                position += 1
            result.passes[name] = shown
    result.seconds = time.monotonic() - start
    return result


def _quietly(client, source: str) -> str:
    """Run `source` in the kernel outside the notebook (no history, no cell of its own); what it printed."""
    probe = nbs.nbformat.v4.new_code_cell(source)
    client.nb.cells.append(probe)
    try:
        client.execute_cell(probe, len(client.nb.cells) - 1, store_history=False)
    finally:
        client.nb.cells.pop()
    errors = [o for o in probe.outputs if o.output_type == "error"]
    assert not errors, errors
    return "".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream")


def cells(nb: NotebookNode, indices: list[int]) -> list[tuple[int, NotebookNode]]:
    return [(i, nb.cells[i]) for i in indices]


# -- which cells --------------------------------------------------------------------------------------------------
def _magicless(source: str) -> str:
    return "\n".join("" if re.match(r"\s*[%!]", line) else line for line in source.splitlines())


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names read, names bound) anywhere in a cell: coarse, enough to follow data from cell to cell."""
    tree = ast.parse(_magicless(source))
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return read, bound


def code_indices(nb: NotebookNode, *, slow: str = "all") -> list[int]:
    """The code cells to run. slow="all": every one; "learner": of the cells tagged `slow`, only the demos that call
    the learner's code (`with requires(...)`, as every such demo is written): a slow measurement of the course's own
    code runs the same whatever the learner wrote, and nbval runs it; "none": no slow cell. A cell that reads what
    only left-out cells made is left out as well."""
    made_by_left_out, made_by_kept, keep = set(), set(), []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        read, bound = _names(cell.source)
        imported = {(a.asname or a.name).split(".")[0] for node in ast.walk(ast.parse(_magicless(cell.source)))
                    if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
        is_slow = nbs.SLOW_TAG in cell.metadata.get("tags", [])
        learners = "requires(" in cell.source
        left_out = (is_slow and (slow == "none" or (slow == "learner" and not learners))) \
            or bool((read - bound) & (made_by_left_out - made_by_kept))
        if left_out:
            made_by_left_out |= bound - imported  # a module: another cell imports it too, or the reader says so
        else:
            made_by_kept |= bound
            keep.append(index)
    return keep


def planted(assignment: str, plants_module) -> NotebookNode:
    """The solution with one wrong but implemented answer per exercise: the first planted mistake of each."""
    nb = nbs.read(nbs.solution_path(assignment))
    cells = {nbs.nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    done = set()
    for plant in plants_module.MISTAKES:
        if plant["exercise"] in done or cells[plant["cell"]].source.count(plant["old"]) != 1:
            continue
        cells[plant["cell"]].source = cells[plant["cell"]].source.replace(plant["old"], plant["new"])
        done.add(plant["exercise"])
    return nb


def env_for(assignment: str, kind: str = "") -> dict[str, str]:
    """08 trains for minutes: with an answer in every exercise, run it as nbgrader's Validate does (NBGRADER_VALIDATING:
    its slow demos take a short path, and failed test tables are also said on stderr). A blank copy trains nothing."""
    return {"NBGRADER_VALIDATING": "1"} if assignment.startswith("08") and kind != "blank" else {}


def passes_of(assignment: str, *, slow: str = "all", finished_slow: str | None = None,
              ) -> dict[str, dict[str, list[tuple[int, NotebookNode]]]]:
    """The kernels to start for one notebook and their passes: "blank" (Run All on the student copy), "wrong" (Run All
    with one wrong but implemented answer per exercise, tests/plants_NN.py's first), "finished" (Run All with the
    solution's answers, then each section again after the next one, the last first). `slow` says which slow cells
    run (`code_indices`); `finished_slow`, which in the finished run, if other."""
    from tests.conftest import fill_answers, plants

    blank = nbs.read(nbs.release_path(assignment))
    finished = fill_answers(nbs.read(nbs.release_path(assignment)), assignment)
    wrong = planted(assignment, plants(assignment))
    again = code_indices(finished, slow=finished_slow or slow)
    return {
        "blank": {"run all": cells(blank, code_indices(blank, slow=slow))},
        "wrong": {"run all": cells(wrong, code_indices(wrong, slow=slow))},
        "finished": {"run all": cells(finished, again),
                     "sections again, the last first": [(i, finished.cells[i]) for section in
                                                        reversed(sections(finished)[:-1]) for i in section
                                                        if i in again]},
    }


def problems_of(assignment: str, kind: str, result: Run) -> list[str]:
    """What a learner would see go wrong: an error, an empty figure, a demo saying more than its one line."""
    found = []
    for name, shown in result.passes.items():
        for cell in shown:
            found += [f"{assignment} {kind} ({name}): {cell} raised {error}" for error in cell.errors]
            found += [f"{assignment} {kind} ({name}): {cell} showed {figure}" for figure in cell.empty_figures]
            if cell.rebound:
                found.append(f"{assignment} {kind} ({name}): test cell {cell} rebound {cell.rebound}, names earlier "
                             f"cells bound")
            if kind == "blank" and cell.stderr:
                found.append(f"{assignment} blank: {cell} wrote to stderr: {cell.stderr[:300]}")
            if kind == "blank" and cell.skipped and (cell.displays or not all(
                    UNFINISHED.match(line) or STOPPED.match(line) for line in cell.lines)):
                found.append(f"{assignment} blank: {cell} said more than its one line: {cell.lines} {cell.displays}")
    return found


def main(argv: list[str]) -> int:
    slow = "learner" if "--quick" in argv else "all"
    chosen = [a for a in nbs.assignments() if not [x for x in argv if not x.startswith("-")] or a[:2] in argv]
    problems = []
    for assignment in chosen:
        for kind, passes in passes_of(assignment, slow=slow).items():
            result = run(passes, env=env_for(assignment, kind), notebook=assignment)
            problems += problems_of(assignment, kind, result)
            print(f"{assignment} {kind}: {result.seconds:.1f} s", flush=True)
    print("\n".join(problems) or "no problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
