"""The visible table names the mistake (issue 33): `utils.visible` holds what each catalogued mistake outputs at the
visible checks' comparisons, worked out from tests/plants_NN.py by `attn references` (`utils.visible_make`).

The stored files must be current (a changed test cell, solution or plant makes them stale, and the table would offer
nothing there); a learner's kernel that runs a test cell with a catalogued mistake gets the catalogue's name, with no
grader and no hidden check; a comparison against another expected tensor is offered nothing; and a failure is known
by its kind and numbers, whatever language it is said in. tests/measure_visible.py measures the share over every plant.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from utils import grading, i18n, visible, visible_make
from utils import notebooks as nbs

from .conftest import ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_stored_visible_catalogue_is_current(assignment):
    assert visible_make.stale(assignment) == [], (
        f"run `attn references` (it rewrites {visible.path(assignment).relative_to(nbs.ROOT)})")


def test_a_comparison_against_another_expected_tensor_is_offered_nothing():
    notebook = "02_scaled_dot_product_attention"
    meta, tensors = visible._read(notebook)
    entry = next(c for c in meta["comparisons"] if c["mistakes"])
    key = (entry["exercise"], entry["check"], entry["close"])
    expected = tensors[entry["expected"]]
    offered = visible.mistakes(notebook, key, expected.clone())
    assert offered and all(isinstance(m, grading.Mistake) for m in offered)
    assert visible.mistakes(notebook, key, expected + 1) == {}
    assert visible.mistakes(notebook, key, expected.double()) == {}
    assert visible.mistakes(notebook, ("no such exercise", 0, 0), expected) == {}


def test_a_failure_is_known_by_its_kind_and_numbers_in_either_language():
    signatures = {}
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            check = grading.Checker("ex", points=1)
            with check("shape"):
                check.close(torch.zeros(2, 3), torch.zeros(3, 2), "the output")
            failure = check.results[0].failure
            assert failure is not None
            signatures[lang] = grading.failure_signature(failure)
    assert signatures["en"] == signatures["zh"] and signatures["en"][0] == "CheckFailure", signatures
    assert "2" in signatures["en"][1] and "3" in signatures["en"][1], signatures
    assert grading.failure_signature(ValueError("no number here")) is None


#: Catalogued mistakes the visible checks alone must name (tests/plants_NN.py), one per kind of visible evidence.
NAMED = [("02_scaled_dot_product_attention", "scaling by 1/d_k"),
         ("03_masking", "off-by-one length"),
         ("04_multi_head_attention", "view without transpose")]
_PROBE = """
import json, sys
from tests import measure_visible as mv
wanted = json.loads(sys.argv[1])
found = {}
for _id, plant in mv.catalogued(None):
    key = [plant["notebook"], plant["mistake"]]
    if key in wanted and json.dumps(key) not in found:
        found[json.dumps(key)] = mv.visible_result(plant)
print(json.dumps(found))
"""


@pytest.mark.slow
def test_the_visible_table_names_catalogued_mistakes_without_the_grader():
    """The test cells alone (hidden checks cut out, as in the student copy), in a kernel of their own."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps([list(n) for n in NAMED])], cwd=nbs.ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found) == len(NAMED), found
    for (notebook, mistake) in NAMED:
        result = found[json.dumps([notebook, mistake])]
        assert result["score"] < result["max_score"], (notebook, result)
        assert result["mistake"] == mistake, (notebook, mistake, result)
        assert result["feedback"].splitlines()[0], result
