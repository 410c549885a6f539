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
import math
import os
import signal
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

#: Default tolerance for comparing float32 tensors, stated once for the whole course.
TOLERANCE: dict[str, float] = {"rtol": 1e-4, "atol": 1e-5}
#: Seconds one check may run before it is stopped (catches infinite loops); $ATTN_CHECK_TIME_LIMIT overrides.
CHECK_TIME_LIMIT_S = float(os.environ.get("ATTN_CHECK_TIME_LIMIT", "20"))
#: After one check of an exercise timed out, its remaining checks get this long (the loop is likely everywhere).
AFTER_TIMEOUT_S = 1.0
#: MIME type of the machine-readable result that ``attn check`` reads from a test cell.
RESULT_MIME = "application/vnd.attn.check+json"
#: Environment variable that points at the grader folder when it is not beside ``utils``.
GRADER_ENV = "ATTN_GRADER_DIR"


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: what it is called, why it is wrong, and where the notebook explains it."""

    name: str
    explanation: str
    section: str

    def describe(self) -> str:
        """One sentence for the learner naming the mistake and the section to reread."""
        return f"This matches a known mistake, {self.name}: {self.explanation} — see '{self.section}'."


class CheckFailure(AssertionError):
    """A check failed; the message says what was wrong and, when known, which mistake it matches."""

    def __init__(self, message: str, mistake: Mistake | None = None) -> None:
        self.detail = message  # what was wrong, without the mistake's explanation
        if mistake is not None:
            message = f"{message} {mistake.describe()}"
        super().__init__(message)
        self.mistake = mistake


class CheckTimeout(Exception):
    """Raised inside a check that ran past its time limit."""


@dataclass
class CheckResult:
    """The outcome of one named check."""

    name: str
    weight: float
    hidden: bool
    passed: bool = False
    message: str = ""
    mistake: Mistake | None = None


class Score(float):
    """A score that nbgrader reads as partial credit (``text/plain`` is the number) and people read as a table."""

    report: dict[str, Any]

    def __new__(cls, value: float, report: dict[str, Any]) -> Score:
        obj = super().__new__(cls, value)
        obj.report = report
        return obj

    def __repr__(self) -> str:
        return repr(float(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": _report_html(self.report), RESULT_MIME: self.report}


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


def _where(exc: BaseException) -> str:
    """The learner's line that raised `exc`, as ' (line N: `code`)', or '' when it is not theirs."""
    ours = (str(Path(__file__).resolve().parent), os.sep + "torch" + os.sep, "grader")
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not any(s in f.filename for s in ours)]
    if not frames:
        return ""
    frame = frames[-1]
    code = (frame.line or "").strip()
    return f" (in {frame.name}, line {frame.lineno}: `{code}`)" if code else ""


