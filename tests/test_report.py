"""`attn report`: the class report counts exactly the mistakes a class made, from nbgrader's gradebook and the grader's
own reports, and shows a submission's text only as text (utils/report.py).

A synthetic class of 60 submissions of 02 (tests/synthetic_class.py: the solution, the blank copy and each of 02's
plants in known proportions, graded by the course's grader and written into the gradebook by nbgrader's own
SaveAutoGrades) is reported on through the command an instructor types; every planted (exercise, mistake) must come
out with exactly the students who handed it in, in the HTML, in the CSV and in Chinese.
"""

from __future__ import annotations

import csv
import html.parser
import io
import json
import re
import sys
from pathlib import Path

import pytest

from utils import notebooks as nbs
from utils import report

from .conftest import assert_no_secrets, engine
from .synthetic_class import build, expected, plan

NB = "02_scaled_dot_product_attention"
STUDENTS = 60


def attn(course: Path, *args: str) -> tuple[int, str, str]:
    """`attn ARGS` run in the course folder `course` (in this process: the same program as `.venv/bin/attn`, without
    a second start of Python, nbgrader and matplotlib); (exit status, its output, its errors)."""
    import contextlib
    import os

    from utils import cli

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(course)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(list(args))
    finally:
        os.chdir(here)
    return status, out.getvalue(), err.getvalue()


def attn_report(course: Path, *args: str) -> str:
    status, out, err = attn(course, "report", *args)
    assert status == 0, out + err[-3000:]
    return out


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """(course folder, students and what each handed in): 02's synthetic class, graded and in the gradebook."""
    from .conftest import plants

    course = tmp_path_factory.mktemp("report") / "course"
    # Two plants of each exercise, and one whose name the grader builds from what it saw: every kind of mistake,
    # graded in seconds; `python -m tests.synthetic_class` plants all of them in every notebook.
    chosen, per = [], {}
    for plant in plants(NB).MISTAKES:
        if per.setdefault(plant["exercise"], 0) < 2 or plant["mistake"] == "queries and keys swapped":
            chosen.append(plant)
            per[plant["exercise"]] += 1
    students = plan(NB, STUDENTS, chosen)
    build(course, NB, students, engine())
    return course, students


def test_the_report_counts_every_planted_mistake_exactly(synthetic):
    course, students = synthetic
    want = expected(students)
    assert len(want) >= 6 and sum(map(len, want.values())) == STUDENTS - STUDENTS // 5 - STUDENTS // 10
    [data] = report.collect(report._api(course), [NB])
    stats = {st.exercise.name: st for st in report.exercise_stats(data)}
    got = {(m.exercise, m.mistake): sorted(m.students) for st in stats.values() for m in st.mistakes}
    for pair, who in want.items():
        assert got.get(pair) == sorted(who), f"{pair}: planted for {sorted(who)}, reported for {got.get(pair)}"
    # The blank copies are not attempts, and the solutions are full marks: neither is a mistake.
    blank = {s for s, v in students if v.blank}
    assert blank and all(not a.implemented for s in data.submissions if s.student in blank
                         for e, a in s.attempts.items() if e != "name_the_bug")
    assert stats["scaled_dot_product_attention"].attempted == STUDENTS - len(blank)

    out = attn_report(course, NB)
    top = max(want.items(), key=lambda kv: len(kv[1]))
    assert f"most common mistake: {top[0][1]} ({top[0][0]}, {len(top[1])} students)" in out, out
    page = (course / "reports" / f"{NB}.html").read_text(encoding="utf-8")
    for (exercise, mistake), who in want.items():
        row = re.search(rf"<tr><td>{re.escape(report._e(mistake))}</td><td class='n'>(\d+)</td>", page[page.index(
            f"<h3><code>{exercise}</code></h3>"):])
        assert row and int(row.group(1)) == len(who), (exercise, mistake)
    assert_no_secrets(page, NB, "the class report")
    assert "<script" not in page.lower() and f'content="{report.CSP}"' in page
    table = list(csv.DictReader(io.StringIO((course / "reports" / f"{NB}.csv").read_text(encoding="utf-8"))))
    rows = {(r["exercise"], r["name"]): r for r in table if r["kind"] == "mistake"}
    for (exercise, mistake), who in want.items():
        assert rows[(exercise, mistake)]["students"] == str(len(who))
        assert sorted(rows[(exercise, mistake)]["who"].split()) == sorted(who)


