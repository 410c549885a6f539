"""Measure how well grading explains mistakes nobody catalogued: the plants of tests/blind_plants.py (--set blind),
tests/blind_plants_heldout.py (--set heldout), tests/blind_plants_set3.py (--set set3),
tests/blind_plants_set4.py (--set set4), tests/blind_plants_set5.py (--set set5) and tests/blind_plants_set6.py
(--set set6).

Each plant is written into a copy of its solution notebook in a temporary folder and graded with
`attn check --json`. The exercise it targets is then classified, best first:

    named        the exercise's `mistake` (or, when it names none, the first line of its feedback) matches the
                 plant's `names`: the feedback says what the learner did
    misnamed     the exercise names a catalogued mistake that does not match `names`: a wrong explanation
    pointed      no name, but the feedback matches the plant's `points`: it says which property fails
    counts-only  the exercise loses points, but its feedback only says the values differ
    not caught   the exercise keeps its points

and, apart from that, a plant "costs twice" when any OTHER exercise of the notebook loses points that it earns
on the unchanged solution. A plant whose `old` no longer occurs exactly once in its cell is reported as
"anchor not found" (fix the plant), one whose grading crashed as "error"; neither is counted in the percentages.

    .venv/bin/python tests/measure_feedback.py                 # all plants, a table per notebook, totals
    .venv/bin/python tests/measure_feedback.py --notebook 03   # one notebook (repeat for more)
    .venv/bin/python tests/measure_feedback.py --json          # machine-readable
    .venv/bin/python tests/measure_feedback.py --quick         # only the plants marked "quick": True
    .venv/bin/python tests/measure_feedback.py --set heldout   # the second set (--set set3, set4: the third, fourth)
    .venv/bin/python tests/measure_feedback.py --from-json F   # the tables of a measurement saved with --json
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import re
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from utils import notebooks as nbs  # noqa: E402 - run as a script, the repository is put on sys.path first

CLASSES = ["named", "misnamed", "pointed", "counts-only", "not caught"]
UNMEASURED = ["anchor not found", "error"]


SETS = {"blind": "blind_plants.py", "heldout": "blind_plants_heldout.py", "set3": "blind_plants_set3.py",
        "set4": "blind_plants_set4.py", "set5": "blind_plants_set5.py",
        "set6": "blind_plants_set6.py"}


def load_plants(which: str = "blind") -> list[dict]:
    """The plants of one set, each written by someone who had not read the catalogue: "blind"
    (tests/blind_plants.py, 2026-11-24) and "heldout" (tests/blind_plants_heldout.py, 2026-11-25), both measured
    first and then used to improve the feedback, so no longer blind; "set3" (tests/blind_plants_set3.py,
    2026-11-25, mistakes of kinds the first two sets do not have), measured after those changes, then used for
    generic diagnoses; "set4" (tests/blind_plants_set4.py, 2026-11-25, the mistakes learners most often make,
    written without reading the grader or the earlier sets), measured once, after the generic diagnoses, then used;
    "set5" (tests/blind_plants_set5.py, 2026-11-25, common and less obvious mistakes, written the same way),
    measured once, after that; "set6" (tests/blind_plants_set6.py, 2026-11-26, written the same way from the solution
    notebooks alone), measured once, after the diagnoses of issue 21."""
    path = Path(__file__).resolve().parent / SETS[which]
    spec = importlib.util.spec_from_file_location(f"plants_{which}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [{**p, "set": which} for p in module.PLANTS]


def plant_id(plant: dict, index: int) -> str:
    prefix = {"heldout": "h", "set3": "s", "set4": "f", "set5": "v", "set6": "x"}.get(plant.get("set", ""), "")
    return f"{prefix}{plant['notebook'][:2]}.{index:02d} {plant['cell']}"


# A loaded machine (the course's tests run two gradings at a time on 2 shared cores) can push an exercise past
# the 10 s learner limit; none of the plants loops, so a longer limit keeps load out of the measurement.
TIME_LIMIT = os.environ.get("ATTN_EXERCISE_TIME_LIMIT", "60")


def attn_check(path: Path) -> tuple[dict | None, str]:
    """What `attn check PATH --json` prints: (the result, "") or (None, why it failed). Graded by this thread's warm
    engine (the function the command calls, without starting Python, torch and a sandbox for every plant)."""
    from utils.engine import checking

    checking.EXERCISE_TIME_LIMIT_S = float(TIME_LIMIT)
    engine = getattr(_THREAD, "engine", None)
    if engine is None:
        engine = _THREAD.engine = checking.Engine()
        atexit.register(engine.close)
    try:
        result = engine.check(path).to_json()
    except Exception as exc:  # noqa: BLE001 - recorded as this plant's error; the others go on
        return None, f"attn check could not grade it: {type(exc).__name__}: {exc}"
    return json.loads(json.dumps(result)), ""


_THREAD = threading.local()


def write_planted(plant: dict, dest: Path) -> str:
    """Write the solution with the plant applied under dest; return "" or why the anchor does not fit."""
    nb = nbs.read(nbs.solution_path(plant["notebook"]))
    cells = [c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == plant["cell"]]
    if not cells or not nbs.is_answer_cell(cells[0]):
        return f"no answer cell {plant['cell']!r}"
    cell = cells[0]
    count = cell.source.count(plant["old"])
    if count != 1:
        return f"`old` occurs {count} times in cell {plant['cell']!r}"
    cell.source = cell.source.replace(plant["old"], plant["new"])
    nbs.write(nb, dest / plant["notebook"] / f"{plant['notebook']}.ipynb")
    return ""


def first_line(feedback: str) -> str:
    return next((line.strip() for line in (feedback or "").splitlines() if line.strip()), "")


def without_check_name(line: str) -> str:
    """The line without a leading "[check name]" (brackets may nest): the check's title names a property, not a cause."""
    if not line.startswith("["):
        return line
    depth = 0
    for i, ch in enumerate(line):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0:
            return line[i + 1:].strip()
    return line


