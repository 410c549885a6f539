"""Notebook plumbing shared by the CLI and the tests: where things are, clean metadata, executing a notebook."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbformat import NotebookNode

ROOT = Path(__file__).resolve().parent.parent
#: Environment variable that points at the grader folder when it is not beside ``utils``.
GRADER_ENV = "ATTN_GRADER_DIR"
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
#: Cells with one of these tags only show something (a timing, a sweep, a figure, a table) and leave nothing a later
#: cell reads: grading skips them (tests/test_course_structure.py checks that no later cell reads what they bind).
SLOW_TAG = "slow"  # too slow to repeat while grading (timings, big sweeps)
DEMO_TAG = "demo"  # a figure or a table: worth seeing, not worth grading time
SKIPPED_TAGS = (SLOW_TAG, DEMO_TAG)
_ASSIGNMENT = re.compile(r"^\d\d_[a-z0-9_]+$")


class CourseError(Exception):
    """Something about the course files is wrong; the message says what to do."""


def assignments() -> list[str]:
    """The course's assignment ids in order (``01_attention_intuition``, ...), one per folder of solutions/."""
    found = [p.name for p in SOLUTIONS.iterdir() if p.is_dir() and _ASSIGNMENT.match(p.name)]
    return sorted(a for a in found if (SOLUTIONS / a / f"{a}.ipynb").is_file())


def solution_path(assignment: str) -> Path:
    """The source-of-truth notebook of one assignment."""
    path = SOLUTIONS / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        known = ", ".join(assignments()) or "none"
        raise CourseError(f"no notebook called {assignment!r} in solutions/ (known: {known})")
    return path


def release_path(assignment: str, release_dir: Path = NOTEBOOKS) -> Path:
    """The student copy of one assignment inside `release_dir`."""
    return release_dir / assignment / f"{assignment}.ipynb"


def find_notebook(path: str | Path) -> Path:
    """The notebook file a user means: a .ipynb file, a folder holding one, or an assignment id."""
    given = Path(path)
    if given.is_dir():
        candidates = [given / f"{given.name}.ipynb", *sorted(given.glob("*.ipynb"))]
    elif not given.exists() and _ASSIGNMENT.match(str(path)):
        candidates = [release_path(str(path))]
    else:
        candidates = [given]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise CourseError(f"{path}: no notebook there (give a .ipynb file, its folder, or a name like 01_attention_intuition)")


def read(path: Path) -> NotebookNode:
    """Read a notebook, explaining what to do if it is not valid JSON."""
    try:
        return nbformat.read(str(path), as_version=4)
    except Exception as exc:  # nbformat raises several types for damaged files
        raise CourseError(f"{path} is not a readable notebook ({exc}); restore it from a backup or git") from exc


def write(nb: NotebookNode, path: Path) -> None:
    """Write a notebook in nbformat's canonical layout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))


def clean(nb: NotebookNode) -> NotebookNode:
    """Keep only kernelspec/language_info and nbgrader/tags metadata, and of an output's only a figure's alt text
    (utils.viz.show); number executed cells 1, 2, 3, ..."""
    nb.metadata = NotebookNode({k: nb.metadata[k] for k in ("kernelspec", "language_info") if k in nb.metadata})
    count = 0
    for cell in nb.cells:
        cell.metadata = NotebookNode({k: cell.metadata[k] for k in ("nbgrader", "tags") if k in cell.metadata})
        if cell.cell_type == "code":
            if cell.execution_count is not None or cell.outputs:
                count += 1
                cell.execution_count = count
                for out in cell.outputs:
                    if "execution_count" in out:
                        out.execution_count = count
                    if "metadata" in out:  # matplotlib puts figure sizes here: dropped; a figure's alt text kept
                        out.metadata = NotebookNode({mime: {"alt": meta["alt"]} for mime, meta in out.metadata.items()
                                                     if isinstance(meta, dict) and meta.get("alt")})
    return nb


def kernel_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for notebook kernels: this interpreter's scripts first on PATH, plus `extra`."""
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.setdefault("PYTHONHASHSEED", "0")
    env.update(extra or {})
    return env