def test_the_report_in_chinese_names_the_mistakes_and_links_their_sections(synthetic):
    from utils import speech
    from utils.i18n import _, speaking

    course, students = synthetic
    attn_report(course, NB, "--lang", "zh")
    page = (course / "reports" / f"{NB}.zh.html").read_text(encoding="utf-8")
    speech.add_grader_catalogue(nbs.grader_dir() / "locale")
    planted = {v.plant["mistake"] for _s, v in students if v.plant}
    with speaking("zh"):
        assert "除以 sqrt(d_model) 或 sqrt(L) 来缩放" in page  # one catalogue name said in Chinese
        for section in {"2. Why divide by √d_k", "Exercise 2 — name the bug"}:
            heading = _(section)
            assert heading != section and report._e(heading) in page
            link = report.section_link(NB, section, "zh", "http://localhost:8888/")
            assert f'href="{report._e(link)}"' in page
    zh_copy = json.loads((nbs.ROOT / "notebooks" / "zh" / NB / f"{NB}.ipynb").read_text(encoding="utf-8"))
    headings = {line.lstrip("#").strip() for c in zh_copy["cells"] if c["cell_type"] == "markdown"
                for line in "".join(c["source"]).splitlines() if line.startswith("#")}
    with speaking("zh"):
        assert _("2. Why divide by √d_k") in headings
    assert planted and "<html lang=\"zh-Hans\">" in page


