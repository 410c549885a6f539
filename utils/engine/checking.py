"""Grade a learner's notebook: their code runs in a worker process, the checks and the score here.

This is what `attn check` and nbgrader's autograder (`utils.engine.autograde`) both run. The grader process reads the
course's own copy of every test cell (from solutions/, hidden tests included) and runs it itself, with each
exercise name bound to a proxy for the learner's object in the worker (`utils.engine.remote`). The worker runs the
learner's cells in the course's order: each course cell as the course wrote it, each answer cell as the learner
wrote it, and the cells the learner added where they put them. Cells the learner added, duplicated, renamed or
re-tagged never count as tests; a test cell they moved or deleted is graded after its answer cell all the same.

Every exercise has a limit enforced from here, in CPU time of all the learner's processes together (a busy machine
stretches the wall clock, not that), with a backstop on the wall clock for code that waits: past it the worker is
killed (with everything it started) and a fresh one replays the learner's definitions for the next exercise. A
submission whose processes compute beside the worker, or fill memory together (a fork bomb), is stopped whole. Whatever the worker does (exit, crash,
loop, flood its output, patch anything in its own process), an exercise scores a number between 0 and its
points, and the total is the assignment's.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import hashlib
import importlib.util
import io
import json
import math
import os
import re
import textwrap
import time
import unicodedata
import warnings
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nbformat
import torch
from nbformat import NotebookNode

from .. import course, i18n
from .. import notebooks as nbs
from ..grading import (
    NOT_IMPLEMENTED,
    UNSEEDED,
    VARIES,
    CheckContext,
    Checker,
    grader_dir,
    load_grader,
    load_references,
    standing_in,
)
from ..i18n import N_
from ..results import CheckOutcome, ExerciseResult, Message, NotebookResult, Where, say
from .remote import WALL_FACTOR, Budget
from .sandbox import MEMORY_MB
from .seed import submission_seed  # the hidden inputs' seed (a key of the grading side's)

#: CPU seconds the learner's code may spend while one exercise is checked, all its processes together (and
#: remote.WALL_FACTOR times as many seconds on the wall clock, for code that waits instead of computing).
EXERCISE_TIME_LIMIT_S = float(os.environ.get("ATTN_EXERCISE_TIME_LIMIT", "10"))
#: CPU seconds one cell may take, likewise: the learner's own cells, and the course's (demos that call their code).
LEARNER_CELL_TIME_LIMIT_S = float(os.environ.get("ATTN_CELL_TIME_LIMIT", "10"))
COURSE_CELL_TIME_LIMIT_S = max(20.0, LEARNER_CELL_TIME_LIMIT_S)
#: Seconds (wall clock) a whole notebook may take; exercises not reached by then score 0.
TOTAL_TIME_LIMIT_S = float(os.environ.get("ATTN_TOTAL_TIME_LIMIT", "300"))
#: Folders whose files grading must never change (checked around every run that is not isolated).
PROTECTED = ("grader", "utils", "solutions")


# -- which cells run, in which order ---------------------------------------------------------------------------
@dataclass
class Step:
    """One unit of grading: a cell for the worker to run, or a test cell for this process to run."""

    kind: str  # "cell" or "test"
    source: str
    origin: str  # "course", "answer" or "learner"
    grade_id: str | None = None
    points: float = 0.0
    setup: bool = False
    status: str = "pending"  # ok, error, fatal (stopped or crashed the worker), skipped
    error: dict[str, Any] | None = None

    @property
    def exercise(self) -> str:
        gid = self.grade_id or ""
        return gid[len("test_"):] if gid.startswith("test_") else gid


def _source(cell: NotebookNode) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def plan(source: NotebookNode, learner: NotebookNode) -> list[Step]:
    """The steps of grading `learner` against the course notebook `source`, in the course's order."""
    answers: dict[str, str] = {}
    attached: dict[str | None, list[str]] = defaultdict(list)
    anchor: str | None = None
    matched = nbs.course_cells(source, learner)
    for index, cell in enumerate(learner.cells):
        course_cell = matched.get(index)
        if course_cell is not None:
            anchor = nbs.nbgrader_meta(course_cell)["grade_id"]
            if nbs.is_answer_cell(course_cell):
                answers[anchor] = _source(cell)
            continue
        if cell.get("cell_type") == "code":
            attached[anchor].append(_source(cell))  # added, duplicated, renamed or re-tagged: the learner's code

    steps = [Step("cell", s, "learner") for s in attached[None]]
    first_code = True
    for cell in source.cells:
        meta = nbs.nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if cell.cell_type == "code":
            if nbs.is_test_cell(cell):
                steps.append(Step("test", _source(cell), "course", gid, float(meta.get("points", 0))))
            elif nbs.is_answer_cell(cell):
                if gid in answers:
                    steps.append(Step("cell", answers[gid], "answer", gid))
            elif not set(nbs.SKIPPED_TAGS) & set(cell.metadata.get("tags", [])):
                steps.append(Step("cell", _source(cell), "course", gid, setup=first_code))
            first_code = False
        steps += [Step("cell", s, "learner") for s in attached.get(gid, [])] if gid else []
    return steps


