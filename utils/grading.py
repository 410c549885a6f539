"""Grading harness: named checks that teach, partial credit that nbgrader reads, and the hook for hidden tests.

A graded test cell looks like this::

    check = Checker("softmax", points=2)
    with check("rows sum to one"):
        check.close(softmax(x).sum(-1), torch.ones(3), "row sums")
    ### BEGIN HIDDEN TESTS
    check.hidden("01_attention_intuition", softmax)
    ### END HIDDEN TESTS
    check.score()

Every ``with check(...)`` block is one check: an exception inside it (the learner's
``NotImplementedError``, a wrong shape, an infinite loop cut off by the time limit, a
warning) fails that check only, so a broken exercise never stops the rest of the grading.
``check.score()`` is the cell's last expression: a float that nbgrader takes as partial
credit, rendered in JupyterLab as a table of what passed and what to fix.

The hidden tests themselves (reference tensors, reference implementations, the catalogue
of known mistakes) are not in this package: they live in the course repository's
``grader/`` folder, which is never released to students.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import itertools
import json
import math
import os
import re
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from . import course, speech
from .diagnose import diagnose
from .failures import CheckFailure, CheckTimeout, Mistake, diagnosed, explained, translate_with
from .i18n import N_, _, set_language  # noqa: F401 - set_language: the notebooks' setup cells import it from here
from .notebooks import GRADER_ENV, grader_dir  # noqa: F401 - where the hidden tests are (no torch there)
from .results import LEAD_CHECKS, RESULT_MIME, CheckOutcome, ExerciseResult, Message, Where, Words, kind, later

translate_with(later)  # the mistakes' and diagnoses' words, said in the reader's language when shown
with contextlib.suppress(FileNotFoundError):  # beside the hidden tests (a clone, the instructor's side): their words
    # too, in a process that says results it did not grade itself (attn autograde's nbgrader pass, after its pool)
    speech.add_grader_catalogue(grader_dir() / "locale")

#: Default tolerance for comparing float32 tensors, stated once for the whole course.
TOLERANCE: dict[str, float] = {"rtol": 1e-4, "atol": 1e-5}
#: A correct answer keeps the floating dtype it is given (a float32 constant or buffer, a `.float()`, a trip through
#: numpy does not): the dtypes graders try besides float32, and the tolerance float16 needs on any hidden draw (over
#: 3,000 draws of 01's and 02's checks the course's answers needed at most 0.010, additive_scores; the check is about the
#: dtype, and wrong values fail the float32 checks).
KEPT_DTYPES = (torch.float64, torch.float16)
HALF_TOLERANCE: dict[str, float] = {"rtol": 5e-2, "atol": 5e-2}
#: Seconds one check may run before it is stopped (catches infinite loops); $ATTN_CHECK_TIME_LIMIT overrides.
CHECK_TIME_LIMIT_S = float(os.environ.get("ATTN_CHECK_TIME_LIMIT", "20"))
#: After one check of an exercise timed out, its remaining checks get this long (the loop is likely everywhere).
AFTER_TIMEOUT_S = 1.0
#: The diagnosis of an answer that changes between identical calls (only the grader can make the call again: see
#: `CheckContext.varies`), with how many entries differed and of how many.
VARIES = N_("your output changes from one call to the next with the same inputs ({changed} of {total} entries "
            "differed when the same call was made again): something random runs where the result must be "
            "deterministic — dropout where none belongs or in eval mode (an nn.Dropout module follows .eval(); "
            "F.dropout needs training=self.training), or torch.rand/randn in the computation.")
#: The diagnosis of an answer that changes between identical calls even with the random number generator in the same
#: state: not randomness, which the same seed repeats (06 and 07's learners met it as a Triton launch grid that left
#: output blocks unwritten, which `VARIES` had called dropout).
UNSEEDED = N_("your output changes from one call to the next with the same inputs, even with the random number "
              "generator reset to the same state ({changed} of {total} entries differed): so it is not randomness but "
              "memory your code never wrote — a tensor from torch.empty (or empty_like, new_empty) that is not filled "
              "everywhere, e.g. a loop or a kernel's launch grid that leaves some rows or blocks out — or state kept "
              "from one call to the next (a counter, a global).")
#: What an exercise that is not written yet says.
NOT_IMPLEMENTED = Message.of(N_("not implemented yet — replace `raise NotImplementedError()` with your code, then rerun "
                                "this cell."))
#: What a comparison calls the tensor it compares when the test cell does not say (translated where it is shown).
OUTPUT = N_("output")




@dataclass
class CheckResult:
    """The outcome of one named check."""

    name: Words
    weight: float
    hidden: bool
    passed: bool = False
    message: Words = ""
    mistake: Mistake | None = None
    failure: CheckFailure | None = None  # a failed comparison, whose name is settled when the exercise is scored


class Score(float):
    """A score that nbgrader reads as partial credit (``text/plain`` is the number) and people read as a table:
    `result` is the exercise's `ExerciseResult`, `report` its words in the language now spoken."""

    result: ExerciseResult

    def __new__(cls, value: float, result: ExerciseResult) -> Score:
        obj = super().__new__(cls, value)
        obj.result = result
        return obj

    @property
    def report(self) -> dict[str, Any]:
        return self.result.report()

    def __repr__(self) -> str:
        return repr(float(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # Keys sorted all the way down, as nbformat stores them: a freshly run cell then compares equal (nbval).
        report = self.report
        return {"text/html": report_html(report), RESULT_MIME: json.loads(json.dumps(report, sort_keys=True))}


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise CheckTimeout in the main thread after `seconds` (no-op where SIGALRM is unavailable)."""
    import threading

    usable = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _alarm(signum: int, frame: Any) -> None:
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _undefined_because(name: str | None) -> Message | None:
    """In a live kernel: why `name` is undefined when the cell that defines it does not compile (a SyntaxError
    would otherwise surface here as a bare NameError), with the line to fix. None when that is not the reason."""
    if not name:
        return None
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None)
    if not history:
        return None
    defines = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.MULTILINE)
    for source in reversed(history):
        if isinstance(source, str) and defines.search(source):
            try:
                compile(source, "<cell>", "exec")
            except SyntaxError as exc:  # IndentationError and TabError too
                if exc.text and exc.text.strip():
                    return later("`{name}` is not defined because its cell has a {error} on line {line}: `{code}` ({why}) "
                             "— fix it and run that cell again, then this one.").format(
                        name=name, error=type(exc).__name__, line=exc.lineno, code=exc.text.strip(), why=exc.msg)
                return later("`{name}` is not defined because its cell has a {error} on line {line} ({why}) — fix it and "
                         "run that cell again, then this one.").format(
                    name=name, error=type(exc).__name__, line=exc.lineno, why=exc.msg)
            return None  # the latest cell that defines it compiles: some other reason
    return None


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def failure_signature(exc: BaseException) -> tuple[str, tuple[str, ...]] | None:
    """How a check failed, whatever language it is said in: the exception's kind and the numbers its message holds (a
    shape, a count, the values it got); None when the message holds no number (too common to tell mistakes apart)."""
    if isinstance(exc, CheckFailure):
        kind, text = "CheckFailure", str(exc.detail)
    else:
        kind, text = str(getattr(exc, "learner_type", type(exc).__name__)), str(exc)
    numbers = tuple(_NUMBER.findall(text.strip().splitlines()[0] if text.strip() else ""))
    return (kind, numbers) if numbers else None


def _where(exc: BaseException) -> Words:
    """The learner's line that raised `exc`, as ' (in f, line N: `code`)', or '' when it is not theirs."""
    reported = getattr(exc, "learner_where", None)  # raised in the learner's process, located there
    if isinstance(reported, Where):
        return reported.said()
    ours = (str(Path(__file__).resolve().parent), os.sep + "torch" + os.sep, "grader")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(s in f.filename for s in ours)]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return Where(frame.name, frame.lineno, code).said() if code else ""