def test_every_section_a_mistake_names_is_a_heading_its_link_reaches():
    """JupyterLab gives a heading the id of its text with spaces as '-' and scrolls to it from the URL's fragment:
    each catalogued mistake's section is a heading of the student copy, in both languages."""
    import importlib.util
    from urllib.parse import unquote

    from utils import speech
    from utils.failures import Mistake
    from utils.i18n import _, speaking

    speech.add_grader_catalogue(nbs.grader_dir() / "locale")
    sys.path.insert(0, str(nbs.grader_dir()))
    try:
        for a in nbs.assignments():
            spec = importlib.util.spec_from_file_location(f"report_grader_{a[:2]}", nbs.grader_dir() / f"{a}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sections = {v.section for v in vars(module).values() if isinstance(v, Mistake)}
            assert sections, a
            for lang, folder in (("en", nbs.ROOT / "notebooks"), ("zh", nbs.ROOT / "notebooks" / "zh")):
                nb = json.loads((folder / a / f"{a}.ipynb").read_text(encoding="utf-8"))
                ids = {line.lstrip("#").strip().replace(" ", "-") for c in nb["cells"] if c["cell_type"] == "markdown"
                       for line in "".join(c["source"]).splitlines() if re.match(r"#+ ", line)}
                with speaking(lang):
                    for section in sections:
                        link = report.section_link(a, section, lang, "http://h/")
                        path, fragment = link.split("#")
                        assert path == f"http://h/lab/tree/{folder.relative_to(nbs.ROOT).as_posix()}/{a}/{a}.ipynb"
                        assert unquote(fragment) in ids, (a, lang, section, _(section))
    finally:
        sys.path.remove(str(nbs.grader_dir()))


def test_the_gradebook_is_the_one_source_of_scores(synthetic):
    """A score the instructor changed in Formgrader (a manual score) is the report's, whatever the autograded
    notebook's output says."""
    from nbgrader.api import Gradebook

    course, students = synthetic
    solved = next(s for s, v in students if v.key == "solution")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade("test_SelfAttention", NB, NB, solved)
        before, grade.manual_score = grade.score, 1.5
        gb.db.commit()
    try:
        [data] = report.collect(report._api(course), [NB])
        mine = next(s for s in data.submissions if s.student == solved)
        assert mine.attempts["SelfAttention"].score == 1.5 and before == 4.0
        assert mine.score == mine.max_score - 2.5
    finally:
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            gb.find_grade("test_SelfAttention", NB, NB, solved).manual_score = None
            gb.db.commit()


# -- without grading: hand-made data ------------------------------------------------------------------------------
def _output(report_: dict) -> dict:
    return {"output_type": "execute_result", "data": {"text/plain": "1.0", report.RESULT_MIME: report_},
            "metadata": {}, "execution_count": 1}


def _cell(grade_id: str | None, outputs: list, kind: str = "code") -> dict:
    meta = {"nbgrader": {"grade": True, "grade_id": grade_id}} if grade_id else {}
    return {"cell_type": kind, "metadata": meta, "source": "", "outputs": outputs}


def test_only_the_course_test_cells_are_read_and_every_value_is_bounded():
    graded = {"mistake": "no 1/sqrt(d_k) scaling", "section": "2. Why divide by √d_k",
              "checks": [{"name": "a", "passed": False}, {"name": "b", "passed": True}, {"name": 3, "passed": False}]}
    forged = {"mistake": "forged", "checks": [{"name": "forged", "passed": False}]}
    nb = {"cells": [
        _cell("scaled_dot_product_attention", [_output(forged)]),  # the answer cell: not a test cell
        _cell(None, [_output(forged)]),  # a cell of the student's
        _cell("test_softmax", [_output(forged)]),  # 01's test cell, not 02's
        _cell("test_SelfAttention", [_output(forged)], kind="markdown"),
        _cell("test_scaled_dot_product_attention", [{"output_type": "stream", "text": "x"}, _output(graded)]),
        _cell("test_scaled_dot_product_attention", [_output(forged)]),  # a second copy: the first one counts
        _cell("test_SelfAttention", [_output({"mistake": "x" * 10_000, "implemented": False, "checks": "no"})]),
        _cell("test_name_the_bug", [_output(["not", "a", "dict"])]),
    ]}
    found = report.read_report(nb, NB)
    assert found["scaled_dot_product_attention"] == {"implemented": True, "mistake": "no 1/sqrt(d_k) scaling",
                                                     "section": "2. Why divide by √d_k", "failed": ("a",)}
    assert found["SelfAttention"] == {"implemented": False, "mistake": "x" * report._TEXT, "section": None,
                                      "failed": ()}
    assert set(found) == {"scaled_dot_product_attention", "SelfAttention"}
    for junk in (None, [], {"cells": "x"}, {"cells": [None, 3, {"cell_type": "code", "metadata": []}]}):
        assert report.read_report(junk, NB) == {}


def _class(rows: list[tuple[str, str, list[float], list[str | None]]], missing=()) -> report.AssignmentData:
    """02 with one row per student: (id, name, the three exercises' scores, their mistakes)."""
    from utils import course

    exercises = course.notebook(NB).exercises
    subs = []
    for student, name, scores, mistakes in rows:
        attempts = {e.name: report.Attempt(s, float(e.points), mistake=m, section="2. Why divide by √d_k" if m else None,
                                           failed=("the check",) if s < e.points else (), reported=True)
                    for e, s, m in zip(exercises, scores, mistakes)}
        subs.append(report.Submission(student, name, sum(scores), 14.0, attempts))
    return report.AssignmentData(NB, exercises, subs, list(missing))


def test_difficulty_discrimination_quintiles_and_who_needs_help():
    rows = [(f"s{i}", "", [float(i % 7), 4.0 if i % 7 > 3 else 0.0, 4.0], [None if i % 7 == 6 else "m", None, None])
            for i in range(10)]
    data = _class(rows, missing=[("absent", "Ab Sent")])
    sdpa, bug, sa = report.exercise_stats(data)
    assert sdpa.mean == pytest.approx(sum(i % 7 for i in range(10)) / 10)
    assert sdpa.difficulty == pytest.approx(sdpa.mean / 6)
    # name_the_bug's score rises with the rest of the assignment: strongly discriminating; SelfAttention: no spread
    assert bug.discrimination is not None and bug.discrimination > 0.8 and sa.discrimination is None
    assert sdpa.quintiles[0] < sdpa.quintiles[-1] and sa.quintiles == [1.0] * 5
    assert [(m.mistake, len(m.students)) for m in sdpa.mistakes] == [("m", 9)]
    assert sdpa.checks == [("the check", 9)]
    helps = report.needs_help([data])
    assert [h.student for h in helps][:1] == ["absent"] and helps[0].missing == [NB]
    assert all(h.score / h.max_score < report.HELP_BELOW for h in helps)
    assert {h.student for h in helps} == {"absent"} | {s for s, _n, sc, _m in rows if sum(sc) / 14 < 0.5}
    assert report.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0) and report.pearson([1, 2], [1, 2]) is None


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs.update(name for name, _v in attrs)


