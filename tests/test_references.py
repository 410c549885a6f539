"""Reference tensors: stored safely (no pickle), complete, and regenerated whenever the grader changes."""

from __future__ import annotations

import pytest
from safetensors import safe_open

from utils import grading
from utils.grading import make_references, references_path, stale_references

from .conftest import ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stored_references_match_what_the_grader_computes_now(assignment):
    assert stale_references(assignment) == [], f"run `attn references {assignment}`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_references_are_safetensors_not_pickles(assignment):
    path = references_path(assignment)
    assert path.read_bytes()[:2] != b"\x80\x02", "a pickle"
    with safe_open(str(path), framework="pt") as f:
        assert len(list(f.keys())) > 0


def test_a_changed_or_missing_reference_is_stale_but_last_bit_rounding_is_not(monkeypatch):
    assignment = ASSIGNMENTS[0]
    fresh = make_references(assignment)
    name = next(k for k, v in fresh.items() if v.is_floating_point())
    other = next(k for k in fresh if k != name)

    def stored_as(edit):
        stored = {k: v.clone() for k, v in fresh.items()}
        edit(stored)
        monkeypatch.setattr(grading, "load_references", lambda _: stored)
        return stale_references(assignment)

    assert stored_as(lambda s: s[name].mul_(1 + 2e-7)) == []  # another CPU's rounding
    assert stored_as(lambda s: s[name].add_(1e-3)) == [name]  # the reference implementation changed
    assert stored_as(lambda s: s.pop(other)) == [other]  # a new reference nobody stored
    assert stored_as(lambda s: s.update(gone=s[name])) == ["gone"]  # one the grader no longer makes
