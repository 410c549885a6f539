"""Measure how much of what `attn check` names the visible table under a test cell names too (issue 33).

For every planted mistake, catalogued (tests/plants_NN.py: each names the mistake it must be named as) and
uncatalogued (the blind sets of tests/measure_feedback.py), the solution with the plant is graded twice: by `attn
check` (the warm engine, hidden checks included) and as the learner's kernel runs the test cell (its visible checks
only, the hidden block left out as in the student copy, with the visible catalogue of utils/visible.py). Each is
classified as tests/measure_feedback.py classifies attn check: "named" when the exercise names the plant's mistake
(catalogued: the same catalogue name; uncatalogued: a name or first line the plant's `names` accept). The figure is
the share of the plants attn check names that the visible table names too.

    .venv/bin/python tests/measure_visible.py                  # the catalogued plants and every blind set
    .venv/bin/python tests/measure_visible.py --catalogued     # the catalogued plants only (about 2 minutes)
    .venv/bin/python tests/measure_visible.py --notebook 04    # one notebook (repeat for more)
    .venv/bin/python tests/measure_visible.py --json           # records, machine-readable
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import measure_feedback as mf  # noqa: E402 - run as a script, the repository is put on sys.path first
from utils import notebooks as nbs  # noqa: E402
from utils import visible_make as visible  # noqa: E402

_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)


def catalogued(notebooks: list[str] | None) -> list[tuple[str, dict]]:
    """Every plant of tests/plants_NN.py that names a catalogued mistake, as measure_feedback's plants."""
    found = []
    for notebook in nbs.assignments():
        if notebooks and notebook[:2] not in notebooks:
            continue
        spec = importlib.util.spec_from_file_location(f"plants_{notebook[:2]}", ROOT / "tests" / f"plants_{notebook[:2]}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for i, plant in enumerate(p for p in module.MISTAKES if p.get("mistake")):
            found.append((f"{notebook[:2]}-c{i:02d}", {**plant, "notebook": notebook, "cause": plant["mistake"],
                                                        "names": [re.escape(plant["mistake"])], "points": []}))
    return found


def visible_result(plant: dict) -> dict:
    """The plant's exercise as the visible table reports it (the test cells without their hidden checks)."""
    nb = visible.planted(plant["notebook"], {k: plant[k] for k in ("cell", "old", "new")})
    for cell in nb.cells:
        if nbs.is_test_cell(cell):
            cell.source = _HIDDEN.sub("", cell.source)
    _, checkers = visible.run_cells(nb, record=False)
    checker = checkers.get(plant["exercise"])
    if checker is None:
        return {"score": 0.0, "max_score": 1.0, "mistake": None, "feedback": "the test cell did not run"}
    result = checker.score().result
    return {"score": result.score, "max_score": result.max_score, "mistake": result.mistake,
            "feedback": result.feedback()}


def checked_result(engine, plant: dict, tmp: Path) -> dict | None:
    dest = tmp / plant["notebook"] / plant["exercise"]
    why = mf.write_planted(plant, dest)
    if why:
        return None
    result = engine.check(dest / plant["notebook"] / f"{plant['notebook']}.ipynb").to_json()
    return next(e for e in result["exercises"] if e["id"] == plant["exercise"])


def classify(plant: dict, ex: dict) -> str:
    return mf.cause_class(plant, ex["score"], ex["max_score"], ex.get("mistake"), ex.get("feedback") or "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalogued", action="store_true", help="the catalogued plants only")
    parser.add_argument("--notebook", action="append", help="a notebook's number, e.g. 04 (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from utils.engine.checking import Engine

    plants = catalogued(args.notebook)
    if not args.catalogued:
        for which in mf.SETS:
            plants += [(pid, p) for pid, p in mf.select(mf.load_plants(which), args.notebook, quick=False)]
    records = []
    started = time.monotonic()
    with Engine() as engine, tempfile.TemporaryDirectory(prefix="measure-visible-") as tmp:
        for pid, plant in plants:
            shown = f"{pid:<28}"
            try:
                checked = checked_result(engine, plant, Path(tmp) / pid.replace(" ", "_"))
                if checked is None:
                    continue
                seen = visible_result(plant)
            except Exception as exc:  # noqa: BLE001 - one plant's failure is reported and the others go on
                print(f"{shown} error: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            record = {"id": pid, "notebook": plant["notebook"], "exercise": plant["exercise"],
                      "attn check": classify(plant, checked), "visible": classify(plant, seen),
                      "visible first line": mf.first_line(seen["feedback"]), "catalogued": "-c" in pid}
            records.append(record)
            if not args.json:
                print(f"{shown} attn check {record['attn check']:<12} visible {record['visible']:<12} "
                      f"{record['visible first line'][:90]}", flush=True)
    if args.json:
        print(json.dumps(records, indent=1))
        return 0
    print(f"\n{len(records)} plants in {time.monotonic() - started:.0f} s")
    for label, chosen in (("catalogued", [r for r in records if r["catalogued"]]),
                          ("uncatalogued", [r for r in records if not r["catalogued"]]), ("all", records)):
        named = [r for r in chosen if r["attn check"] == "named"]
        both = [r for r in named if r["visible"] == "named"]
        share = f"{100 * len(both) / len(named):.0f} %" if named else "-"
        print(f"{label:<13} attn check names {len(named):>3}; the visible table names {len(both):>3} of them: {share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
