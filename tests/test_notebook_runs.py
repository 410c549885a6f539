"""Run All as learners press it: on the blank copy, with wrong answers, and going back to a section (issue 33).

One kernel per run (`tests/notebook_runs.py`). In the blank student copy every demo that needs an exercise says so in
one line and draws nothing, and Run All reaches the end; with a wrong but implemented answer in every exercise (the
first planted mistake of each, tests/plants_NN.py) Run All still reaches the end and no figure is drawn empty; with
the solution's answers, running every section again after the next one (the last first) raises nothing.

Slow cells (timings, sweeps) that run only the course's own code are left out (they run the same whatever the learner
wrote, and nbval runs them), and the finished run leaves out every slow cell (what they bind, the static checks of
tests/test_notebook_cells.py cover); with answers in it, notebook 08 runs as under nbgrader's Validate
(NBGRADER_VALIDATING: its short training). `make test` runs the blank copy of every notebook (a little less than a plain
Run All of each) and the wrong answers and the sections again for the notebooks in QUICK; ATTN_ALL_NOTEBOOK_RUNS=1 runs
those for all eight, and `python tests/notebook_runs.py` runs everything, slow cells included.
"""

from __future__ import annotations

import os

import pytest

from utils import notebooks as nbs

from .conftest import ASSIGNMENTS
from .notebook_runs import cells, code_indices, env_for, passes_of, problems_of, run

pytestmark = pytest.mark.slow  # notebooks executed: not in `make test-fast`

#: The notebooks whose wrong answers and out-of-order sections `make test` runs: 04's section 8 once broke after
#: section 9, and 07's gradcheck once stopped Run All on a wrong backward pass.
QUICK = ("04", "07")
ALL_RUNS = os.environ.get("ATTN_ALL_NOTEBOOK_RUNS") == "1"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_blank_run_all_reaches_the_end_and_each_waiting_demo_says_one_line(assignment):
    blank = nbs.read(nbs.release_path(assignment))
    result = run({"run all": cells(blank, code_indices(blank, slow="learner"))}, env=env_for(assignment, "blank"),
                 notebook=assignment)
    problems = problems_of(assignment, "blank", result)
    shown = result.passes["run all"]
    tables = [c for c in shown if nbs.is_test_cell(blank.cells[c.index])]
    problems += [f"{c}: its table does not say 'not implemented yet'" for c in tables
                 if not any("not implemented yet" in str(o.get("data", {}).get("text/html", "")) for o in c.outputs)]
    assert tables and any(c.skipped for c in shown), "no test table, or no demo waiting for an exercise"
    assert not problems, "\n".join(problems)
    print(f"{assignment} blank Run All: {result.seconds:.1f} s")


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if ALL_RUNS or a[:2] in QUICK])
def test_wrong_answers_never_stop_run_all_and_a_section_runs_again_after_the_next(assignment):
    passes = passes_of(assignment, slow="learner", finished_slow="none")
    problems = []
    for kind in ("wrong", "finished"):
        result = run(passes[kind], env=env_for(assignment, kind), notebook=assignment)
        problems += problems_of(assignment, kind, result)
        print(f"{assignment} {kind}: {result.seconds:.1f} s")
    assert not problems, "\n".join(problems)