class CheckContext:
    """Where a `Checker` runs: everything that differs between the learner's kernel and the grader, in one object.

    This class is the learner's kernel (a test cell run as written): every rerun sees the same inputs, an alarm
    stops an endless loop, hidden tests are read from grader/, and under nbgrader's Validate a failure is also said
    on stderr. While grading, `utils.engine.checking.GradingContext` replaces it: seeds the learner cannot predict, the
    grader's deadline instead of an alarm, hidden tests loaded before any learner code ran, the grader's parts
    standing in for earlier exercises around each visible check, and a second call to see whether an output varies.
    Subclass it, not `Checker`, to run checks somewhere new.
    """

    def seed(self, checker: Checker, index: int) -> int:
        """The random seed of the exercise's `index`-th check."""
        return index + 1

    def time_limit(self, checker: Checker, seconds: float) -> contextlib.AbstractContextManager:
        """Stops one check after `seconds` (by raising CheckTimeout inside it)."""
        return _time_limit(seconds)

    def set_time_limit(self, checker: Checker, seconds: float) -> None:
        """A test cell asks for more time for the whole exercise: only the grader keeps such a clock."""

    def around(self, checker: Checker, name: str) -> contextlib.AbstractContextManager:
        """Entered around the body of each check, inside it (what it raises fails that check)."""
        return contextlib.nullcontext()

    def hidden_tests(self, checker: Checker, notebook: str) -> tuple[Callable[..., Any], dict[str, torch.Tensor]]:
        """The grader's hidden tests for `checker.exercise`, and the reference tensors they compare with."""
        module = load_grader(notebook)
        tests = getattr(module, "HIDDEN_TESTS", {})
        if checker.exercise not in tests:
            raise KeyError(f"grader/{notebook}.py has no hidden tests for {checker.exercise!r}")
        return tests[checker.exercise], load_references(notebook)

    def varies(self, checker: Checker, returned: torch.Tensor) -> Message | None:
        """A diagnosis (`VARIES`) when the wrong output `returned` changes from one call to the next with the same
        inputs: only the grader can make the call again."""
        return None

    def visible_mistakes(self, checker: Checker, check: int, comparison: int, actual: torch.Tensor,
                         expected: torch.Tensor) -> dict[Mistake, torch.Tensor]:
        """What each catalogued mistake outputs at this comparison of a visible check (the `check`-th check's
        `comparison`-th `close`): the learner's kernel has those values (`utils.visible`), not the catalogue."""
        from . import visible

        notebook = _notebook_of(checker)
        return visible.mistakes(notebook, (checker.exercise, check, comparison), expected) if notebook else {}

    def visible_failure(self, checker: Checker, check: int, signature: tuple[str, tuple[str, ...]]) -> Mistake | None:
        """The one catalogued mistake that fails the `check`-th visible check this way (`failure_signature`), if one
        does (`utils.visible`)."""
        from . import visible

        notebook = _notebook_of(checker)
        return visible.failure(notebook, (checker.exercise, check, 0), signature) if notebook else None

    def announce(self, checker: Checker, result: ExerciseResult) -> None:
        """Under nbgrader's Validate button, say what failed on stderr: the dialog shows stderr, not tables."""
        if os.environ.get("NBGRADER_VALIDATING") and not result.passed:
            # The dialog shows the cell's source, then this: its first line says it all (points and verdict).
            first, _sep, rest = result.feedback().partition("\n")
            print(f"{_points(result.report())} — {first}" + (f"\n{rest}" if rest else ""), file=sys.stderr)


def _notebook_of(checker: Checker) -> str | None:
    """The course notebook of the checker's exercise (None for an exercise the registry does not know)."""
    try:
        return course.exercise(checker.exercise)[0].id
    except course.UnknownName:
        return None


LIVE = CheckContext()


