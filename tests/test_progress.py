"""`attn progress` and `utils.progress.show()`: a learner's own progress, read from their saved notebooks and the
records `attn check` keeps on their machine, said in their language; nothing is sent anywhere.

Fast: the notebooks are copies with stored test outputs (the solutions' passing reports, edited where a test needs a
failure), and the hidden tests run twice in all (`attn check --exercise softmax` of notebook 01 with a planted
mistake: once recorded, once with a state folder that cannot be written).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from utils import course, progress
from utils import notebooks as nbs
from utils.results import ExerciseResult, NotebookResult

from .conftest import planted_copy, plants

NB = "01_attention_intuition"
EXERCISES = [e.name for e in course.notebook(NB).exercises]


def attn(*args: str, state: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "utils.cli", *args], capture_output=True, text=True, cwd=nbs.ROOT,
                          env={**os.environ, "ATTN_STATE_DIR": str(state), **env}, timeout=300)


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    """An empty state folder of this test's own, for this process and the commands it runs."""
    folder = tmp_path / "state"
    monkeypatch.setenv("ATTN_STATE_DIR", str(folder))
    monkeypatch.delenv("ATTN_LANG", raising=False)
    return folder


def copy_of(source: Path, dest: Path) -> Path:
    """`source` (a notebook) saved as a learner's copy of notebook 01 under dest: dest/01_.../01_....ipynb."""
    path = dest / NB / f"{NB}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, path)
    return path


