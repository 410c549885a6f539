"""The maintainer's side of `utils.visible`: working out, from the planted mistakes of `tests/plants_NN.py`, what each
catalogued mistake outputs at every visible comparison, writing it to ``utils/visible/NN_name.safetensors``, and
saying when a stored file is stale (`attn references [--check]`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import torch

from . import grading
from . import notebooks as nbs
from .failures import Mistake
from .visible import FOLDER, Key, _read, _stored, path


class _Recorder:
    """A CheckContext for the learner's kernel that records each visible comparison: (key, actual, expected)."""

    def __init__(self, base: Any) -> None:
        self.base = base
        self.seen: list[tuple[Key, torch.Tensor, torch.Tensor]] = []
        self.failures: list[tuple[Key, tuple[str, tuple[str, ...]]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def visible_mistakes(self, checker: Any, check: int, close: int, actual: Any,
                         expected: torch.Tensor) -> dict[Mistake, torch.Tensor]:
        if isinstance(actual, torch.Tensor):
            self.seen.append(((checker.exercise, check, close), actual.detach().cpu().clone(),
                              expected.detach().cpu().clone()))
        return {}

    def visible_failure(self, checker: Any, check: int, signature: tuple[str, tuple[str, ...]]) -> None:
        self.failures.append(((checker.exercise, check, 0), signature))


def _plants(notebook: str) -> list[dict]:
    import importlib.util

    module_path = nbs.ROOT / "tests" / f"plants_{notebook[:2]}.py"
    spec = importlib.util.spec_from_file_location(f"_attn_plants_{notebook[:2]}", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [p for p in module.MISTAKES if p.get("mistake")]


def planted(notebook: str, plant: dict | None) -> Any:
    nb = nbs.read(nbs.solution_path(notebook))
    if plant is not None:
        cell = next(c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == plant["cell"])
        if cell.source.count(plant["old"]) != 1:
            raise ValueError(f"plant {plant} does not match its cell {plant['cell']} exactly once")
        cell.source = cell.source.replace(plant["old"], plant["new"])
    return nb


@contextlib.contextmanager
def _recording() -> Iterator[_Recorder]:
    recorder = _Recorder(grading.LIVE)
    live, grading.LIVE = grading.LIVE, recorder
    try:
        yield recorder
    finally:
        grading.LIVE = live


def run_cells(nb: Any, record: bool = True) -> tuple[_Recorder, dict[str, Any]]:
    """Run `nb`'s course and answer cells as the learner's kernel would (demos left out), and its test cells as they
    are (with hidden checks, where the notebook holds them); returns what was seen of the visible checks (with
    `record`: their comparisons and failures) and each exercise's checker."""
    import matplotlib

    matplotlib.use("agg")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.reset(new_session=False)
    checkers: dict[str, Any] = {}
    recorder = contextlib.nullcontext(_Recorder(None)) if not record else _recording()
    with recorder as seen, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for cell in nb.cells:
            if cell.cell_type != "code" or set(nbs.SKIPPED_TAGS) & set(cell.metadata.get("tags", [])):
                continue
            outcome = shell.run_cell(cell.source, store_history=False)
            if nbs.is_test_cell(cell):
                checker = shell.user_ns.get("check")
                if isinstance(checker, grading.Checker):
                    checkers[checker.exercise] = checker
            elif record and outcome.error_in_exec is not None \
                    and not isinstance(outcome.error_in_exec, NotImplementedError):
                raise RuntimeError(f"{cell.metadata.get('nbgrader', {}).get('grade_id')}: {outcome.error_in_exec!r}")
    return seen, checkers


def make(notebook: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Work out `notebook`'s visible catalogue: the safetensors' tensors and metadata."""
    right, _ = run_cells(planted(notebook, None))
    expected = {key: want for key, _actual, want in right.seen}
    outputs: dict[Key, dict[Mistake, list[torch.Tensor]]] = {}
    failed: dict[tuple[Key, tuple[str, tuple[str, ...]]], set[Mistake]] = {}
    plants = _plants(notebook)
    for plant in plants:
        seen, checkers = run_cells(planted(notebook, plant))
        checker = checkers.get(plant["exercise"])
        if checker is None:
            continue
        checker.score()  # settles which catalogued mistake the hidden checks name
        named = next((r.mistake for r in checker.results if r.mistake is not None), None)
        if named is None or named.name != plant["mistake"] or named.words is not None:
            continue  # the hidden checks name another (or none): nothing reliable to say on the visible inputs
        for key, signature in seen.failures:
            if key[0] == plant["exercise"]:
                failed.setdefault((key, signature), set()).add(named)
        for key, actual, want in seen.seen:
            if key[0] == plant["exercise"] and key in expected and torch.equal(want, expected[key]):
                found = outputs.setdefault(key, {}).setdefault(named, [])
                if not any(t.shape == actual.shape and torch.equal(t, actual) for t in found):
                    found.append(actual)  # a mistake made in another way, with another output here
    tensors: dict[str, torch.Tensor] = {}
    comparisons = []
    for n, (key, found) in enumerate(sorted(outputs.items())):
        tensors[f"e{n}"] = expected[key].contiguous()
        entry = {"exercise": key[0], "check": key[1], "close": key[2], "expected": f"e{n}", "mistakes": []}
        m = 0
        for mistake, actuals in sorted(found.items(), key=lambda kv: (kv[0].name, kv[0].explanation)):
            for actual in actuals:
                tensors[f"e{n}m{m}"] = actual.contiguous()
                entry["mistakes"].append({**_entry(mistake), "tensor": f"e{n}m{m}"})
                m += 1
        comparisons.append(entry)
    # A failure that two mistakes share names neither.
    failures = [{"exercise": key[0], "check": key[1], "kind": signature[0], "numbers": list(signature[1]),
                 "mistake": _entry(next(iter(named)))}
                for (key, signature), named in sorted(failed.items(), key=lambda kv: json.dumps(kv[0]))
                if len(named) == 1]
    return tensors, {"visible": json.dumps({"comparisons": comparisons, "failures": failures, "plants": _digest(plants),
                                            "code": _code(notebook)}, sort_keys=True)}


def _entry(mistake: Mistake) -> dict[str, str]:
    return {"name": mistake.name, "section": mistake.section}  # no explanation: the catalogue's stay the grader's


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _code(notebook: str) -> str:
    """A digest of the solution's code cells: the visible checks' inputs, the answers and what they call."""
    return _digest([c.source for c in nbs.read(nbs.solution_path(notebook)).cells if c.cell_type == "code"])


def write(notebook: str) -> int:
    """Work out and store `notebook`'s visible catalogue; returns how many comparisons it names mistakes at."""
    from safetensors.torch import save_file

    tensors, metadata = make(notebook)
    FOLDER.mkdir(exist_ok=True)
    save_file(tensors, str(path(notebook)), metadata=metadata)
    path(notebook).chmod(0o644)  # the course package's data: every user of a shared environment reads it
    _read.cache_clear()
    _stored.cache_clear()
    return len(json.loads(metadata["visible"])["comparisons"])


def stale(notebook: str) -> list[str]:
    """Why `notebook`'s stored visible catalogue is not what `write` would make now ([] when it is current): the
    solution's code or the plants it was made from changed, or a mistake it names is no longer the catalogue's."""
    file = path(notebook)
    if not file.is_file():
        return [f"{file.relative_to(nbs.ROOT)} is missing"]
    meta, _tensors = _read(notebook)
    problems = []
    if meta.get("code") != _code(notebook):
        problems.append(f"the code cells of {notebook}'s solution changed")
    if meta.get("plants") != _digest(_plants(notebook)):
        problems.append(f"tests/plants_{notebook[:2]}.py changed")
    catalogue = {(m.name, m.section) for m in vars(grading.load_grader(notebook)).values() if isinstance(m, Mistake)}
    named = {(m["name"], m["section"]) for c in meta.get("comparisons", []) for m in c["mistakes"]}
    named |= {(f["mistake"]["name"], f["mistake"]["section"]) for f in meta.get("failures", [])}
    problems += [f"no longer in grader/{notebook}.py: {name!r}" for name, _ in sorted(named - catalogue)]
    return problems
