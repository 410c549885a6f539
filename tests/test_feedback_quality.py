"""The feedback on mistakes nobody catalogued: the blind plants of tests/blind_plants.py, graded by `attn check`.

That first set has since been used to improve the feedback, so it guards against regressions. Later sets
(`--set heldout`, `set3`, `set4`, `set5`, `set6`) were each measured once before being used; the newest unused one is the
measurement of mistakes nobody has seen: `python tests/measure_feedback.py --set set6` (about 6 minutes).

Goals: at least 80 % of the plants named, none misnamed, none caught by another exercise too ("costs twice"),
none left with full marks. This runs the plants marked "quick" (two per notebook, about 3 minutes on 2 cores);
`ATTN_BLIND_ALL=1` runs all of them (about 15 minutes). `python tests/measure_feedback.py` prints the full report.
"""

from __future__ import annotations

import os

import pytest

from tests import measure_feedback as mf

QUICK = os.environ.get("ATTN_BLIND_ALL") != "1"
pytestmark = pytest.mark.slow  # grades 16 planted notebooks


@pytest.fixture(scope="module")
def measurement() -> dict:
    plants = mf.select(mf.load_plants(), None, quick=QUICK)
    # The solutions must earn full marks on their own (other tests see to that), so "costs twice" compares
    # with full marks and no baseline is graded.
    data = mf.measure(plants, jobs=2, baseline=False)
    return {**data, "summary": mf.summarise(data["records"])}


def _lines(records: list[dict]) -> str:
    return "\n".join(f"  {r['id']}: {r['cause']} -> [{r['class']}] "
                     f"{r.get('mistake') or r.get('first_line') or r.get('detail', '')}"[:300] for r in records)


def test_every_plant_is_graded(measurement: dict) -> None:
    broken = [r for r in measurement["records"] if r["class"] in mf.UNMEASURED]
    assert not broken, "plants that could not be measured (fix the anchor in tests/blind_plants.py):\n" + _lines(broken)


def test_no_plant_keeps_full_marks(measurement: dict) -> None:
    missed = [r for r in measurement["records"] if r["class"] == "not caught"]
    assert not missed, "mistakes that keep full marks on their exercise:\n" + _lines(missed)


def test_no_plant_is_misnamed(measurement: dict) -> None:
    wrong = [r for r in measurement["records"] if r["class"] == "misnamed"]
    assert not wrong, "mistakes given a catalogue name that does not describe them:\n" + _lines(wrong)


def test_no_plant_costs_twice(measurement: dict) -> None:
    twice = [r for r in measurement["records"] if r.get("costs_twice")]
    assert not twice, "mistakes that also cost points in another exercise:\n" + "\n".join(
        f"  {r['id']}: {r['cause']} -> also "
        + ", ".join(f"{o['id']} {o['score']:g}/{o['max_score']:g}" for o in r["costs_twice"]) for r in twice)


def test_most_plants_are_named(measurement: dict) -> None:
    total = measurement["summary"]["total"]
    unnamed = [r for r in measurement["records"] if r["class"] in ("pointed", "counts-only")]
    assert total["measured"] and total["named %"] >= 80, (
        f"{total['named %']} % of {total['measured']} plants named (goal: 80 %); not named:\n" + _lines(unnamed))