def only_exercise(steps: list[Step], exercise: str) -> list[Step]:
    """The steps that grade `exercise` alone: every cell up to its test cell (a later exercise's answer cell and
    the demos after it do not matter to it), and no other exercise's test cell."""
    tests = [i for i, s in enumerate(steps) if s.kind == "test" and s.exercise == exercise]
    if not tests:
        known = [s.exercise for s in steps if s.kind == "test"]
        raise nbs.CourseError(f"no exercise {exercise!r} in this notebook (its exercises: {', '.join(known)})")
    return [s for s in steps[: tests[0] + 1] if s.kind == "cell" or s.exercise == exercise]


def parse(source: str) -> ast.Module:
    """`ast.parse`, asked again where CPython 3.11 before 3.11.8 raised its spurious "AST constructor recursion depth
    mismatch" SystemError (python/cpython#106905, seen here once in a grading process with several threads): the
    source is the same, so a second parse is sound."""
    for attempt in range(3):
        try:
            return ast.parse(source)
        except SystemError as e:
            if "recursion depth mismatch" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def is_definition(source: str) -> bool:
    """True for a cell that only imports and defines (safe and cheap to replay)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return all(isinstance(node, kinds) for node in tree.body)


def free_names(source: str) -> set[str]:
    """Names a test cell reads but never binds: the learner's objects, or the setup cell's."""
    tree = parse(source)
    loads, stores = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else stores).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            stores.add(node.name)
        elif isinstance(node, ast.arg):
            stores.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stores.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            stores.add(node.name)
    return loads - stores - set(dir(builtins))


# -- the grader's checker -----------------------------------------------------------------------------------------
class GradingContext(CheckContext):
    """Checks run by the grader (`utils.grading.CheckContext` says what differs from the learner's kernel)."""

    def __init__(self, *, seed: int, hidden: tuple[Any, dict] | None, worker: Any, budget: Budget,
                 outer: Budget, subject: Any = None) -> None:
        self.seed_base = seed
        self.preloaded = hidden  # (the grader module, its references), loaded before any learner code ran
        self.worker = worker
        self.budget = budget  # the exercise's, from its start
        self.outer = outer  # the notebook's
        self.subject = subject  # the learner's object for this exercise (a proxy), for `STAND_INS`

    def seed(self, checker: Checker, index: int) -> int:
        digest = hashlib.blake2b(f"{self.seed_base}:{checker.exercise}:{index}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") >> 2

    def time_limit(self, checker: Checker, seconds: float) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # the grader's deadline on the worker rules

    def set_time_limit(self, checker: Checker, seconds: float) -> None:
        self.worker.deadline = Budget(seconds, self.worker.usage, outer=self.outer, since=self.budget)

    def around(self, checker: Checker, name: str) -> contextlib.AbstractContextManager:
        """A visible check of a composite exercise runs with the grader's parts standing in.

        A grader lists, in `STAND_INS`, the earlier exercises each composite calls by name (02's SelfAttention
        calls scaled_dot_product_attention): while grading, the visible checks then grade the composite on its own,
        as its hidden tests do (they stand the parts in themselves), so a bug in a part costs points once."""
        if checker.running_hidden or self.subject is None or self.preloaded is None:
            return contextlib.nullcontext()
        parts = getattr(self.preloaded[0], "STAND_INS", {}).get(checker.exercise)
        parts = parts() if callable(parts) else parts
        return standing_in(self.subject, **parts) if parts else contextlib.nullcontext()

    def hidden_tests(self, checker: Checker, notebook: str) -> tuple[Any, dict]:
        if self.preloaded is None:
            raise KeyError(f"no hidden tests were loaded for {notebook}")
        module, refs = self.preloaded
        tests = getattr(module, "HIDDEN_TESTS", {})
        if checker.exercise not in tests:
            raise KeyError(f"grader/{notebook}.py has no hidden tests for {checker.exercise!r}")
        return tests[checker.exercise], refs

    def varies(self, checker: Checker, returned: torch.Tensor) -> Message | None:
        try:
            changed = self.worker.varies(returned)
            unseeded = self.worker.varied_by == "unseeded"
        except Exception:  # noqa: BLE001 - asking again is a courtesy: its own failure says nothing (a lost worker is
            return None  # a BaseException, and goes on up)
        return Message.of(UNSEEDED if unseeded else VARIES, changed=changed, total=returned.numel()) if changed else None

    def visible_mistakes(self, checker: Checker, check: int, comparison: int, actual: torch.Tensor,
                         expected: torch.Tensor) -> dict:
        return {}  # the visible checks meet other inputs here (the seed): the hidden checks name the mistakes

    def visible_failure(self, checker: Checker, check: int, signature: Any) -> None:
        return None  # likewise

    def announce(self, checker: Checker, result: Any) -> None:
        pass  # the grader reports the result itself


# -- running it ---------------------------------------------------------------------------------------------------
@dataclass
class Grading:
    """What grading found: one result per exercise (in the course's order), the steps it took, and the language its
    words are said in."""

    assignment: str
    exercises: list[ExerciseResult]
    steps: list[Step]
    isolated: bool
    seconds: float
    notes: list[Any] = field(default_factory=list)
    lang: str = "en"

    @property
    def score(self) -> float:
        return round(sum(e.score for e in self.exercises), 2)

    @property
    def max_score(self) -> float:
        return float(sum(e.max_score for e in self.exercises))

    def result(self, notebook: str) -> NotebookResult:
        """What `attn check` reports for the notebook at `notebook` (a path, as the learner named it)."""
        return NotebookResult(notebook, tuple(self.exercises), self.lang, tuple(self.notes))


def _why_missing(steps: list[Step]) -> dict[str, Message]:
    """For each exercise whose name may be missing in the worker: why (said when a check finds it missing)."""
    reasons = {}
    answered = {s.grade_id: s for s in steps if s.origin == "answer"}
    for step in steps:
        if step.kind != "test":
            continue
        name = step.exercise
        answer = answered.get(name)
        err = (answer.error or {}) if answer is not None else {}
        if answer is None:
            reasons[name] = Message.of(N_("`{name}` is not defined: your notebook has no answer cell for it (deleted, "
                                          "or its metadata changed?) — copy the cell back from a fresh student copy"),
                                       name=name)
        elif answer.status == "error" and err.get("type") in ("SyntaxError", "IndentationError", "TabError"):
            where = (Message.of(N_(" on line {line}"), line=err["line"]) if err.get("line") else "")
            code = f": `{err['text']}`" if err.get("text") else ""
            reasons[name] = Message.of(N_("`{name}` is not defined because its cell has a {error}{where}{code} "
                                          "({message}) — fix it and run the cell again"),
                                       name=name, error=err["type"], where=where, code=code,
                                       message=err.get("message", ""))
        elif answer.status == "error":
            where = Where.from_data(err.get("where"))
            reasons[name] = Message.of(N_("`{name}` is not defined because its cell stopped with {error}: "
                                          "{message}{where}"), name=name, error=err.get("type", "Exception"),
                                       message=err.get("message", ""), where=where.said() if where else "")
        elif answer.status == "fatal":
            reasons[name] = Message.of(N_("`{name}` is not defined because its cell {why}"), name=name,
                                       why=err.get("why") or Message.of(N_("was stopped")))
        else:
            reasons[name] = Message.of(N_("`{name}` is not defined in your notebook — did you rename it? The exercise "
                                          "needs exactly this name"), name=name)
    return reasons


class _Session:
    """A worker and the cells it has run, so that a fresh worker can pick up where a killed one stopped."""

    def __init__(self, zygote: Any, deadline: Budget, engine: Engine | None = None) -> None:
        self.zygote = zygote
        self.engine = engine
        self.deadline = deadline
        self.worker: Any = None
        self.done: list[Step] = []
        self.lost = False  # after a worker had to be killed, course demos are no longer replayed or run
        self.stopped: str | None = None  # why grading of this notebook stopped (a fork bomb): nothing more runs
        self.names: dict[str, str] = {}

    def _start(self) -> None:
        from .remote import Worker, WorkerLost

        for attempt in range(2):
            try:
                self.worker = Worker(self.zygote)
                self.worker.names = self.names
                return
            except (WorkerLost, OSError, EOFError, ValueError, KeyError):
                if attempt:
                    raise WorkerLost("the worker could not be started") from None

    def ensure(self) -> Any:
        if self.worker is not None and self.worker.alive:
            return self.worker
        if self.worker is not None:
            self.worker.kill()
        self._start()
        for step in list(self.done):
            if step.status in ("ok", "error") and self._wanted(step):
                self._execute(step, replay=True)
                if not self.worker.alive:
                    return self.ensure()
        return self.worker

    def _wanted(self, step: Step) -> bool:
        return not (self.lost and step.origin == "course" and not step.setup and not is_definition(step.source))

    def _execute(self, step: Step, replay: bool = False) -> None:
        from .remote import WorkerLost

        limit = COURSE_CELL_TIME_LIMIT_S if step.origin == "course" else LEARNER_CELL_TIME_LIMIT_S
        deadline = self.worker.budget(limit, self.deadline)
        try:
            reply, _ = self.worker.exchange({"op": "run_cell", "source": step.source, "name": step.grade_id or step.origin},
                                            None, deadline)
        except WorkerLost as exc:
            self.lost = True
            step.status = "fatal"
            reason = str(exc)
            if reason == "stray":
                self.stopped = STRAY
            step.error = {"type": "Stopped", "why": _cell_stopped(reason, limit)}
            return
        if replay:
            return
        if reply.get("ok") is True:
            step.status = "ok"
        else:
            step.status = "error"
            error = reply.get("error")
            step.error = {k: v if k == "where" else str(v)[:500] for k, v in error.items()} \
                if isinstance(error, dict) else {}
        self.done.append(step)

    def run_cell(self, step: Step) -> None:
        if self.stopped or not self._wanted(step):
            step.status = "skipped"
            return
        self.ensure()
        self._execute(step)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        if self.engine is not None:
            self.engine.release(self.zygote)
        else:
            self.zygote.close()


def _grader_namespace(source: NotebookNode) -> dict[str, Any]:
    """The setup cell's names (imports, helpers), built here from the course's own copy of that cell."""
    setup = next((c for c in source.cells if c.cell_type == "code"), None)
    ns: dict[str, Any] = {"__name__": "__grader__"}
    if setup is not None:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(_source(setup), "<setup cell>", "exec"), ns)  # noqa: S102 - the course's own code
    return ns