class Checker:
    """Runs the named checks of one exercise and turns them into a score with feedback.

    Where it runs (the learner's kernel, or the grader) is its `context` (`CheckContext`); the checks are the same.
    """

    def __init__(self, exercise: str, points: float | None = None, time_limit: float | None = None, *,
                 context: CheckContext | None = None) -> None:
        if points is None:  # the course registry's points (utils/course.py), as nbgrader's metadata has them
            try:
                points = course.exercise(exercise)[1].points
            except course.UnknownName as exc:
                raise ValueError(f"{exc}: give Checker({exercise!r}, points=...)") from None
        if points <= 0:
            raise ValueError(f"points must be positive, got {points}")
        self.exercise = exercise
        self.context = context or LIVE
        self.time_limit = time_limit  # seconds for the whole exercise while grading (the grader enforces it)
        self.points = float(points)
        self.results: list[CheckResult] = []
        self.not_implemented = False
        self._hidden = False
        self._graded = False
        self._timed_out = False
        # Every comparison that offered catalogued mistakes: (those offered, those the answer reproduced).
        self._evidence: list[tuple[frozenset[Mistake], frozenset[Mistake]]] = []
        self._pending: CheckFailure | None = None  # the first failed case of the running check
        self._score: Score | None = None  # the last score, and how many checks it counted
        self._scored = 0
        self._closes = 0  # comparisons (`close`) made so far in the running check

    # -- running checks -------------------------------------------------------------------
    @contextlib.contextmanager
    def __call__(self, name: str, weight: float = 1.0) -> Iterator[None]:
        """Run the body as one check named `name`; any exception fails this check only. The name is shown in the
        learner's language (a grader's label is in the catalogue)."""
        result = CheckResult(name=later(name), weight=weight, hidden=self._hidden)
        self._pending = None
        self._closes = 0
        failed_with: BaseException | None = None  # what failed the check, for `utils.visible` to recognise
        try:
            limit = AFTER_TIMEOUT_S if self._timed_out else CHECK_TIME_LIMIT_S
            with self.context.time_limit(self, limit), torch.random.fork_rng(devices=[]):
                # A warning printed to stderr would zero the whole cell in nbgrader: record it instead.
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.manual_seed(self.context.seed(self, len(self.results)))
                    with self.context.around(self, name):
                        yield
                    if self._pending is not None:  # a case failed and the others ran: the check fails with it
                        raise self._pending
            result.passed = True
            if caught:
                result.message = later("passed, with a warning worth reading: {warning}").format(warning=caught[0].message)
        except NotImplementedError as exc:
            self.not_implemented = True
            result.message = (later("not implemented yet: {detail} — replace `raise NotImplementedError()` with your "
                                "code.").format(detail=exc) if str(exc) else
                              later("not implemented yet — replace `raise NotImplementedError()` with your code."))
        except CheckFailure as exc:
            failed_with = exc
            result.failure = exc
            result.mistake = exc.mistake
            result.message = explained(exc.detail, exc.mistake, exc.diagnosis)  # provisional: see `settle`
        except CheckTimeout:
            self._timed_out = True
            result.message = later("stopped after {seconds} s — is there a loop that never ends, or a Python loop over "
                               "every element where a tensor operation would do?").format(seconds=f"{limit:g}")
        except AssertionError as exc:
            failed_with = exc
            result.message = (later("assertion failed: {message}{where}").format(message=exc, where=_where(exc)) if str(exc)
                              else later("assertion failed{where}").format(where=_where(exc)))
        except MemoryError as exc:
            result.message = later("ran out of memory{where} — is something of size L×L×L being built?").format(
                where=_where(exc))
        except NameError as exc:
            said = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], Message) else None
            result.message = said or (str(exc) if "`" in str(exc) else None) or (
                _undefined_because(getattr(exc, "name", None))
                or later("your code raised {error}: {message}{where}").format(error="NameError", message=exc,
                                                                         where=_where(exc)))
        except Exception as exc:  # noqa: BLE001 - a learner's exception costs this check only
            failed_with = exc
            kind = getattr(exc, "learner_type", type(exc).__name__)
            text = str(exc).removeprefix(f"{kind}: ")
            result.message = later("your code raised {error}: {message}{where}").format(error=kind, message=text,
                                                                                   where=_where(exc))
        finally:
            self._pending = None
        if failed_with is not None and not self._hidden and not (result.failure and result.failure.candidates):
            self._recognise(result, failed_with)
        self.results.append(result)

    def _recognise(self, result: CheckResult, failed_with: BaseException) -> None:
        """A visible check that failed the way one catalogued mistake, and only one, fails it here (`utils.visible`):
        that mistake is the check's candidate, as a comparison that reproduced it would make it."""
        signature = failure_signature(failed_with)
        named = self.context.visible_failure(self, len(self.results), signature) if signature else None
        if named is None:
            return
        if result.failure is None:
            result.failure = CheckFailure(result.message, candidates=(named,))
        else:
            result.failure.candidates, result.failure.mistake = (named,), named
        result.mistake = named

    @contextlib.contextmanager
    def case(self) -> Iterator[None]:
        """One input of a check that tries several: a failed comparison here is kept and the next input still runs.

        The check then fails with its first failed case, and every case's comparisons count as evidence, so a
        catalogued mistake is named only when the answer reproduces it on every input the check tried::

            with check("matches the reference on hidden sizes"):
                for L in (13, 7, 1):
                    with check.case():
                        check.close(causal_mask(L), expected[L], mistakes={...})

        Anything but a failed comparison (the learner's exception, a time-out) still ends the check at once.
        """
        try:
            yield
        except CheckFailure as exc:
            if self._pending is None:
                self._pending = exc

    @property
    def running_hidden(self) -> bool:
        """Are the grader's hidden checks running (rather than the test cell's visible ones)?"""
        return self._hidden

    def set_time_limit(self, seconds: float) -> None:
        """Give the whole exercise `seconds` while grading (a slow but correct answer needs it)."""
        self.context.set_time_limit(self, seconds)

    def hidden(self, *objects: Any) -> None:
        """Run the grader's hidden checks for this exercise on the learner's `objects` (`check.hidden(softmax)`; the
        notebook comes from the course registry; `check.hidden("01_attention_intuition", softmax)` names it)."""
        if objects and isinstance(objects[0], str):
            notebook, objects = objects[0], objects[1:]
        else:
            notebook = course.exercise(self.exercise)[0].id
        tests, references = self.context.hidden_tests(self, notebook)
        self._hidden = True
        self._graded = True
        tests(self, references, *objects)

    # -- assertions used inside checks ----------------------------------------------------
    def close(
        self,
        actual: Any,
        expected: torch.Tensor,
        what: str = OUTPUT,
        mistakes: Mapping[Mistake, torch.Tensor] | Callable[[], Mapping[Mistake, torch.Tensor]] | None = None,
        **tolerance: float,
    ) -> None:
        """Fail unless `actual` is a tensor of `expected`'s shape whose values match within tolerance.

        `mistakes` maps catalogued mistakes to the output each would give here; a wrong answer that reproduces one
        is named. Pass a function that returns the mapping when computing it is slow: it is called only for a
        wrong answer. `what` is shown in the learner's language (a grader's is in the catalogue).
        """
        tol = {**TOLERANCE, **tolerance}
        what = later(what)
        comparison = self._closes  # this comparison's place in the running check (utils.visible keys it so)
        self._closes += 1
        if isinstance(actual, tuple) and len(actual) == 2 and isinstance(actual[0], torch.Tensor):
            raise CheckFailure(later("{what} should be a single tensor, got a tuple of two — return only the "
                                 "{what}.").format(what=what))
        if not isinstance(actual, torch.Tensor):
            raise CheckFailure(later("{what} should be a torch.Tensor, got {type}.").format(what=what,
                                                                                         type=type_name(actual)))
        returned, actual = actual, actual.detach()
        if mistakes is None and not self._hidden:  # a visible check: what the catalogue's mistakes give here
            mistakes = self.context.visible_mistakes(self, len(self.results), comparison, actual, expected) or None
        if callable(mistakes):
            right = (actual.shape == expected.shape and actual.dtype == expected.dtype
                     and bool(torch.isclose(actual, expected, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True).all()))
            mistakes = None if right else mistakes()
        offered = dict(mistakes or {})
        matched = tuple(m for m in offered if identify(actual, {m: offered[m]}, **tol))
        if offered:
            self._evidence.append((frozenset(offered), frozenset(matched)))

        def fail(message: str, wrong_values: bool = False) -> None:
            # The generic diagnosis (utils.diagnose never quotes an expected value) is what the learner reads when
            # no catalogued mistake survives: none matched here, or another comparison ruled out those that did.
            # Randomness first: a random answer can look like a simple transformation on a small input by chance.
            varied = self.context.varies(self, returned)
            found = varied or diagnose(actual, expected, rtol=tol["rtol"], atol=tol["atol"])
            raise CheckFailure(message, candidates=matched, diagnosis=found, wrong_values=wrong_values,
                               varies=bool(varied))

        if actual.shape != expected.shape:
            fail(later("{what} has shape {got}, expected {want}.").format(what=what, got=tuple(actual.shape),
                                                                      want=tuple(expected.shape)))
        if actual.dtype != expected.dtype:
            fail(later("{what} has dtype {got}, expected {want}.").format(what=what, got=actual.dtype, want=expected.dtype))
        bad_nan = torch.isnan(actual) & ~torch.isnan(expected)
        if bad_nan.any():
            fail(later("{what} contains NaN in {n} of {total} entries (inf − inf or 0/0 somewhere: an overflow, or a row "
                   "with nothing to attend to?).").format(what=what, n=int(bad_nan.sum()), total=actual.numel()))
        ok = torch.isclose(actual, expected, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
        if not bool(ok.all()):
            diff = (actual.double() - expected.double()).abs().nan_to_num(nan=math.inf)  # .double(): bool masks too
            values = dict(what=what, n=int((~ok).sum()), total=ok.numel(), largest=f"{float(diff.max()):.3g}")
            if not self._hidden and expected.numel() <= 16:
                message = later("{what} differs from the expected values in {n} of {total} entries (largest difference "
                            "{largest}). Got {got}, expected {want}.").format(**values, got=_fmt(actual),
                                                                                want=_fmt(expected))
            else:
                message = later("{what} differs from the expected values in {n} of {total} entries (largest difference "
                            "{largest}).").format(**values)
            fail(message, wrong_values=True)

    def shape(self, actual: Any, expected: tuple[int, ...], what: str = OUTPUT) -> None:
        """Fail unless `actual` is a tensor of shape `expected`."""
        what = later(what)
        if not isinstance(actual, torch.Tensor):
            raise CheckFailure(later("{what} should be a torch.Tensor, got {type}.").format(what=what,
                                                                                         type=type_name(actual)))
        if tuple(actual.shape) != tuple(expected):
            raise CheckFailure(later("{what} has shape {got}, expected {want}.").format(what=what, got=tuple(actual.shape),
                                                                                    want=tuple(expected)))

    def batched(self, fn: Callable[..., Any], args: tuple[Any, ...], batched: tuple[bool, ...], lead: int,
                expected: torch.Tensor, what: str, mistake: Mistake,
                mistakes: Mapping[Mistake, torch.Tensor] | Callable[[], Mapping[Mistake, torch.Tensor]] | None = None,
                **tolerance: float) -> Any:
        """`fn(*args)` compared with `expected`, where the args marked in `batched` carry `lead` leading batch dims.

        When the call raises or is wrong, yet every batch element passed alone gives its part of `expected`, the
        code handles one example but not leading dims (a `.T`, a `transpose(0, 1)`, a positive dim or a missing
        unsqueeze): that is `mistake`, named. Otherwise the answer is compared as `close` would.
        """
        tol = {**TOLERANCE, **tolerance}
        try:
            out = fn(*args)
        except (NotImplementedError, CheckTimeout, CheckFailure):
            raise
        except Exception as exc:  # noqa: BLE001 - asked again one example at a time below
            if _right_one_at_a_time(fn, args, batched, lead, expected, tol):
                kind = getattr(exc, "learner_type", type(exc).__name__)
                raise CheckFailure(later("{what} raised {error} with {lead} leading batch dim(s), although each example "
                                     "alone is right.").format(what=later(what), error=kind, lead=lead), mistake) from None
            raise
        right = (isinstance(out, torch.Tensor) and out.shape == expected.shape and out.dtype == expected.dtype
                 and bool(torch.isclose(out.detach(), expected, rtol=tol["rtol"], atol=tol["atol"]).all()))
        if not right and _right_one_at_a_time(fn, args, batched, lead, expected, tol):
            raise CheckFailure(later("{what} is wrong with {lead} leading batch dim(s), although each example alone is "
                                 "right.").format(what=later(what), lead=lead), mistake)
        self.close(out, expected, what, mistakes, **tolerance)
        return out

    def gradients(self, fn: Callable[..., Any], inputs: Mapping[str, torch.Tensor], reference: Callable[..., Any],
                  what: str, **tolerance: float) -> None:
        """Fail unless gradients flow from `fn`'s output(s) back to each input as they do through `reference`.

        Both are called on fresh leaf copies of `inputs` (passed positionally, in order); every tensor they return is
        weighted by fixed random numbers and summed, and the gradients of that sum are compared. An input that
        `reference` gives a gradient and `fn` gives none (or only zeros) is cut off from autograd's graph, which is
        named; a gradient that differs while the output itself is right points at a step autograd cannot follow.
        """
        tol = {**TOLERANCE, **tolerance}

        def run(f: Callable[..., Any]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor | None]]:
            leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs.values()]
            result = f(*leaves)
            outs = [r for r in (result if isinstance(result, (tuple, list)) else (result,))
                    if isinstance(r, torch.Tensor) and r.is_floating_point()]
            live = [o for o in outs if o.requires_grad]
            if not live:
                return outs, live, [None] * len(leaves)
            g = torch.Generator().manual_seed(0)
            loss = sum((o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum() for o in live)
            wants = [leaf for leaf in leaves if leaf.requires_grad]
            grads = iter(torch.autograd.grad(loss, wants, allow_unused=True))
            return outs, live, [next(grads) if leaf.requires_grad else None for leaf in leaves]

        ref_outs, _unused, ref_grads = run(reference)
        outs, live, grads = run(fn)
        what = later(what)
        if not outs:
            raise CheckFailure(later("{what} returned no floating-point tensor to take a gradient through.").format(
                what=what))
        if not live:
            raise CheckFailure(later("no gradient reaches any input of {what}: its output does not require grad, so it is "
                                 "cut off from autograd's graph: look for a .detach(), .data, a torch.no_grad() block, "
                                 "or a trip through numpy, .item() or .tolist() on the way.").format(what=what))
        names = list(inputs)
        for name, grad, ref in zip(names, grads, ref_grads):
            if ref is not None and bool(ref.abs().sum() > 0) and (grad is None or not bool(grad.abs().sum() > 0)):
                raise CheckFailure(later("no gradient reaches {name} through {what}, although the output depends on it: "
                                     "the path from {name} is cut off from autograd's graph: look for a .detach(), "
                                     ".data, a torch.no_grad() block, or a trip through numpy, .item() or .tolist() on "
                                     "the way.").format(name=name, what=what))
        same_output = len(outs) == len(ref_outs) and all(
            o.shape == r.shape and bool(torch.isclose(o.detach(), r.detach(), rtol=tol["rtol"], atol=tol["atol"],
                                                      equal_nan=True).all()) for o, r in zip(outs, ref_outs))
        if not same_output:
            return  # the output's own checks say what is wrong with it; its gradients would only repeat that
        for name, grad, ref in zip(names, grads, ref_grads):
            if ref is not None and grad is not None and not bool(
                    torch.isclose(grad, ref, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10, equal_nan=True).all()):
                raise CheckFailure(later("the gradient with respect to {name} through {what} differs from autograd's "
                                     "through the reference, although the output is right: a step autograd cannot "
                                     "follow (an in-place edit, a value detached in part, or a custom "
                                     "backward).").format(name=name, what=what))

    def equal(self, actual: Any, expected: Any, message: str, mistakes: Mapping[Mistake, Any] | None = None,
              diagnosis: str | None = None) -> None:
        """Fail with `message` unless `actual == expected`: `close` for exact values (counts, tuples of counts).

        `mistakes` maps catalogued mistakes to the value each gives here. As with `close`, a mistake is named only if
        every comparison of the exercise that offered it found it: a count that equals one mistake's on a small case
        by coincidence is not called that when another case rules it out. Else the generic `diagnosis` is shown.
        The message and the diagnosis are shown in the learner's language (a grader's are in the catalogue)."""
        offered = {m: v for m, v in (mistakes or {}).items() if m is not None}
        matched = tuple(m for m, v in offered.items() if _same_value(v, actual))
        if offered:
            self._evidence.append((frozenset(offered), frozenset(matched)))
        if not _same_value(actual, expected):
            raise CheckFailure(later(message), candidates=matched, diagnosis=later(diagnosis) if diagnosis else diagnosis)

    def true(self, condition: Any, message: str, mistake: Mistake | None = None, diagnosis: str | None = None) -> None:
        """Fail with `message` (naming `mistake`, if given, else the generic `diagnosis`) unless `condition` holds."""
        if not bool(condition):
            raise CheckFailure(later(message), mistake, diagnosis=later(diagnosis) if diagnosis else diagnosis)

    # -- the result ----------------------------------------------------------------------
    def settle(self) -> None:
        """Name each failed check's mistake now that every comparison of the exercise has run.

        A wrong name is worse than none: a catalogued mistake is named only if no comparison that offered it found
        an answer it does not explain. So `softmax(scores * mask)`, whose fully masked rows happen to look like a
        `-1e9` fill, is not called that once the full output was compared with what a `-1e9` fill gives. A known
        mistake is explained once per exercise and referred to after that.
        """
        refuted = {m for offered, matched in self._evidence for m in offered - matched}
        named: set[Mistake] = set()
        for r in self.results:
            if r.passed or r.failure is None:
                continue
            exc = r.failure
            r.mistake = next((m for m in exc.candidates if m not in refuted), None)
            if r.mistake is not None and r.mistake in named:
                # Explained once per exercise: the feedback should read as advice, not as a wall of repeats.
                r.message = later("{detail} (the same known mistake, {name})").format(detail=exc.detail,
                                                                                  name=r.mistake.title())
            else:
                r.message = explained(exc.detail, r.mistake, exc.diagnosis)
            if r.mistake is not None:
                named.add(r.mistake)

    def score(self) -> Score:
        """The points earned, as a float nbgrader reads and a report JupyterLab shows (`Score.result`: the exercise's
        `ExerciseResult`). Computed once: asked again without a new check, it is the same object."""
        if self._score is not None and self._scored == len(self.results):
            return self._score
        self.settle()
        total = sum(r.weight for r in self.results)
        earned = sum(r.weight for r in self.results if r.passed)
        value = 0.0 if self.not_implemented or total == 0 else round(self.points * earned / total, 2)
        failed = [r for r in self.results if not r.passed]
        cause = _cause(self.results)
        checks = tuple(CheckOutcome(r.name, r.passed, r.hidden, r.message, "" if r.passed else _line(r, cause))
                       for r in self.results)
        verdict, lead, summary = None, None, ""
        if not self.results:
            summary = Message.of(N_("no checks ran."))
        elif self.not_implemented:
            summary = NOT_IMPLEMENTED
        elif failed:
            verdict, lead = _verdict(self.results)
        else:
            summary = Message.of(N_("all {n} checks passed."), n=len(self.results))
        named = next((r.mistake for r in failed if r.mistake is not None), None)
        result = ExerciseResult(
            self.exercise, value, self.points, checks, summary=summary, verdict=verdict,
            lead=tuple(lead) if lead is not None else None,
            mistake=named.name if named else None, section=named.section if named else None,
            implemented=not self.not_implemented, graded=self._graded)
        self.context.announce(self, result)
        self._score, self._scored = Score(value, result), len(self.results)
        return self._score


def _plain(x: Any) -> Any:
    """`x` as built-in values (numbers, strings, tuples and lists of them), numpy scalars unwrapped; TypeError for
    anything else, so that an object whose __eq__ says yes to everything never equals a count."""
    if type(x) in (int, float, bool, str):
        return x
    if type(x) in (tuple, list):
        return type(x)(_plain(v) for v in x)
    if type(x).__module__ == "numpy" and getattr(x, "ndim", None) == 0:
        return _plain(x.item())
    raise TypeError(type(x).__name__)


def _same_value(a: Any, b: Any) -> bool:
    """a == b for plain values (see `_plain`); False for anything else."""
    try:
        return bool(_plain(a) == _plain(b))
    except TypeError:
        return False


def _diagnosis_of(r: CheckResult) -> Words | None:
    return None if r.passed or r.failure is None or r.mistake is not None else r.failure.diagnosis


def _cause(results: list[CheckResult]) -> Mistake | Words | None:
    """The likely cause of an exercise's failures: the settled catalogued mistake, else the generic diagnosis that the
    most failed checks share, else None."""
    failed = [r for r in results if not r.passed]
    named = next((r.mistake for r in failed if r.mistake is not None), None)
    if named is not None:
        return named
    counts: dict[Words, int] = {}
    for r in failed:
        d = _diagnosis_of(r)
        if d:
            counts[d] = counts.get(d, 0) + 1
    best = max(counts, key=lambda d: counts[d]) if counts else None  # the first of equals: dicts keep order
    # A random answer makes every other diagnosis a coincidence (dropout that happened to drop nothing looks like
    # "multiplied by 1/(1 - p)"): where one check saw the answer change, that is the verdict.
    return next((_diagnosis_of(r) for r in failed if _diagnosis_of(r)
                 and (r.failure.varies or kind(_diagnosis_of(r)) in (VARIES, UNSEEDED))), best)


def _said(cause: Mistake | Words | None) -> Words | None:
    """The verdict as the learner reads it: the mistake described, or 'Diagnosis: ...'."""
    if cause is None:
        return None
    return cause.describe() if isinstance(cause, Mistake) else diagnosed(cause)


def _verdict(results: list[CheckResult]) -> tuple[Words | None, list[int]]:
    """The likely cause of an exercise's failures, and the indices of the (at most LEAD_CHECKS) checks that show it.

    The verdict is the settled catalogued mistake (named with the section that explains it), else the generic
    diagnosis that the most failed checks share, else None. The checks shown with it are those that prove it first,
    then the other failed ones, in the course's order.
    """
    failed = [i for i, r in enumerate(results) if not r.passed]
    cause = _cause(results)
    if isinstance(cause, Mistake):
        proving = [i for i in failed if results[i].mistake == cause]
    else:
        proving = [i for i in failed if cause is not None and _diagnosis_of(results[i]) == cause]
    order = proving + [i for i in failed if i not in proving]
    if not isinstance(cause, Mistake):
        # A failed property ("a key the mask forbids gets exactly zero weight") says more than a count of wrong
        # entries: without a name, one is always among the checks shown.
        props = [i for i in order if results[i].failure is not None and results[i].failure.diagnosis is None
                 and not results[i].failure.wrong_values]
        if props and props[0] not in order[:LEAD_CHECKS]:
            order = order[:LEAD_CHECKS - 1] + [props[0]]
    return _said(cause), order[:LEAD_CHECKS]


def _line(r: CheckResult, cause: Mistake | Words | None) -> Words:
    """A failed check's message under the verdict: what was wrong, without repeating the verdict's explanation."""
    exc = r.failure
    if exc is None:
        return r.message
    if r.mistake is not None:
        return exc.detail if r.mistake == cause else explained(exc.detail, r.mistake, None)
    if exc.diagnosis and exc.diagnosis != cause:
        return explained(exc.detail, None, exc.diagnosis)
    return exc.detail


_SKIPPED_FOR: set[str] = set()
#: What a demo says instead of its output while an exercise it calls is unfinished, or raised (`requires`).
DEMO_UNFINISHED = N_("(finish the exercise {names} above to see this cell's output, then run this cell again)")
DEMO_STOPPED = N_("(this cell calls {names} above and stopped with {error}: {message}{where} — once the test cell "
                  "under that exercise passes, run this cell again)")


def _open_figures() -> set[int]:
    """The numbers of matplotlib's open figures (none where pyplot was never imported: nothing to draw)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    return set(pyplot.get_fignums()) if pyplot is not None else set()


def _close_figures_but(kept: set[int]) -> None:
    """Close every figure opened since `kept` was taken: a demo that stopped shows no empty axes."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    for number in _open_figures() - kept:
        pyplot.close(number)


def _demo_error(exc: Exception) -> tuple[str, str, str]:
    """(type, first line of the message, ' (in f, line N: `code`)') of what stopped a demo: the innermost line of
    notebook code (the learner's function, or the demo's own line), never PyTorch's or the course package's."""
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else ""
    message = message if len(message) <= 200 else message[:199] + "…"
    skip = (str(Path(__file__).resolve().parent) + os.sep, os.sep + "torch" + os.sep, os.sep + "site-packages" + os.sep)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(s in f.filename for s in skip)]
    where = ""
    if frames and (frames[-1].line or "").strip():
        frame = frames[-1]
        if frame.name != "<module>":
            where = Where(frame.name, frame.lineno, frame.line.strip()).said()
        elif not message:  # a bare assert of the demo's own: its line says what it expected
            message = f"`{frame.line.strip()[:200]}`"
    return type(exc).__name__, message, where