def matches(patterns: list[str], text: str) -> bool:
    return any(re.search(p, text or "", re.IGNORECASE) for p in patterns)


QUOTED_CODE = re.compile(r"\(in [^()]*, line \d+: `[^`]*`\)|`[^`]*`")


def cause_class(plant: dict, score: float, max_score: float, mistake: str | None, feedback: str) -> str:
    """named, misnamed, pointed, counts-only or not caught (see the module's docstring).

    Code the feedback quotes back (the learner's own line in a traceback, `...` spans) is left out of the match:
    it is the learner's text, not the feedback's explanation."""
    text = QUOTED_CODE.sub("", feedback or "")
    if score >= max_score:
        return "not caught"
    if mistake:
        return "named" if matches(plant["names"], mistake) else "misnamed"
    if matches(plant["names"], without_check_name(first_line(text))):
        return "named"
    if matches(plant["points"], text):
        return "pointed"
    return "counts-only"


def reclassify(records: list[dict]) -> None:
    """Classify saved records again with the plants as they are now (after a change of `names` or `points`)."""
    plants = {pid: p for which in SETS for pid, p in select(load_plants(which), None, quick=False)}
    for record in records:
        plant = plants.get(record["id"])
        if plant and record["class"] in CLASSES:
            record["class"] = cause_class(plant, record["score"], record["max_score"], record.get("mistake"),
                                          record.get("feedback") or "")


def classify(plant: dict, result: dict, baseline: dict[str, float] | None) -> dict:
    """The plant's class on its exercise, and the other exercises that lost points."""
    exercises = {ex["id"]: ex for ex in result["exercises"]}
    ex = exercises.get(plant["exercise"])
    if ex is None:
        return {"class": "error", "detail": f"no exercise {plant['exercise']!r} in the result"}
    feedback, mistake = ex.get("feedback") or "", ex.get("mistake")
    head = first_line(feedback)
    cls = cause_class(plant, ex["score"], ex["max_score"], mistake, feedback)
    others = []
    for other in result["exercises"]:
        if other["id"] == plant["exercise"]:
            continue
        earned = baseline.get(other["id"], other["max_score"]) if baseline else other["max_score"]
        if other["score"] < earned - 1e-9:
            others.append({"id": other["id"], "score": other["score"], "max_score": other["max_score"],
                           "first_line": first_line(other.get("feedback") or "")})
    return {"class": cls, "score": ex["score"], "max_score": ex["max_score"], "mistake": mistake,
            "first_line": head, "feedback": feedback, "costs_twice": others}