#: Why a submission whose processes beside the worker computed or filled memory (a fork bomb) is stopped whole.
STRAY = Message.of(N_("processes your code started went on computing, or filling memory, beside the one that runs "
                      "your code (a fork bomb?): they were all stopped, and so was the grading of this notebook — the "
                      "exercises graded before keep their points, the rest score 0"))
MEMORY = Message.of(N_("your code's processes together used more than {gb} GB of memory — a tensor far larger than the "
                       "inputs (an L×L×d intermediate?), or results kept in a list that keeps growing"),
                    gb=f"{MEMORY_MB / 1024:g}")


def _cell_stopped(reason: str, limit: float) -> Message:
    """Why a cell did not finish, completing "its cell ..." (the engine's reason for stopping the worker)."""
    if reason in ("cpu", "timeout"):
        return Message.of(N_("ran past its limit of {seconds} s of CPU time and was stopped"), seconds=f"{limit:g}")
    if reason == "idle":
        return Message.of(N_("waited {seconds} s without computing and was stopped"), seconds=f"{limit:g}")
    if reason == "wall":
        return Message.of(N_("did not finish in {seconds} s and was stopped"), seconds=f"{limit * WALL_FACTOR:g}")
    if reason in ("memory", "stray"):
        return Message.of(N_("was stopped: {why}"), why=MEMORY if reason == "memory" else STRAY)
    if reason == "died":
        return Message.of(N_("ended the process running it (os._exit, a crash, or running out of memory)"))
    return Message.of(N_("broke the grader's connection to the process running it"))