@contextlib.contextmanager
def requires(*exercises: str) -> Iterator[None]:
    """Run a demo that calls the learner's `exercises`; while one is unfinished or raises, say so in one line.

    Run All then goes on past the demo, and the demo draws nothing: figures it opened are closed, so no empty axes
    are shown. An unfinished exercise (NotImplementedError) gets "finish the exercise"; any other exception (a wrong
    answer of the wrong shape, a failed gradcheck) gets one sentence with its type, message and line. A later demo
    that uses a variable an earlier skipped demo would have defined is skipped the same way (a NameError after a
    skip). KeyboardInterrupt (the stop button) is not caught.
    """
    names = ", ".join(f"`{e}`" for e in exercises) or _("an exercise above")
    kept = _open_figures()
    try:
        yield
    except NotImplementedError:
        _SKIPPED_FOR.update(exercises)
        _close_figures_but(kept)
        print(_(DEMO_UNFINISHED).format(names=names))
    except NameError as exc:
        _close_figures_but(kept)
        if _SKIPPED_FOR:
            print(_(DEMO_UNFINISHED).format(names=names))
        else:
            _SKIPPED_FOR.update(exercises)
            print(_(DEMO_STOPPED).format(names=names, **dict(zip(("error", "message", "where"), _demo_error(exc)))))
    except Exception as exc:  # noqa: BLE001 - a wrong answer never stops Run All: the test cell says what is wrong
        _SKIPPED_FOR.update(exercises)
        _close_figures_but(kept)
        print(_(DEMO_STOPPED).format(names=names, **dict(zip(("error", "message", "where"), _demo_error(exc)))))