def measure(plants: list[tuple[str, dict]], jobs: int = 2, baseline: bool = True, progress=None) -> dict:
    """Grade every plant (and, with baseline, each notebook's unchanged solution); return the records."""
    notebooks = sorted({p["notebook"] for _, p in plants})
    with tempfile.TemporaryDirectory(prefix="blind-plants-") as tmp:
        tmp = Path(tmp)

        def run_baseline(notebook: str) -> tuple[str, dict | None, str]:
            result, why = attn_check(nbs.solution_path(notebook))
            return notebook, result, why

        def run_plant(item: tuple[str, dict]) -> dict:
            pid, plant = item
            record = {"id": pid, **{k: plant[k] for k in ("notebook", "cell", "exercise", "cause")}}
            dest = tmp / pid.replace(" ", "_")
            why = write_planted(plant, dest)
            if why:
                record.update({"class": "anchor not found", "detail": why})
            else:
                start = time.monotonic()
                result, why = attn_check(dest / plant["notebook"] / f"{plant['notebook']}.ipynb")
                record["seconds"] = round(time.monotonic() - start, 1)
                if result is None:
                    record.update({"class": "error", "detail": why})
                else:
                    record["result"] = result
            if progress:
                progress(record)
            return record

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            baselines = {}
            if baseline:
                for notebook, result, why in pool.map(run_baseline, notebooks):
                    baselines[notebook] = ({ex["id"]: ex["score"] for ex in result["exercises"]}
                                           if result else None)
                    if result is None and progress:
                        progress({"id": f"baseline {notebook}", "class": "error", "detail": why})
            records = list(pool.map(run_plant, plants))
    for record in records:
        result = record.pop("result", None)
        if result is not None:
            plant = dict(plants)[record["id"]]
            record.update(classify(plant, result, baselines.get(plant["notebook"])))
    return {"baseline": baselines, "records": records}


def summarise(records: list[dict]) -> dict:
    def count(rs: list[dict]) -> dict:
        measured = [r for r in rs if r["class"] in CLASSES]
        out = {"plants": len(rs), "measured": len(measured)}
        for cls in CLASSES + UNMEASURED:
            out[cls] = sum(r["class"] == cls for r in rs)
        out["costs twice"] = sum(bool(r.get("costs_twice")) for r in measured)
        for key in CLASSES + ["costs twice"]:
            out[f"{key} %"] = round(100 * out[key] / len(measured), 1) if measured else 0.0
        return out

    per_notebook = {nb: count([r for r in records if r["notebook"] == nb])
                    for nb in sorted({r["notebook"] for r in records})}
    return {"notebooks": per_notebook, "total": count(records)}