def _lost_message(reason: str, limit: float) -> Message:
    """Why an exercise scored 0 when the engine had to stop the worker while its checks ran."""
    if reason in ("cpu", "timeout"):
        return Message.of(N_("stopped after {seconds} s of CPU time — is there a loop that never ends, or a Python loop "
                             "over every element where a tensor operation would do? (The process running your code "
                             "was stopped; the other exercises are graded in a fresh one.)"), seconds=f"{limit:g}")
    if reason == "idle":
        return Message.of(N_("stopped after {seconds} s spent waiting rather than computing — does your code sleep, "
                             "wait for input() or for a process it started? (The other exercises are graded in a fresh "
                             "process.)"), seconds=f"{limit:g}")
    if reason == "wall":
        return Message.of(N_("stopped: it did not finish in {seconds} s on the clock (the machine may be very busy; "
                             "the other exercises are graded in a fresh process)"), seconds=f"{limit * WALL_FACTOR:g}")
    if reason == "memory":
        return Message.of(N_("stopped: {why}. The other exercises are graded in a fresh process."), why=MEMORY)
    if reason == "stray":
        return Message.of(N_("stopped: {why}."), why=STRAY)
    if reason == "died":
        return Message.of(N_("the process running your code ended while this exercise was being checked: os._exit, a "
                             "crash, or running out of memory — code that ends the process scores 0"))
    return Message.of(N_("your code interfered with the grader's connection to it (it wrote to a file descriptor it "
                         "does not own?) — the exercise scores 0"))