class Checker:
    """Runs the named checks of one exercise and turns them into a score with feedback."""

    def __init__(self, exercise: str, points: float) -> None:
        if points <= 0:
            raise ValueError(f"points must be positive, got {points}")
        self.exercise = exercise
        self.points = float(points)
        self.results: list[CheckResult] = []
        self.not_implemented = False
        self._hidden = False
        self._graded = False
        self._timed_out = False

    # -- running checks -------------------------------------------------------------------
    @contextlib.contextmanager
    def __call__(self, name: str, weight: float = 1.0) -> Iterator[None]:
        """Run the body as one check named `name`; any exception fails this check only."""
        result = CheckResult(name=name, weight=weight, hidden=self._hidden)
        try:
            limit = AFTER_TIMEOUT_S if self._timed_out else CHECK_TIME_LIMIT_S
            with _time_limit(limit), torch.random.fork_rng(devices=[]):
                # A warning printed to stderr would zero the whole cell in nbgrader: record it instead.
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.manual_seed(len(self.results) + 1)
                    yield
            result.passed = True
            if caught:
                result.message = f"passed, with a warning worth reading: {caught[0].message}"
        except NotImplementedError as exc:
            self.not_implemented = True
            detail = f": {exc}" if str(exc) else ""
            result.message = f"not implemented yet{detail} — replace `raise NotImplementedError()` with your code."
        except CheckFailure as exc:
            result.mistake = exc.mistake
            if exc.mistake is not None and any(r.mistake == exc.mistake for r in self.results):
                # Explained once per exercise: the feedback should read as advice, not as a wall of repeats.
                result.message = f"{exc.detail} (the same known mistake, {exc.mistake.name})"
            else:
                result.message = str(exc)
        except CheckTimeout:
            self._timed_out = True
            result.message = (
                f"stopped after {limit:g} s — is there a loop that never ends, "
                "or a Python loop over every element where a tensor operation would do?"
            )
        except AssertionError as exc:
            result.message = f"assertion failed: {exc}{_where(exc)}" if str(exc) else f"assertion failed{_where(exc)}"
        except MemoryError as exc:
            result.message = f"ran out of memory{_where(exc)} — is something of size L×L×L being built?"
        except Exception as exc:  # noqa: BLE001 - a learner's exception costs this check only
            result.message = f"your code raised {type(exc).__name__}: {exc}{_where(exc)}"
        self.results.append(result)

    def hidden(self, notebook: str, *objects: Any) -> None:
        """Run the grader's hidden checks for this exercise on the learner's `objects`."""
        module = load_grader(notebook)
        tests = getattr(module, "HIDDEN_TESTS", {})
        if self.exercise not in tests:
            raise KeyError(f"grader/{notebook}.py has no hidden tests for {self.exercise!r}")
        self._hidden = True
        self._graded = True
        tests[self.exercise](self, load_references(notebook), *objects)

    # -- assertions used inside checks ----------------------------------------------------
    def close(
        self,
        actual: Any,
        expected: torch.Tensor,
        what: str = "output",
        mistakes: Mapping[Mistake, torch.Tensor] | None = None,
        **tolerance: float,
    ) -> None:
        """Fail unless `actual` is a tensor of `expected`'s shape whose values match within tolerance."""
        tol = {**TOLERANCE, **tolerance}
        if isinstance(actual, tuple) and len(actual) == 2 and isinstance(actual[0], torch.Tensor):
            raise CheckFailure(f"{what} should be a single tensor, got a tuple of two — return only the {what}.")
        if not isinstance(actual, torch.Tensor):
            raise CheckFailure(f"{what} should be a torch.Tensor, got {type(actual).__name__}.")
        actual = actual.detach()
        mistake = identify(actual, mistakes or {}, **tol)
        if actual.shape != expected.shape:
            raise CheckFailure(
                f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}.", mistake
            )
        if actual.dtype != expected.dtype:
            raise CheckFailure(f"{what} has dtype {actual.dtype}, expected {expected.dtype}.", mistake)
        bad_nan = torch.isnan(actual) & ~torch.isnan(expected)
        if bad_nan.any():
            raise CheckFailure(
                f"{what} contains NaN in {int(bad_nan.sum())} of {actual.numel()} entries "
                "(inf − inf or 0/0 somewhere: an overflow, or a row with nothing to attend to?).",
                mistake,
            )
        ok = torch.isclose(actual, expected, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
        if not bool(ok.all()):
            diff = (actual.double() - expected.double()).abs().nan_to_num(nan=math.inf)  # .double(): bool masks too
            message = (
                f"{what} differs from the expected values in {int((~ok).sum())} of {ok.numel()} entries "
                f"(largest difference {float(diff.max()):.3g})."
            )
            if not self._hidden and expected.numel() <= 16:
                message += f" Got {_fmt(actual)}, expected {_fmt(expected)}."
            raise CheckFailure(message, mistake)

    def shape(self, actual: Any, expected: tuple[int, ...], what: str = "output") -> None:
        """Fail unless `actual` is a tensor of shape `expected`."""
        if not isinstance(actual, torch.Tensor):
            raise CheckFailure(f"{what} should be a torch.Tensor, got {type(actual).__name__}.")
        if tuple(actual.shape) != tuple(expected):
            raise CheckFailure(f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected)}.")

    def true(self, condition: Any, message: str, mistake: Mistake | None = None) -> None:
        """Fail with `message` (naming `mistake`, if given) unless `condition` holds."""
        if not bool(condition):
            raise CheckFailure(message, mistake)

    # -- the result ----------------------------------------------------------------------
    def score(self) -> Score:
        """The points earned, as a float nbgrader reads and a report JupyterLab shows."""
        total = sum(r.weight for r in self.results)
        earned = sum(r.weight for r in self.results if r.passed)
        value = 0.0 if self.not_implemented or total == 0 else round(self.points * earned / total, 2)
        failed = [r for r in self.results if not r.passed]
        mistake = next((r.mistake.name for r in failed if r.mistake is not None), None)
        if not self.results:
            feedback = "no checks ran."
        elif self.not_implemented:
            feedback = "not implemented yet — replace `raise NotImplementedError()` with your code, then rerun this cell."
        elif failed:
            feedback = "\n".join(f"[{r.name}] {r.message}" for r in failed)  # one failed check per line
        else:
            feedback = f"all {len(self.results)} checks passed."
        report = {
            "id": self.exercise,
            "score": value,
            "max_score": self.points,
            "passed": value == self.points,
            "feedback": feedback,
            "mistake": mistake,
            "graded": self._graded,
            "checks": [
                {"name": r.name, "passed": r.passed, "hidden": r.hidden, "message": r.message}
                for r in self.results
            ],
        }
        return Score(value, report)