def print_report(data: dict, summary: dict) -> None:
    cols = {"plants": "plants", "named": "named", "misnamed": "misnamed", "pointed": "pointed",
            "counts-only": "counts", "not caught": "missed", "costs twice": "twice", "anchor not found": "anchor",
            "error": "error"}
    head = f"{'notebook':<34}" + "".join(f"{label:>9}" for label in cols.values())
    print(head)
    print("-" * len(head))
    for nb, s in summary["notebooks"].items():
        print(f"{nb:<34}" + "".join(f"{s[c]:>9}" for c in cols))
    t = summary["total"]
    print("-" * len(head))
    print(f"{'total':<34}" + "".join(f"{t[c]:>9}" for c in cols))
    print(f"{'% of the ' + str(t['measured']) + ' measured':<34}{'':>9}"
          + "".join(f"{t[c + ' %']:>8}%" for c in CLASSES + ["costs twice"]))
    print("(counts = counts-only: the feedback only says values differ; missed = not caught, full marks kept;\n"
          " twice = costs points in another exercise too; anchor = `old` not found once in its cell)")
    print()
    print("Per plant (class, score on the exercise, the name or first feedback line):")
    for r in data["records"]:
        if r["class"] in UNMEASURED:
            print(f"  {r['id']:<34} {r['class'].upper()}: {r.get('detail', '')}")
            continue
        said = f"mistake={r['mistake']!r}" if r.get("mistake") else r.get("first_line", "")
        print(f"  {r['id']:<34} {r['class']:<11} {r['score']:g}/{r['max_score']:g}  {said[:150]}")
    bad = [r for r in data["records"] if r["class"] in ("misnamed", "not caught") or r.get("costs_twice")]
    if bad:
        print()
        print("Misnamed, not caught, or costing twice:")
        for r in bad:
            print(f"  {r['id']} [{r['class']}] planted: {r['cause']}")
            if r["class"] in ("misnamed", "not caught"):
                if r.get("mistake"):
                    print(f"      named: {r['mistake']!r}")
                print(f"      feedback: {r.get('first_line', '')[:200]}")
            for other in r.get("costs_twice", []):
                print(f"      also costs {other['id']} ({other['score']:g}/{other['max_score']:g}): "
                      f"{other['first_line'][:160]}")
    for nb, scores in data["baseline"].items():
        if scores is None:
            print(f"\nWARNING: the unchanged solution of {nb} could not be graded; 'costs twice' there compares "
                  "with full marks.")


def select(plants: list[dict], notebooks: list[str] | None, quick: bool) -> list[tuple[str, dict]]:
    chosen = []
    for index, plant in enumerate(plants):
        if notebooks and not any(plant["notebook"].startswith(n) for n in notebooks):
            continue
        if quick and not plant.get("quick"):
            continue
        chosen.append((plant_id(plant, index), plant))
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="blind",
                        help="which plants: blind (tests/blind_plants.py, default), heldout, set3, set4, set5 or set6")
    parser.add_argument("--notebook", action="append", help="NN or NN_name; repeat for more (default: all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--jobs", type=int, default=2, help="attn check runs at a time (default 2)")
    parser.add_argument("--quick", action="store_true", help='only the plants marked "quick": True')
    parser.add_argument("--plant", action="append", help="only the plants whose id starts with this, e.g. 02.08")
    parser.add_argument("--from-json", metavar="FILE",
                        help="print the tables of a measurement saved with --json instead of grading again")
    parser.add_argument("--no-baseline", action="store_true",
                        help="do not grade the unchanged solutions; 'costs twice' compares with full marks")
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        reclassify(saved["records"])
        print_report(saved, summarise(saved["records"]))
        return 0
    plants = select(load_plants(args.set), args.notebook, args.quick)
    if args.plant:
        plants = [(pid, p) for pid, p in plants if any(pid.startswith(x) for x in args.plant)]
    if not plants:
        parser.error("no plant selected")

    def progress(record: dict) -> None:
        print(f"  graded {record['id']} ({record.get('seconds', '-')} s)"
              + (f": {record['class']}" if record.get("class") else ""), file=sys.stderr, flush=True)

    start = time.monotonic()
    stdout = sys.stdout
    data = measure(plants, jobs=args.jobs, baseline=not args.no_baseline, progress=progress)
    # Grading captures a notebook's prints by swapping sys.stdout, which is one name for all threads: with two jobs,
    # one grading can restore the other's capture. What this prints goes where it was asked to.
    sys.stdout = stdout
    summary = summarise(data["records"])
    if args.json:
        json.dump({**data, "summary": summary}, sys.stdout, indent=1)
        print()
    else:
        print_report(data, summary)
        print(f"\n{len(plants)} plants graded in {time.monotonic() - start:.0f} s with {args.jobs} jobs.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