@dataclass(frozen=True)
class LocalPart:
    """A stand-in that runs in the learner's own process: one of `utils.attention_variants.LOCAL_PARTS` (plain
    course code), for checks that need gradients to flow through the part (a called-back stand-in cuts the graph)."""

    name: str


def in_worker(obj: Any) -> bool:
    """Is `obj` the grader's proxy for an object in the learner's process (a `utils.engine.remote.RemoteObject`)? Asked of
    its real type, which the proxy cannot forward, so that this module needs nothing of the grader's side."""
    return getattr(type(obj), "_attn_remote_type", None) is not None


def local_object(beside: Any, part: LocalPart) -> Any:
    """The course's `part` (a class or function of `utils.attention_variants.LOCAL_PARTS`) where `beside` lives: in
    the learner's process while grading (a proxy, like the learner's own objects), else the object itself. A check
    that must isolate one exercise from another uses it, e.g. the course's KV cache passed to the learner's module."""
    from .attention_variants import local_part

    if in_worker(beside):
        return beside._attn_part(part.name)
    return local_part(part.name)


@contextlib.contextmanager
def standing_in(obj: Any, **parts: Callable[..., Any] | LocalPart) -> Iterator[None]:
    """Grade `obj` on its own: the earlier exercises its code calls by name are the grader's `parts` meanwhile.

    A bug in the learner's ``split_heads`` should cost points in ``split_heads``, not once more in the
    ``MultiHeadAttention`` that calls it. Inside this block the globals named in `parts` that `obj`'s code reads
    (a function's, or the methods' of a class or instance) are the grader's implementations; afterwards the
    learner's are back. While grading, `obj` lives in the learner's process: there the names become stand-ins
    that send their arguments to the grader and return its answer, so no grader code enters that process. A
    name the learner's code does not read is left alone, and code that inlined the part keeps its own; a name it
    reads that is not defined (the cell defining it has a SyntaxError) is stood in for as well, and removed again.
    """
    if in_worker(obj):
        with obj._attn_worker.standing_in(obj._attn_ref, parts):
            yield
        return
    from .attention_variants import local_part
    from .substitute import put_back, replace_globals

    saved = replace_globals(obj, {n: local_part(p.name) if isinstance(p, LocalPart) else p for n, p in parts.items()})
    try:
        yield
    finally:
        put_back(saved)