def expect_pair(result: Any, what: str = "it") -> tuple[Any, Any]:
    """`result` as (output, weights), or a CheckFailure saying that `what` should return such a tuple."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailure(f"{what} should return a tuple (output, weights), got {type(result).__name__}.")
    return result


def load_weights(module: Any, params: Mapping[str, torch.Tensor], needs: str) -> None:
    """Copy a test's weights into `module` by parameter name, so the learner's initialisation never matters.

    `needs` describes the layers the exercise asks for; it goes into the message when one is missing.
    """
    if not isinstance(module, torch.nn.Module):
        raise CheckFailure(f"{type(module).__name__} should be an nn.Module (subclass torch.nn.Module).")
    own = dict(module.named_parameters())
    missing = sorted(set(params) - set(own))
    if missing:
        raise CheckFailure(f"the module has no parameter(s) {missing}: it needs {needs}.")
    with torch.no_grad():
        for name, tensor in params.items():
            if own[name].shape != tensor.shape:
                raise CheckFailure(f"{name} has shape {tuple(own[name].shape)}, expected {tuple(tensor.shape)}.")
            own[name].copy_(tensor)


def identify(
    actual: torch.Tensor, mistakes: Mapping[Mistake, torch.Tensor], **tolerance: float
) -> Mistake | None:
    """The first catalogued mistake whose output `actual` reproduces, or None."""
    tol = {**TOLERANCE, **tolerance}
    for mistake, wrong in mistakes.items():
        wrong = wrong.detach()
        if wrong.shape == actual.shape and wrong.dtype == actual.dtype:
            if torch.allclose(actual, wrong, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True):
                return mistake
    return None


def _fmt(t: torch.Tensor) -> str:
    return str([round(v, 4) for v in t.flatten().tolist()]) if t.dim() > 1 else str([round(v, 4) for v in t.tolist()])


def _report_html(report: dict[str, Any]) -> str:
    rows = []
    for c in report["checks"]:
        mark = "✅" if c["passed"] else "❌"
        name = html.escape(c["name"]) + (" <i>(hidden)</i>" if c["hidden"] else "")
        rows.append(f"<tr><td>{mark}</td><td>{name}</td><td>{html.escape(c['message'])}</td></tr>")
    note = (
        ""
        if report["graded"]
        else "<p><i>These are the visible tests. <code>attn check</code> (or your instructor's "
        "autograder) also runs hidden tests on inputs you have not seen.</i></p>"
    )
    return (
        f"<p><b>{html.escape(report['id'])}: {report['score']:g} / {report['max_score']:g} points</b></p>"
        f"<table>{''.join(rows)}</table>{note}"
    )


# -- the instructor side: where hidden tests and reference tensors live -----------------------
def grader_dir() -> Path:
    """The folder with hidden tests and reference tensors (``$ATTN_GRADER_DIR`` or ``<repo>/grader``)."""
    configured = os.environ.get(GRADER_ENV)
    path = Path(configured) if configured else Path(__file__).resolve().parent.parent / "grader"
    if not path.is_dir():
        raise FileNotFoundError(
            f"The hidden tests are not here (looked for {path}). They ship with the course repository, "
            f"not with student copies: grade with `attn check` inside a clone of the course, "
            f"or set {GRADER_ENV} to the repository's grader/ folder."
        )
    return path


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