HOSTILE = '<img src=x onerror="window.__attnpwn=1"><script>window.__attnpwn=2</script>'


def test_names_and_texts_from_a_submission_are_text_in_the_page_and_the_csv():
    rows = [(f"=cmd|' /C calc'!A0{HOSTILE}", f"<b>{HOSTILE}</b>", [0.0, 0.0, 0.0], [HOSTILE, None, None]),
            ("s1", "", [6.0, 4.0, 4.0], [None, None, None])]
    data = _class(rows)
    data.submissions[0].attempts["scaled_dot_product_attention"] = report.Attempt(
        0.0, 6.0, mistake=HOSTILE, section=HOSTILE, failed=(HOSTILE,), reported=True)
    data.notes.append(f"{HOSTILE}: could not be read")
    for lang in ("en", "zh"):
        page = report.render_html([data], lang, nav=[(HOSTILE, "javascript:alert(1)")])
        parsed = _Tags()
        parsed.feed(page)
        assert parsed.tags <= {"html", "head", "meta", "title", "style", "body", "main", "nav", "a", "h1", "h2", "h3",
                               "p", "div", "ol", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "code",
                               "details", "summary", "img", "figure", "figcaption"}, parsed.tags
        assert not {a for a in parsed.attrs if a.startswith("on")} and "<script" not in page.lower()
        assert page.count("<img ") == 1 and page.count(report._e(HOSTILE)) >= 4
        assert '<meta http-equiv="Content-Security-Policy"' in page
    table = list(csv.reader(io.StringIO(report.render_csv([data]))))
    cells = [c for row in table for c in row]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")], "a formula a spreadsheet would run"
    assert any(c.startswith("'=cmd") for c in cells) and any(c == HOSTILE for c in cells)


def test_formgrader_gets_a_class_report_entry_in_its_sidebar():
    from utils.formgrader_csp import add_report_link

    look_alike = '<div id="notebook-container"><a href="/u/x/formgrader/manage_students">Manage Students</a></li></div>'
    sidebar = '<li role="presentation"><a href="/u/x/formgrader/manage_students">Manage Students</a></li>' + look_alike
    body = add_report_link(sidebar.encode(), "/u/x").decode()
    assert body.count('<a href="/u/x/formgrader/attn-report">Class report</a>') == 1
    assert body.index("attn-report") < body.index("notebook-container")
    assert add_report_link(look_alike.encode(), "/u/x").decode() == look_alike, "a submission's look-alike is not it"
    assert add_report_link(b"<p>no sidebar</p>", "") == b"<p>no sidebar</p>"


def test_attn_report_says_what_is_missing(tmp_path):
    import shutil

    shutil.copy(nbs.ROOT / "nbgrader_config.py", tmp_path)
    status, _out, err = attn(tmp_path, "report", NB)
    assert status == 2 and "autograde" in err and "Traceback" not in err, err
    assert not (tmp_path / "gradebook.db").exists(), "asking made an empty gradebook"
    status, _out, err = attn(tmp_path, "report", "99_nothing")
    assert status == 2 and "not one of the course's notebooks" in err, err


