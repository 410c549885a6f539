"""The visible table names the mistake: what each catalogued mistake gives on the inputs of the visible checks.

`attn check` names a mistake by comparing the learner's output on hidden inputs with the output of each mistake in
the grader's catalogue (`grader/NN.py`, which students do not get). A test cell's visible checks run in the learner's
kernel, where the catalogue is not, on inputs the learner sees. So, for each visible comparison (`Checker.close`
inside the test cell of an exercise), this module keeps what every catalogued mistake outputs there: values, not
code, worked out by the maintainer from the planted mistakes of `tests/plants_NN.py` (each plant is the solution
with one catalogued mistake made) and stored in ``utils/visible/NN_name.safetensors``, which ships with the course
package. In the learner's kernel `Checker.close` offers them as it offers a grader's `mistakes=`, so the table
names the mistake with the catalogue's name and section (not its explanation, which stays the grader's), and
`Checker.settle` drops a name that another comparison refutes.

Each stored comparison keeps the expected tensor it was made against: when the learner's kernel compares against
another one (the test cell changed, or its inputs came out differently), nothing is offered there. `attn references`
writes the files; `attn references --check` and tests/test_visible.py say when one is stale.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from .failures import Mistake

FOLDER = Path(__file__).resolve().parent / "visible"

#: (exercise, the running check's index, the comparison's index within it)
Key = tuple[str, int, int]


def path(notebook: str) -> Path:
    return FOLDER / f"{notebook}.safetensors"


@lru_cache(maxsize=16)
def _read(notebook: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """`notebook`'s stored file: its metadata and its tensors (nothing when there is none)."""
    file = path(notebook)
    if not file.is_file():
        return {}, {}
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as f:
        meta = json.loads((f.metadata() or {}).get("visible", "{}"))
        tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 - safe_open has no iteration
    return meta, tensors


def _mistake(entry: dict[str, str]) -> Mistake:
    """A stored mistake: its name and section, never its explanation (the catalogue's explanations are the grader's,
    tests/test_nbgrader_flow.py), so the table names it and says where to read, and `attn check` says why."""
    return Mistake(entry["name"], "", entry["section"])


@lru_cache(maxsize=16)
def _stored(notebook: str) -> dict[Key, tuple[torch.Tensor, tuple[tuple[Mistake, torch.Tensor], ...]]]:
    """Every stored comparison of `notebook`: its expected tensor and each catalogued mistake's output there."""
    meta, tensors = _read(notebook)
    found: dict[Key, list[Any]] = {}
    for entry in meta.get("comparisons", []):
        key = (entry["exercise"], entry["check"], entry["close"])
        outputs: dict[Mistake, tuple[torch.Tensor, ...]] = {}
        for m in entry["mistakes"]:
            mistake = _mistake(m)
            outputs[mistake] = (*outputs.get(mistake, ()), tensors[m["tensor"]])
        found[key] = [tensors[entry["expected"]], tuple(outputs.items())]
    return {k: (v[0], v[1]) for k, v in found.items()}


def mistakes(notebook: str, key: Key, expected: torch.Tensor) -> dict[Mistake, tuple[torch.Tensor, ...]]:
    """What the catalogued mistakes give at this visible comparison (each made in one or more ways: its outputs), when
    it is the one they were worked out for (the same expected tensor); {} otherwise."""
    stored = _stored(notebook).get(key)
    if stored is None:
        return {}
    want, outputs = stored
    same = (want.shape == expected.shape and want.dtype == expected.dtype
            and bool(torch.equal(want.nan_to_num(0.0), expected.detach().cpu().nan_to_num(0.0))))
    return dict(outputs) if same else {}


def failure(notebook: str, key: Key, signature: tuple[str, tuple[str, ...]]) -> Mistake | None:
    """The one catalogued mistake that fails this visible check this way (`grading.failure_signature`), or None."""
    meta, _ = _read(notebook)
    for entry in meta.get("failures", []):
        if (entry["exercise"], entry["check"], 0) == key and (entry["kind"], tuple(entry["numbers"])) == signature:
            return _mistake(entry["mistake"])
    return None