def type_name(obj: Any) -> str:
    """The name of `obj`'s type, also for an object that lives in the learner's process while grading."""
    return obj._attn_remote_type if in_worker(obj) else type(obj).__name__


def peak_memory(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Call `fn(*args, **kwargs)`; return its result and the peak memory it added, in bytes.

    While grading, the grader reads the learner's worker from outside: the kernel's resident-set high-water mark of
    that fresh process, reset just before the call, so code under test cannot misreport it. In a live notebook the
    process has a history (tensors allocated and freed by earlier cells, allocator caches, fragmentation) that its
    resident memory mixes in; there the peak is PyTorch's profiler count of the tensors allocated during the call,
    which depends only on what the call does.
    """
    measure = getattr(fn, "_attn_peak_memory", None)
    if measure is not None:
        return measure(*args, **kwargs)
    from .blocks import tensor_peak_bytes

    box: list[Any] = []
    peak = tensor_peak_bytes(lambda: box.append(fn(*args, **kwargs)))
    return box[0], peak


def expect_pair(result: Any, what: str = N_("it")) -> tuple[Any, Any]:
    """`result` as (output, weights), or a CheckFailure saying that `what` should return such a tuple."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailure(later("{what} should return a tuple (output, weights), got {type}.").format(
            what=later(what), type=type(result).__name__))
    return result


