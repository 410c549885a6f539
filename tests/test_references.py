"""Reference tensors: stored safely (no pickle), complete, and regenerated whenever the grader changes."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open

from utils.grading import load_references, make_references, references_path

from .conftest import ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stored_references_match_what_the_grader_computes_now(assignment):
    stored, fresh = load_references(assignment), make_references(assignment)
    assert sorted(stored) == sorted(fresh), "tensor names changed: run `attn references`"
    for name in fresh:
        assert torch.equal(stored[name], fresh[name]), f"{name} is stale: run `attn references {assignment}`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_references_are_safetensors_not_pickles(assignment):
    path = references_path(assignment)
    assert path.read_bytes()[:2] != b"\x80\x02", "a pickle"
    with safe_open(str(path), framework="pt") as f:
        assert len(list(f.keys())) > 0