def _result(exercise: str, points: float, checker: Checker | None, override: Message | None) -> ExerciseResult:
    """The exercise's result: its checker's (scored once, where the test cell scored it), or, when the engine had
    to stop it (`override`), 0 points with why and the checks that ran before."""
    if checker is not None and override is None:
        result = checker.score().result
        value = float(result.score) if math.isfinite(result.score) else 0.0
        return replace(result, score=round(min(max(value, 0.0), points), 2), max_score=points)
    if checker is not None:
        checker.settle()
    checks = () if checker is None else tuple(
        CheckOutcome(r.name, r.passed, r.hidden, r.message, r.message) for r in checker.results)
    return ExerciseResult.stopped_by(exercise, points, override or Message.of(N_("the test cell did not run")), checks)


class Engine:
    """Grades notebooks one after another with one warm zygote (`utils.engine.sandbox`), so that each grading after the first
    skips the seconds of starting Python and importing torch: `with Engine() as engine: engine.check(path)`.

    Between two notebooks the zygote is recycled: every worker and every process they started ends, and every folder
    the workers could write is emptied, so nothing one notebook's code left behind reaches the next. Where the
    workers are not isolated (no namespaces here) they could reach the zygote itself, so each notebook then gets a
    fresh zygote unless `one_learner` says every notebook graded here is the same learner's (their own JupyterLab).
    """

    def __init__(self, *, one_learner: bool = False, zygote: Any = None) -> None:
        """`zygote`: one already started (`attn check` starts it before importing torch, so both imports overlap)."""
        from .sandbox import isolation

        self.reuse = one_learner or isolation() is None
        self._zygote: Any = zygote
        self.started = int(zygote is not None)  # zygotes started: the first, and one after each not recycled

    def zygote(self) -> Any:
        from .sandbox import Zygote

        hidden = [grader_dir()]
        if self._zygote is not None and (not self._zygote.alive or self._zygote.hidden != hidden):
            self._zygote.close()
            self._zygote = None
        if self._zygote is None:
            self._zygote = Zygote(nbs.ROOT, hidden)
            self.started += 1
        return self._zygote

    def release(self, zygote: Any) -> None:
        """After a notebook: recycle the zygote for the next one, or end it."""
        if self.reuse and zygote is self._zygote:
            try:
                zygote.recycle()
                return
            except (OSError, EOFError, ValueError):
                pass
        zygote.close()
        if zygote is self._zygote:
            self._zygote = None

    def grade(self, learner: NotebookNode, assignment: str, *, seed: int | None = None,
              lang: str | None = None, only: str | None = None) -> Grading:
        return grade(learner, assignment, seed=seed, engine=self, lang=lang, only=only)

    def check(self, path: str | Path, assignment: str | None = None, lang: str | None = None,
              only: str | None = None) -> dict[str, Any]:
        return check(path, assignment, engine=self, lang=lang, only=only)

    def close(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def grade(learner: NotebookNode, assignment: str, *, seed: int | None = None, engine: Engine | None = None,
          lang: str | None = None, only: str | None = None) -> Grading:
    """Grade `learner` (a notebook) as assignment `assignment`; never raises because of the learner's code.

    With an `engine`, its warm zygote runs the learner's code; without, a zygote is started for this notebook alone.
    The feedback is in `lang`, by default the language the learner's notebook is written in (`i18n.language_of`):
    the course's cells are then that edition's (its test cells' labels translated), the code the same. With `only`,
    one exercise is graded (`only_exercise`): the cells up to its test cell run, the other tests do not.
    """
    started = time.monotonic()
    # The grader's own tensors are small (references, catalogued mistakes): one thread computes them fastest, and
    # leaves the cores to the learner's process. Several threads spin against each other on a busy machine (seen:
    # 100x slower), and the time counts against the learner's exercise.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    lang = lang or i18n.language_of(learner)
    try:
        with i18n.speaking(lang):
            return _grade(learner, assignment, seed=seed, started=started, engine=engine, lang=lang, only=only)
    finally:
        torch.set_num_threads(threads)


def _grade(learner: NotebookNode, assignment: str, *, seed: int | None, started: float,
           engine: Engine | None, lang: str, only: str | None = None) -> Grading:
    from .remote import LearnerAbort, RemoteObject, WorkerLost
    from .sandbox import Zygote, isolation

    # A new zygote starts importing torch & co. while this process loads the rest.
    zygote = engine.zygote() if engine is not None else Zygote(nbs.ROOT, [grader_dir()])
    if engine is not None:  # a zygote that grades again: what the notebook's workers all compute, computed there once
        zygote.warm(assignment)
    source = i18n.translate(nbs.read(nbs.solution_path(assignment)), lang, assignment, strict=False)
    steps = plan(source, learner)
    if only is not None:
        steps = only_exercise(steps, only)
    # Everything the grader needs is loaded before any learner code runs.
    hidden = (load_grader(assignment), load_references(assignment))
    base_ns = _grader_namespace(source)
    seed = seed if seed is not None else int(os.environ.get("ATTN_GRADE_SEED", submission_seed(learner)))
    isolated = isolation() is None
    snapshot = None if isolated else _snapshot()
    session = _Session(zygote, Budget.wall(TOTAL_TIME_LIMIT_S - (time.monotonic() - started)), engine)
    results: list[dict[str, Any]] = []
    try:
        for step in steps:
            if session.stopped or session.deadline.spent():
                step.status = "skipped"
                if step.kind == "test":
                    results.append(_result(step.exercise, step.points, None, Message.of(
                        N_("not graded: {why}"), why=session.stopped or Message.of(
                            N_("the notebook used up its {seconds} s"), seconds=f"{TOTAL_TIME_LIMIT_S:g}"))))
                continue
            if step.kind == "cell":
                session.run_cell(step)
                continue
            if missing := unavailable(step.exercise):
                results.append(_not_here(step.exercise, missing))
                step.status = "skipped"
                continue
            session.names.clear()
            session.names.update({k: v.render() for k, v in _why_missing(steps).items()})
            try:
                worker = session.ensure()
                worker.request({"op": "reset"}, deadline=worker.budget(10, session.deadline))
            except WorkerLost as exc:
                if str(exc) == "stray":
                    session.stopped = STRAY
                results.append(_result(step.exercise, step.points, None, Message.of(N_("not graded: {why}"), why=STRAY)
                                       if session.stopped else
                                       Message.of(N_("the process that runs your code could not be started again"))))
                continue
            holder: list[Checker] = []
            budget = worker.deadline = worker.budget(EXERCISE_TIME_LIMIT_S, session.deadline)

            def make_checker(exercise: str, points: float = step.points, time_limit: float | None = None,
                             **_: Any) -> Checker:
                subject = ns.get(exercise)
                context = GradingContext(seed=seed, hidden=hidden, worker=worker, budget=budget, outer=session.deadline,
                                         subject=subject if isinstance(subject, RemoteObject) else None)
                checker = Checker(exercise, step.points, context=context)
                if time_limit:
                    checker.set_time_limit(float(time_limit))
                holder.append(checker)
                return checker

            ns = dict(base_ns)
            for name in free_names(step.source) - set(ns):
                ns[name] = RemoteObject(worker, {"global": name})
            ns["Checker"] = make_checker
            override = None
            try:
                with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec(compile(step.source, f"<test cell {step.grade_id}>", "exec"), ns)  # noqa: S102
            except WorkerLost as exc:
                session.lost = True
                if str(exc) == "stray":
                    session.stopped = STRAY
                override = _lost_message(str(exc), round((worker.deadline or budget).seconds, 1))
            except LearnerAbort as exc:
                override = Message.of(N_("your code raised {error} while being checked: code that exits or interrupts "
                                         "the process scores 0 for the exercise"), error=str(exc))
            except NotImplementedError:
                override = NOT_IMPLEMENTED
            except Exception as exc:  # noqa: BLE001 - outside every check: the exercise cannot be graded
                override = Message.of(N_("the test cell stopped with {error}: {message}"), error=type(exc).__name__,
                                      message=str(exc)[:300])
            finally:
                worker.deadline = None
            checker = holder[0] if holder else None
            results.append(_result(step.exercise, step.points, checker, override))
            step.status = "ok"
    finally:
        session.close()
        if snapshot is not None:
            _verify(snapshot)
    notes: list[Any] = [] if isolated else [Message.of(N_("not isolated: {why}"), why=isolation())]
    left_out = [r for r in results if r.max_score == 0]
    if left_out:
        earnable = sum(r.max_score for r in results)
        notes.append(Message.of(N_("{exercises} cannot run on this system and is left out: graded out of {points} "
                                   "points here"), exercises=", ".join(r.id for r in left_out), points=f"{earnable:g}"))
    return Grading(assignment, results, steps, isolated, time.monotonic() - started, notes, lang)


def unavailable(exercise: str) -> str | None:
    """The module `exercise` needs that this system does not have (Triton on macOS and Windows), or None."""
    try:
        needs = course.exercise(exercise)[1].needs
    except course.UnknownName:
        return None
    return needs if needs and importlib.util.find_spec(needs) is None else None


def _not_here(exercise: str, module: str) -> ExerciseResult:
    """The result of an exercise this system cannot run: no points to earn here, and a sentence that says why."""
    return ExerciseResult(exercise, 0.0, 0.0, summary=Message.of(
        N_("not graded here: it needs {module}, which installs on Linux only (not on macOS or Windows; WSL works). Do "
           "it on a Linux machine or on Colab; here it counts for 0 of 0 points."), module=module))


# -- without isolation: the course files must come out of grading unchanged ---------------------------------------
def _course_files() -> list[Path]:
    """The files grading must leave as they were. Not the key another `attn check` may be making at this instant on a
    fresh copy (`seed.is_key_in_making`): it vanishes on its own, and putting it back would be the corruption."""
    from .seed import is_key_in_making

    return [path for folder in PROTECTED for path in (nbs.ROOT / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and not is_key_in_making(path)]


def _snapshot() -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in _course_files()}


def _verify(snapshot: dict[Path, bytes]) -> None:
    changed = []
    for path, data in snapshot.items():
        if not path.is_file() or path.read_bytes() != data:
            changed.append(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    for path in _course_files():
        if path not in snapshot:
            changed.append(path)
            path.unlink()
    if changed:
        shown = ", ".join(str(p.relative_to(nbs.ROOT)) for p in changed[:5])
        raise nbs.CourseError(
            f"grading stopped: course files changed while the learner's code ran ({shown}); they have been "
            "restored and this result is void. Grade classes as root, where the learner's code cannot reach them.")


# -- attn check ----------------------------------------------------------------------------------------------------
def load_learner_notebook(path: Path) -> NotebookNode:
    """A learner's notebook, whatever shape it is in, or a CourseError with one sentence that says why not."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise nbs.CourseError(f"{path} cannot be read ({type(exc).__name__}: {exc})") from None
    if not raw.strip():
        raise nbs.CourseError(f"{path} is empty: it is not a notebook (restore it from a backup, or take a fresh copy)")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise nbs.CourseError(f"{path} is not a readable notebook (not JSON: {exc}); restore it from a backup or git") from None
    if not isinstance(data, dict) or not ("cells" in data or "worksheets" in data):
        raise nbs.CourseError(f"{path} is not a readable notebook (JSON, but with no cells)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            nb = nbformat.reads(raw, as_version=4)
        except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds for damaged files
            raise nbs.CourseError(f"{path} is not a readable notebook ({type(exc).__name__}: {exc})") from None
    cells = []
    for cell in nb.get("cells", []) or []:
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell = NotebookNode(cell)
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = NotebookNode({})
        cell["source"] = _source(cell)
        cells.append(cell)
    nb["cells"] = cells
    return nb


def _answer_ids(nb: NotebookNode) -> set[str]:
    return {nbs.nbgrader_meta(c).get("grade_id") for c in nb.cells if isinstance(c.get("metadata"), dict)
            and nbs.nbgrader_meta(c).get("grade_id")}


def identify(path: Path, nb: NotebookNode) -> str:
    """Which assignment a learner's file is: by its name, else by the exercise cells it holds."""
    named = next((n for n in (path.stem, path.parent.name) if n in nbs.assignments()), None)
    ids = _answer_ids(nb)
    overlap = {}
    for assignment in nbs.assignments():
        source = nbs.read(nbs.solution_path(assignment))
        answers = {nbs.nbgrader_meta(c)["grade_id"] for c in source.cells if nbs.is_answer_cell(c)}
        overlap[assignment] = len(answers & ids)
    best = max(overlap, key=lambda a: overlap[a])
    if named is not None:
        if overlap[named] == 0 and overlap[best] > 0:
            raise nbs.CourseError(
                f"{path} is named like {named} but holds the exercises of {best}: grade it with "
                f"`attn check {path} --as {best}`, or give it the right name")
        return named
    if overlap[best] == 0:
        raise nbs.CourseError(
            f"{path} is not one of the course notebooks ({', '.join(nbs.assignments())}): its name matches none "
            "and it holds none of their exercise cells")
    return best


def check(path: str | Path, assignment: str | None = None, *, engine: Engine | None = None,
          lang: str | None = None, only: str | None = None) -> NotebookResult:
    """Grade the notebook at `path`: what `attn check` reports (`NotebookResult.to_json` is what `--json` prints), its
    feedback in `lang`, by default the notebook's language."""
    nb_path = nbs.find_notebook(path)
    grader_dir()  # fail early, with advice, when the hidden tests are not available
    learner = load_learner_notebook(nb_path)
    if assignment is not None and assignment not in nbs.assignments():
        raise nbs.CourseError(f"no notebook called {assignment!r} in the course (known: {', '.join(nbs.assignments())})")
    chosen = assignment or identify(nb_path, learner)
    return grade(learner, chosen, engine=engine, lang=lang or i18n.language_of(learner), only=only).result(str(path))


#: Wide characters: Chinese, Japanese and Korean ones, and full-width punctuation (a line may break before any).
_WIDE = r"\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
#: One token of a line to fill: a quoted name (“…”, kept whole), a run of spaces, one wide character, or a run of
#: anything else (a word).
_TOKEN = re.compile(rf"“[^”\n]{{0,40}}”|\s+|[{_WIDE}]|[^\s“{_WIDE}]+|“")
#: Full-width punctuation that never starts a line (it stays with the character before it).
_NO_LINE_START = set("，。、；：！？）》」』”’…")


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def fill(text: str, width: int, initial: str, subsequent: str) -> str:
    """`textwrap.fill` by display columns: a Chinese character takes two, and a line may break between two of them
    (Chinese has no spaces to break at: textwrap let a Chinese line run to about 200 columns and then split it at the
    next space, which fell inside a section's name). A quoted name stays whole; a full-width comma or stop never
    starts a line. English text is filled by textwrap, as before."""
    if _columns(text) == len(text):
        return textwrap.fill(text, width=width, initial_indent=initial, subsequent_indent=subsequent)
    lines, line = [], initial
    for token in _TOKEN.findall(text.strip()):
        if token.isspace():
            if line.strip():
                line += " "
            continue
        fits = _columns(line.rstrip() if token[0] in _NO_LINE_START else line) + _columns(token) <= width
        if fits or not line.strip() or token[0] in _NO_LINE_START:
            line = (line.rstrip() if token[0] in _NO_LINE_START else line) + token
        else:
            lines.append(line.rstrip())
            line = subsequent + token
    lines.append(line.rstrip())
    return "\n".join(lines)


def render(result: NotebookResult, verbose: bool = False) -> str:
    """A plain-text report of a notebook's result for the terminal, in its language.

    Under each failed exercise: the verdict (the likely mistake and where the notebook explains it), then the few
    checks that show it. With `verbose`, every check of every exercise follows, passed ones included.
    """
    _ = i18n._
    with i18n.speaking(result.lang):
        lines = [_("{notebook}: {score} / {max_score} points").format(
            notebook=result.notebook, score=f"{result.score:g}", max_score=f"{result.max_score:g}"), ""]
        for ex in result.exercises:
            mark = _("PASS") if ex.passed else _("SKIP") if ex.max_score == 0 else _("FAIL")
            lines.append(f"  {mark:<4}  {ex.id:<32} {ex.score:>5g} / {ex.max_score:g}")
            if not ex.passed:
                feedback = replace(ex, lead=tuple(i for i, c in enumerate(ex.checks) if not c.passed)) \
                    if verbose and ex.lead else ex  # every failed check follows anyway: no "and N more" line
                for line in feedback.feedback().splitlines():
                    lines.append(fill(line, 110, " " * 8, " " * 10))
            if verbose and ex.checks:
                lines.append(" " * 8 + _("every check:"))
                for c in ex.checks:
                    tick = "ok " if c.passed else "x  "
                    hidden = " " + _("(hidden)") if c.hidden else ""
                    message = say(c.message)
                    text = f"{tick}[{say(c.name)}]{hidden}" + ("" if c.passed and not message else f" {message}")
                    lines.append(fill(text, 110, " " * 10, " " * 15))
        for note in result.notes:
            lines += ["", _("Note: {note} (see docs/instructors.md, 'Grading a class').").format(note=say(note))]
    return "\n".join(lines)