def test_the_whole_course_in_one_report(synthetic):
    """`attn report` with no assignment: every assignment the gradebook has (here 02's class and a few students of
    01), an overview, and the students missing a notebook among those who may need help."""
    course, _students = synthetic
    first = "01_attention_intuition"
    few = plan(first, 6, [])  # the finished solution and the blank copy: graded twice, not six times
    build(course, first, few, engine())
    out = attn_report(course)
    assert f"{first}: 6 handed in, {STUDENTS - 6} missing" in out and f"{NB}: {STUDENTS} handed in, 0 missing" in out
    page = (course / "reports" / "course.html").read_text(encoding="utf-8")
    assert "Class report: the course" in page and f'<h2 id="{first}">' in page and f'<h2 id="{NB}">' in page
    overview = page[page.index("<h2>The course</h2>"):page.index(f'<h2 id="{first}">')]
    assert re.search(rf"{first}</a></td><td class='n'>6</td><td class='n'>{STUDENTS - 6}</td>", overview)
    assert re.search(rf"{NB}</a></td><td class='n'>{STUDENTS}</td><td class='n'>0</td>", overview)
    [data01, data02] = report.collect(report._api(course))
    helps = {h.student: h for h in report.needs_help([data01, data02])}
    blank02 = next(s for s, v in _students if v.blank and s not in {s for s, _v in few})
    assert helps[blank02].missing == [first]
    table = list(csv.DictReader(io.StringIO((course / "reports" / "course.csv").read_text(encoding="utf-8"))))
    assert {r["assignment"] for r in table} == {first, NB}


def test_a_student_id_that_leads_out_of_autograded_reads_nothing(tmp_path):
    """A student id is a folder name the student chose: `..` (or a link) must not make the report read a notebook
    outside autograded/STUDENT/ASSIGNMENT/ as that student's."""
    import os
    from types import SimpleNamespace

    forged = {"cells": [_cell("test_SelfAttention", [_output({"mistake": "forged", "checks": []})])]}
    (tmp_path / "autograded" / "alice" / NB).mkdir(parents=True)
    (tmp_path / "autograded" / "alice" / NB / f"{NB}.ipynb").write_text(json.dumps(forged))
    (tmp_path / NB).mkdir()
    (tmp_path / NB / f"{NB}.ipynb").write_text(json.dumps(forged))  # what autograded/../NB/NB.ipynb reaches
    (tmp_path / "autograded" / "linked").symlink_to(tmp_path)
    coursedir = SimpleNamespace(root=str(tmp_path), autograded_directory="autograded",
                                format_path=lambda folder, student, a: os.path.join(tmp_path, folder, student, a))
    api = SimpleNamespace(coursedir=coursedir)
    notes: list[str] = []
    assert report._autograded(api, NB, "alice", notes)["SelfAttention"]["mistake"] == "forged" and not notes
    for student in ("..", "linked"):
        assert report._autograded(api, NB, student, notes) == {}, student
    assert len(notes) == 2 and all("mistakes unknown" in n for n in notes)


def test_what_to_re_teach_lists_the_commonest_sections_and_folds_the_rest():
    rows = [(f"s{i}", "", [0.0, 4.0, 4.0], [f"mistake {i}", None, None]) for i in range(10)]
    data = _class(rows)
    for i, sub in enumerate(data.submissions):  # ten mistakes, each explained by a section of its own
        sub.attempts["scaled_dot_product_attention"] = report.Attempt(0.0, 6.0, mistake=f"mistake {i}",
                                                                     section=f"section {i}", reported=True)
    page = report.render_html([data])
    lead = page[page.index('<div class="lead">'):page.index("</div>")]
    shown, folded = lead.split("<details>")
    assert shown.count("<li>") == report.SECTIONS_SHOWN and folded.count("<li>") == 10 - report.SECTIONS_SHOWN
    assert "2 more sections" in folded and f'<ol start="{report.SECTIONS_SHOWN + 1}">' in folded