#: How many times its quiet value a time limit that scales with the machine's load may grow to: a two-core machine at
#: three times its cores' load, with room to spare.
MAX_LOAD_FACTOR = 4.0


def load_factor() -> float:
    """How many times over this machine's cores are asked for now: the 1-minute load average per core, from 1 (quiet or
    less) to MAX_LOAD_FACTOR (1 where the load cannot be read: Windows). A CPU-bound process gets about 1/load_factor()
    of a core, so what takes it N s on a quiet machine takes about N * load_factor() s here now."""
    try:
        per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, per_core))


def execute(
    nb: NotebookNode,
    cwd: Path,
    *,
    timeout: int = 600,
    allow_errors: bool = False,
    env: dict[str, str] | None = None,
    quiet: bool = False,
) -> NotebookNode:
    """Run every code cell of `nb` in a fresh python3 kernel started in `cwd`.

    `timeout`: seconds a cell may run on a quiet machine. Each cell gets that many times `load_factor()` as the cell
    starts: notebook 08's training takes about 3 minutes alone on one thread, three times as long on a two-core machine
    at three times its load (`attn execute` beside a test run), and a fixed 600 s would stop it."""
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=timeout,
        timeout_func=(lambda cell: timeout * load_factor()) if timeout and timeout > 0 else None,
        kernel_name="python3",
        allow_errors=allow_errors,
        interrupt_on_timeout=allow_errors,
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    # quiet: the kernel process's own stderr (ipykernel's start-up chatter) is not shown; cell outputs are kept.
    extra = {"stderr": subprocess.DEVNULL} if quiet else {}
    client.execute(env=kernel_env(env), **extra)
    return nb


def code_cells(nb: NotebookNode) -> Iterable[NotebookNode]:
    """The code cells of a notebook."""
    return (c for c in nb.cells if c.cell_type == "code")


def nbgrader_meta(cell: NotebookNode) -> dict:
    """The cell's nbgrader metadata, or {}."""
    return dict(cell.metadata.get("nbgrader", {}))


def course_cells(course: NotebookNode, learner: NotebookNode) -> dict[int, NotebookNode]:
    """Which of the learner's cells stand for which of the course's: {learner cell index: course cell}.

    A learner's cell is the course's cell X when it carries X's grade_id, has X's type and is the first such cell;
    every other cell (added, duplicated, renamed or re-tagged) is the learner's own, whatever its metadata says.
    Grading (`utils.engine.checking.plan`), nbgrader's checks (`KeepCourseCells`) and the graded notebook
    (`utils.engine.autograde.annotate`) all ask this one question."""
    by_id = {nbgrader_meta(c)["grade_id"]: c for c in course.cells if nbgrader_meta(c).get("grade_id")}
    matched: dict[int, NotebookNode] = {}
    seen: set[str] = set()
    for index, cell in enumerate(learner.cells):
        meta = cell.get("metadata")
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        gid = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        if isinstance(gid, str) and gid in by_id and gid not in seen and cell.get("cell_type") == by_id[gid].cell_type:
            seen.add(gid)
            matched[index] = by_id[gid]
    return matched


def is_test_cell(cell: NotebookNode) -> bool:
    """A locked, graded code cell (autograder tests)."""
    meta = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def is_answer_cell(cell: NotebookNode) -> bool:
    """A cell the learner writes in."""
    return bool(nbgrader_meta(cell).get("solution"))


def grader_dir() -> Path:
    """The folder with hidden tests and reference tensors (``$ATTN_GRADER_DIR`` or ``<repo>/grader``)."""
    configured = os.environ.get(GRADER_ENV)
    path = Path(configured) if configured else ROOT / "grader"
    if not path.is_dir():
        raise FileNotFoundError(
            f"The hidden tests are not here (looked for {path}). They ship with the course repository, "
            f"not with student copies: grade with `attn check` inside a clone of the course, "
            f"or set {GRADER_ENV} to the repository's grader/ folder."
        )
    return path