def load_weights(module: Any, params: Mapping[str, torch.Tensor], needs: str) -> None:
    """Copy a test's weights into `module` by parameter name, so the learner's initialisation never matters.

    `needs` describes the layers the exercise asks for; it goes into the message when one is missing (in the
    learner's language: a grader marks it for the catalogue).
    """
    if not isinstance(module, torch.nn.Module):
        raise CheckFailure(later("{type} should be an nn.Module (subclass torch.nn.Module).").format(
            type=type_name(module)))
    own = {name: tuple(p.shape) for name, p in module.named_parameters()}
    missing = sorted(set(params) - set(own))
    if missing:
        raise CheckFailure(later("the module has no parameter(s) {missing}: it needs {needs}.").format(missing=missing,
                                                                                               needs=later(needs)))
    for name, tensor in params.items():
        if own[name] != tuple(tensor.shape):
            raise CheckFailure(later("{what} has shape {got}, expected {want}.").format(what=name, got=own[name],
                                                                                    want=tuple(tensor.shape)))
    # load_state_dict works the same on a module here and on one in the learner's process while grading.
    module.load_state_dict(dict(params), strict=False)


def _right_one_at_a_time(fn: Callable[..., Any], args: tuple[Any, ...], batched: tuple[bool, ...], lead: int,
                         expected: torch.Tensor, tol: dict[str, float]) -> bool:
    """Whether `fn` gives each batch element's part of `expected` when called on that element alone."""
    shape = next(a.shape[:lead] for a, b in zip(args, batched) if b)
    for index in itertools.product(*(range(n) for n in shape)):
        one = tuple(a[index] if b else a for a, b in zip(args, batched))
        try:
            out = fn(*one)
        except (NotImplementedError, CheckTimeout, CheckFailure):
            raise
        except Exception:  # noqa: BLE001 - wrong one at a time too: not the batch dims' fault
            return False
        want = expected[index]
        if not (isinstance(out, torch.Tensor) and out.shape == want.shape and out.dtype == want.dtype
                and bool(torch.isclose(out.detach(), want, rtol=tol["rtol"], atol=tol["atol"]).all())):
            return False
    return True