def edit_reports(path: Path, **changes: dict) -> None:
    """Change the stored report of the exercises named: changes[name] is merged into its test cell's report."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            report = output.get("data", {}).get(progress.RESULT_MIME)
            if report and report["id"] in changes:
                report.update(changes[report["id"]])
    path.write_text(json.dumps(nb), encoding="utf-8")


def by_name(nb: progress.NotebookProgress) -> dict[str, progress.ExerciseProgress]:
    return {ex.name: ex for ex in nb.exercises}


def test_a_fresh_copy_shows_nothing_done_and_says_it_was_never_run(tmp_path, state):
    path = copy_of(nbs.release_path(NB), tmp_path)
    result = progress.progress([str(path)], "en")
    nb = result.notebooks[0]
    assert [ex.status for ex in nb.exercises] == ["not run"] * len(EXERCISES) and not nb.ran
    text = result.render()
    assert "never run" in text
    assert f"0 of {len(EXERCISES)} exercises done; next: 01 softmax" in text


def test_visible_checks_passed_in_the_saved_notebook_count_as_done(tmp_path, state):
    path = copy_of(nbs.solution_path(NB), tmp_path)  # the solution's stored reports: every check passed
    edit_reports(path, attention_pool={"score": 1.0, "passed": False, "mistake": "scores instead of weights",
                                       "feedback": "This matches a known mistake, scores instead of weights."})
    result = progress.progress([str(path)], "en")
    exercises = by_name(result.notebooks[0])
    assert {n: e.status for n, e in exercises.items()} == {
        "softmax": "done", "attention_pool": "not yet", "nadaraya_watson": "done", "additive_scores": "done"}
    assert result.done == 3 and result.next()[1].name == "attention_pool"
    text = result.render()
    assert re.search(r"attention_pool +✗ not yet +1 / 3 +– +scores instead of weights \(your test cell", text), text
    assert f"your test cells: 11 / {course.notebook(NB).points:g} points" in text


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """Notebook 01 with softmax's max-subtraction left out, graded by `attn check --json --exercise softmax` into a
    state folder of its own: (the copy, the state folder, the command)."""
    root = tmp_path_factory.mktemp("checked")
    mistake = plants(NB).MISTAKES[0]
    assert mistake["exercise"] == "softmax" and mistake["mistake"] == "no max-subtraction"
    path = planted_copy(NB, [mistake], root / "copy")
    saved = path.stat().st_mtime - 60  # saved a minute before the check, as a learner does
    os.utime(path, (saved, saved))
    proc = attn("check", str(path), "--json", "--exercise", "softmax", state=root / "state")
    return path, root / "state", proc


def test_attn_check_records_its_result_and_keeps_its_json_contract(checked):
    path, state, proc = checked
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)  # one JSON object, as before
    assert set(printed) == {"notebook", "score", "max_score", "exercises"}
    record = json.loads((state / "checks" / f"{NB}.json").read_text(encoding="utf-8"))
    assert record["format"] == 1 and record["assignment"] == NB and len(record["runs"]) == 1
    run = record["runs"][0]
    assert run["file"] == str(path.resolve()) and run["exercise"] == "softmax" and run["lang"] == "en"
    assert run["result"] == printed  # the JSON contract, kept whole
    assert run["result"]["exercises"][0]["mistake"] == "no max-subtraction"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", run["when"])


def test_a_recorded_mistake_is_named_in_the_learners_language(checked):
    path, state, _proc = checked
    english = attn("progress", str(path), state=state)
    chinese = attn("progress", str(path), "--lang", "zh", state=state)
    for proc in (english, chinese):
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    softmax = next(line for line in english.stdout.splitlines() if line.strip().startswith("softmax"))
    assert re.search(r"softmax +✗ not yet +3 / 3 +[\d.]+ / 3 +no max-subtraction \(attn check, ", softmax), softmax
    assert "↳ This matches a known mistake, no max-subtraction" in english.stdout
    softmax = next(line for line in chinese.stdout.splitlines() if line.strip().startswith("softmax"))
    assert "没有减去最大值" in softmax and "no max-subtraction" not in softmax
    # the visible checks passed (the copy keeps the solution's outputs); the hidden tests, run later, did not
    assert "3 of 4 exercises done; next: 01 softmax" in english.stdout


def test_a_mistake_fixed_since_is_still_listed_and_a_newer_save_asks_for_a_new_check(checked, tmp_path, monkeypatch):
    path, state, _proc = checked
    monkeypatch.setenv("ATTN_STATE_DIR", str(tmp_path / "state"))
    shutil.copytree(state, tmp_path / "state")
    softmax = by_name(progress.progress([str(path)], "en").notebooks[0])["softmax"]
    assert softmax.status == "not yet" and [m[1] for m in softmax.mistakes] == ["no max-subtraction"]
    later = softmax.hidden["when"].timestamp() + 60  # the learner fixed it and saved, visible checks passing
    os.utime(path, (later, later))
    try:
        softmax = by_name(progress.progress([str(path)], "en").notebooks[0])["softmax"]
        assert softmax.status == "check again"
        fixed = NotebookResult(str(path), (ExerciseResult("softmax", 3.0, 3.0, summary="all 5 checks passed."),))
        assert progress.record_check(fixed, path, "softmax") is not None
        softmax = by_name(progress.progress([str(path)], "en").notebooks[0])["softmax"]
        assert softmax.status == "done" and [m[1] for m in softmax.mistakes] == ["no max-subtraction"]
    finally:
        os.utime(path, (later - 120, later - 120))


def test_attn_check_goes_on_where_its_record_cannot_be_written(checked, tmp_path):
    path, _state, _proc = checked
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # root writes anywhere: a file where a folder must be stops it too
    proc = attn("check", str(path), "--json", "--exercise", "softmax", state=blocker / "state")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["exercises"][0]["mistake"] == "no max-subtraction"
    assert "not recorded for `attn progress`" in proc.stderr and "Traceback" not in proc.stderr
    assert blocker.read_text() == "not a folder"


def test_progress_json_is_one_object_for_tools(checked):
    path, state, _proc = checked
    proc = attn("progress", str(path), "--json", "--lang", "zh", state=state)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["lang"] == "zh" and data["done"] == 3 and data["total"] == 4
    assert data["next"] == {"notebook": NB, "exercise": "softmax"} and data["records"] == str(state)
    (nb,) = data["notebooks"]
    assert nb["id"] == NB and nb["problem"] is None and nb["ran"]
    softmax = nb["exercises"][0]
    assert softmax["name"] == "softmax" and softmax["status"] == "not yet" and not softmax["done"]
    assert softmax["visible"]["passed"] and not softmax["hidden"]["passed"]
    assert softmax["hidden"]["file"] == str(path.resolve())
    assert softmax["mistakes"][0] | {"when": None} == {"name": "no max-subtraction", "said": "没有减去最大值",
                                                        "where": "hidden", "when": None}


def test_feedback_and_names_are_escaped_in_html(tmp_path, state):
    path = copy_of(nbs.solution_path(NB), tmp_path)
    edit_reports(path, softmax={"score": 0.0, "passed": False, "mistake": "<b>wrong dim</b>",
                                "feedback": "your code raised ValueError: <script>alert('x')</script>"})
    shown = progress.progress([str(path)], "en").html()
    assert "<script>" not in shown and "<b>wrong dim" not in shown
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in shown and "&lt;b&gt;wrong dim&lt;/b&gt;" in shown


def test_show_in_a_cell_gives_html_with_a_text_fallback(tmp_path, state, monkeypatch):
    from IPython.core.formatters import DisplayFormatter

    path = copy_of(nbs.solution_path(NB), tmp_path)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    assert progress.show(str(path), lang="en") is None  # displays; nothing left to display twice
    (obj,) = shown
    bundle, _metadata = DisplayFormatter().format(obj)
    assert bundle["text/html"].startswith('<div class="attn-progress">') and "<table" in bundle["text/html"]
    assert bundle["text/plain"] == progress.progress([str(path)], "en").render()
    assert "4 of 4 exercises done: all of them" in bundle["text/plain"]
    assert "4 of 4 exercises done: all of them" in bundle["text/html"]


def test_a_damaged_notebook_or_record_gets_a_line_not_a_traceback(tmp_path, state):
    broken = tmp_path / "broken"
    path = copy_of(nbs.solution_path(NB), broken)
    path.write_text("{not json", encoding="utf-8")
    proc = attn("progress", str(path), state=state)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert re.search(r"^  cannot be read \(not JSON: .*\): restore it", proc.stdout, re.M), proc.stdout
    edited = copy_of(nbs.solution_path(NB), tmp_path / "edited")
    edit_reports(edited, softmax={"score": "lots"})
    (state / "checks").mkdir(parents=True)
    (state / "checks" / f"{NB}.json").write_text("[1, 2", encoding="utf-8")
    proc = attn("progress", str(edited), state=state)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "1 check report(s) in the saved notebook could not be read" in proc.stdout
    assert "the record of your checks" in proc.stdout and "is damaged" in proc.stdout
    # the next check keeps the damaged record aside and starts afresh
    result = NotebookResult(str(edited), (ExerciseResult("softmax", 3.0, 3.0),))
    assert progress.record_check(result, edited) == state / "checks" / f"{NB}.json"
    assert (state / "checks" / f"{NB}.json.damaged").read_text() == "[1, 2"
    assert len(json.loads((state / "checks" / f"{NB}.json").read_text())["runs"]) == 1


def test_the_record_keeps_the_last_runs_only(tmp_path, state):
    path = copy_of(nbs.release_path(NB), tmp_path)
    for score in range(progress.HISTORY + 3):
        result = NotebookResult(str(path), (ExerciseResult("softmax", min(score, 3), 3.0, mistake="wrong dim"),))
        progress.record_check(result, path)
    runs = json.loads(progress.record_path(NB).read_text())["runs"]
    assert len(runs) == progress.HISTORY and runs[-1]["result"]["exercises"][0]["score"] == 3


def test_the_default_language_is_the_edition_last_worked_in(tmp_path, state):
    assert progress.working_language() == "en"
    result = NotebookResult(str(tmp_path), (ExerciseResult("softmax", 0.0, 3.0),), lang="zh")
    # a check of the Chinese copy (the file need not exist for the record to say which edition it was)
    run = {"when": "2030-01-01T00:00:00+00:00", "file": str(progress.copy_path(NB, "zh")), "lang": "zh",
           "exercise": None, "result": result.to_json()}
    progress.record_path(NB).parent.mkdir(parents=True)
    progress.record_path(NB).write_text(json.dumps({"format": 1, "assignment": NB, "runs": [run]}))
    assert progress.working_language() == "zh"
    assert progress.progress([NB]).lang == "zh"
    assert progress.progress(["01"]).notebooks[0].path == progress.copy_path(NB, "zh")


def test_an_unknown_notebook_is_refused_in_one_line(state):
    proc = attn("progress", "09_nothing", state=state)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("attn progress: no notebook 09_nothing: give an id such as 01_attention_intuition, "
                                   "its number (01), or a notebook file")


def test_the_documented_command_reports_the_learners_copies(tmp_path):
    """docs/learners.md's `.venv/bin/attn progress` (tests/test_readme.py's RUN), on the course's released copies."""
    proc = attn("progress", state=tmp_path / "state", ATTN_LANG="")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert sum("never run" in line for line in lines) == len(course.NOTEBOOKS)
    total = sum(len(nb.exercises) for nb in course.NOTEBOOKS)
    assert lines[-2] == f"0 of {total} exercises done; next: 01 softmax (Attention as a soft dictionary lookup)"
    assert lines[-1].endswith("nothing is sent anywhere.") and str(tmp_path / "state") in lines[-1]


def test_progress_has_no_network_code():
    """Nothing is sent anywhere: the module imports nothing that opens a connection."""
    source = Path(progress.__file__).read_text(encoding="utf-8")
    assert not re.search(r"^\s*(import|from)\s+(socket|urllib|http|requests|httpx|ssl)\b", source, re.M)


def test_the_test_session_keeps_its_records_out_of_the_home():
    """tests/conftest.py points $ATTN_STATE_DIR at a temporary folder of the test process: no test writes records
    into the user's ~/.local/state/attn."""
    import tempfile

    folder = progress.state_dir()
    assert folder.is_dir() and folder.name.startswith("attn-state-")
    assert folder.parent == Path(tempfile.gettempdir())