def identify(
    actual: torch.Tensor, mistakes: Mapping[Mistake, torch.Tensor | tuple[torch.Tensor, ...]], **tolerance: float
) -> Mistake | None:
    """The first catalogued mistake whose output `actual` reproduces (one of its outputs, where a mistake made in
    several ways gives several), or None."""
    tol = {**TOLERANCE, **tolerance}
    for mistake, outputs in mistakes.items():
        for wrong in outputs if isinstance(outputs, tuple) else (outputs,):
            wrong = wrong.detach()
            if wrong.shape == actual.shape and wrong.dtype == actual.dtype:
                if torch.allclose(actual, wrong, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True):
                    return mistake
    return None


def _fmt(t: torch.Tensor) -> str:
    """Small tensors for messages: nested lists keep their structure; 0-d tensors are a number."""
    values = t.detach().double().cpu().tolist() if t.dtype != torch.bool else t.tolist()

    def rounded(v: Any) -> Any:
        return [rounded(x) for x in v] if isinstance(v, list) else (round(v, 4) if isinstance(v, float) else v)

    return str(rounded(values))


def _inline_code(text: str) -> str:
    """HTML for a message: escaped, with `backticks` shown as code."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts)) if len(parts) % 2 else html.escape(text)


def _points(report: dict[str, Any], escape: bool = False) -> str:
    """'softmax: 1.5 / 2 points' (escaped for HTML with `escape`)."""
    text = _("{exercise}: {score} / {max_score} points")
    exercise = report["id"]
    if escape:
        text, exercise = html.escape(text, quote=False), html.escape(exercise)
    return text.format(exercise=exercise, score=f"{report['score']:g}", max_score=f"{report['max_score']:g}")


def report_html(report: dict[str, Any]) -> str:
    """The table a test cell shows: one row per check, what passed, and what to fix (in the learner's language)."""
    cell = 'style="text-align:left; vertical-align:top; padding:2px 8px"'
    verdict = report.get("verdict")
    hidden = f" <i>{html.escape(_('(hidden)'), quote=False)}</i>"

    def row(c: dict[str, Any], short: bool = False) -> str:
        mark = ('<span style="color:#1a7f37; font-weight:bold">&#10003;</span>' if c["passed"]
                else '<span style="color:#cf222e; font-weight:bold">&#10007;</span>')
        name = _inline_code(c["name"]) + (hidden if c["hidden"] else "")
        message = c.get("line") or c["message"] if short else c["message"]
        return f"<tr><td {cell}>{mark}</td><td {cell}>{name}</td><td {cell}>{_inline_code(message)}</td></tr>"

    rows = [row(c) for c in report["checks"]]
    head = (f"<tr><th {cell}></th><th {cell}>{html.escape(_('check'), quote=False)}</th>"
            f"<th {cell}>{html.escape(_('what to fix'), quote=False)}</th></tr>")
    note = (
        ""
        if report["graded"]
        else "<p><i>" + html.escape(_("These are the visible tests. {command} (or your instructor's autograder) also "
                                      "runs hidden tests on inputs you have not seen."), quote=False).format(
            command="<code>attn check</code>") + "</i></p>"
    )
    title = f"<p><b>{_points(report, escape=True)}</b></p>"
    lead = [i for i in report.get("lead") or [] if isinstance(i, int) and 0 <= i < len(rows)]
    if "lead" not in report or not lead:  # passed, not implemented, or stopped: every check in one table
        return f'{title}<table style="margin-left:0">{head}{"".join(rows)}</table>{note}'
    # Verdict first: the likely mistake, the few checks that show it, and every check one click away.
    said = f'<p style="color:#cf222e"><b>{_inline_code(verdict)}</b></p>' if verdict else ""
    failed = sum(1 for c in report["checks"] if not c["passed"])
    passed = len(rows) - failed
    summary = html.escape(_("all {n} checks ({passed} passed, {failed} failed)"), quote=False).format(
        n=len(rows), passed=passed, failed=failed)
    fold = (f"<details><summary>{summary}</summary>"
            f'<table style="margin-left:0">{head}{"".join(rows)}</table></details>')
    shown = "".join(row(report["checks"][i], short=True) for i in lead)
    return f'{title}{said}<table style="margin-left:0">{head}{shown}</table>{fold}{note}'



# -- the instructor side: where hidden tests and reference tensors live -----------------------
_GRADERS: dict[str, ModuleType] = {}


def load_grader(notebook: str) -> ModuleType:
    """Import ``grader/<notebook>.py`` (the hidden tests of one notebook)."""
    path = grader_dir() / f"{notebook}.py"
    key = str(path)
    if key not in _GRADERS:
        if not path.is_file():
            raise FileNotFoundError(f"no hidden tests for notebook {notebook!r}: {path} is missing")
        spec = importlib.util.spec_from_file_location(f"attn_grader_{notebook}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _GRADERS[key] = module
        speech.add_grader_catalogue(path.parent / "locale")  # its mistakes' explanations, in the reader's language
    return _GRADERS[key]


def references_path(notebook: str) -> Path:
    """Where the reference tensors of one notebook are stored."""
    return grader_dir() / f"{notebook}.safetensors"


def load_references(notebook: str) -> dict[str, torch.Tensor]:
    """Load stored reference tensors without running any pickled code (safetensors)."""
    from safetensors.torch import load_file

    path = references_path(notebook)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: regenerate it with `attn references`")
    return load_file(str(path))


def make_references(notebook: str) -> dict[str, torch.Tensor]:
    """Recompute one notebook's reference tensors from the grader's reference implementation."""
    module = load_grader(notebook)
    refs: Callable[[], dict[str, torch.Tensor]] = module.make_references
    return {k: v.detach().contiguous() for k, v in refs().items()}


#: How far a recomputed reference may drift from the stored one and still count as the same. CPUs with
#: different vector units round float32 sums differently in the last bits (seen: 4e-7); a change to a
#: reference implementation or its inputs moves values by far more.
REFERENCE_DRIFT: dict[str, float] = {"rtol": 1e-5, "atol": 1e-6}


def stale_references(notebook: str) -> list[str]:
    """Names of reference tensors that are missing, extra, or no longer what the grader computes."""
    try:
        stored = load_references(notebook)
    except FileNotFoundError:
        stored = {}
    fresh = make_references(notebook)
    stale = sorted(set(stored) ^ set(fresh))
    for name in sorted(set(stored) & set(fresh)):
        a, b = stored[name], fresh[name]
        same = a.shape == b.shape and a.dtype == b.dtype and (
            torch.equal(a, b) if not a.is_floating_point() else torch.allclose(a, b, **REFERENCE_DRIFT)
        )
        if not same:
            stale.append(name)
    return stale
