"""`attn export`: nbgrader's gradebook as the files Canvas and Moodle import (utils/lms.py), read with their rules.

Each LMS's file is read here the way that LMS's own importer reads it (the rules are ported, with their sources, below)
and compared with the LMS's own example file in tests/lms/. The gradebook is a real nbgrader gradebook, made with
nbgrader's API in a temporary folder; no grading runs.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from sqlalchemy.exc import SAWarning

from utils import lms
from utils import notebooks as nbs

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE / "lms"
A1, A2, A3 = "01_attention_intuition", "02_scaled_dot_product_attention", "03_multi_head_attention"
#: (assignment, the points of its grade cells)
ASSIGNMENTS = [(A1, (2.0, 3.0)), (A2, (4.0,)), (A3, (5.0,))]
INJECTION = '=HYPERLINK("http://x","click")'
#: id -> (first name, last name, email, lms_user_id)
STUDENTS = {
    "alice": ("Alice", "Able", "alice@example.org", "1001"),
    "wang": ("小明", "王", "wang.xiaoming@example.org", ""),
    "mallory": ("Mallory", INJECTION, "mallory@example.org", ""),
    "quincy": ('Quincy "Q"', "O'Brien, Jr.\nthe second", "quincy@example.org", ""),
}
#: (student, assignment) -> {grade cell index: (auto, manual, extra credit)}; every other pair has no submission.
SUBMISSIONS = {
    ("alice", A1): {0: (2.0, None, None), 1: (1.0, 2.5, 0.5)},  # nbgrader's score: 2 + 2.5 (manual wins) + 0.5 = 5
    ("alice", A2): {0: (4.0, None, None)},
    ("wang", A1): {0: (1.0, None, None), 1: (0.0, None, None)},
    ("wang", A2): {0: (0.0, None, None)},  # a real zero, not a missing submission
    ("mallory", A1): {0: (2.0, None, None), 1: (3.0, None, None)},
    ("quincy", A3): {0: (1.5, None, None)},
}
EXPECTED = {("alice", A1): 5.0, ("alice", A2): 4.0, ("wang", A1): 1.0, ("wang", A2): 0.0, ("mallory", A1): 5.0,
            ("quincy", A3): 1.5}


def make_gradebook(path: Path, empty: Path, students: dict = STUDENTS) -> Path:
    """A gradebook as nbgrader's autograde leaves it, made from a copy of `empty`: assignments with grade cells,
    students, graded submissions."""
    from nbgrader.api import Gradebook

    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(empty, path)
    try:
        # nbgrader's add_submission makes SQLAlchemy warn about objects that nbgrader itself adds a moment later
        with warnings.catch_warnings(), Gradebook(f"sqlite:///{path}", course_id="attention-course") as gb:
            warnings.simplefilter("ignore", SAWarning)
            for name, points in ASSIGNMENTS:
                gb.add_assignment(name)
                gb.add_notebook(name, name)
                for i, p in enumerate(points):
                    gb.add_grade_cell(f"test_{i}", name, name, max_score=p, cell_type="code")
            for sid, (first, last, email, lms_id) in students.items():
                gb.add_student(sid, first_name=first, last_name=last, email=email or None, lms_user_id=lms_id or None)
            for (sid, name), cells in SUBMISSIONS.items():
                if sid not in students:
                    continue
                gb.add_submission(name, sid)
                for i, (auto, manual, extra) in cells.items():
                    grade = gb.find_grade(f"test_{i}", name, name, sid)
                    grade.auto_score, grade.manual_score, grade.extra_credit = auto, manual, extra
                gb.db.commit()
    except BaseException:
        path.unlink()
        raise
    return path


@pytest.fixture(scope="module")
def empty(tmp_path_factory) -> Path:
    """A new gradebook with nothing in it, made once: nbgrader runs `alembic` (a second) for each new file."""
    from nbgrader.api import Gradebook

    path = tmp_path_factory.mktemp("empty") / "gradebook.db"
    old = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), old])  # where nbgrader finds `alembic`
    try:
        Gradebook(f"sqlite:///{path}", course_id="attention-course").close()
    finally:
        os.environ["PATH"] = old
    return path


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory, empty) -> Path:
    return make_gradebook(tmp_path_factory.mktemp("course") / "gradebook.db", empty)


def export(gradebook: Path, fmt: str, **kw) -> lms.Table:
    return lms.export(fmt, db_url=f"sqlite:///{gradebook}", **kw)


def file_of(gradebook: Path, fmt: str, **kw) -> bytes:
    return lms.to_bytes(export(gradebook, fmt, **kw).rows, fmt)


# -- Canvas's importer, ported: instructure/canvas-lms app/models/gradebook_importer.rb ---------------------------
CANVAS_NON_ASSIGNMENT = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                                   "Override Score|Override Grade|Override Status")


def canvas_delimiter(data: bytes) -> str:
    """identify_delimiter: the separator that splits the first three lines into equally many fields (";" wins only
    with more fields than ",")."""
    lines = data.decode("utf-8").splitlines()[:3]
    counts = {}
    for sep in ";,":
        try:
            sizes = [len(next(csv.reader([line], delimiter=sep, strict=True), [])) for line in lines]
        except csv.Error:
            sizes = [0]
        counts[sep] = sizes[0] if len(set(sizes)) == 1 else 0
    return ";" if counts[";"] > counts[","] else ","


def canvas_read(data: bytes) -> dict:
    """What Canvas's importer takes from a file: its student columns, assignments (title and Canvas id), the Points
    Possible row and each student row's identifiers and grades. Raises AssertionError where Canvas fails the file."""
    text = data.decode("utf-8")  # Canvas does not strip a byte order mark: its tests below must pass with one
    rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=canvas_delimiter(data))
            if not re.fullmatch(r"[;, ]*", ",".join(r))]
    header = rows[0]
    # row_has_student_headers?
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1], f"Invalid header row: {header[:3]}"
    columns = 3  # update_column_count: Student, ID, ... Section
    if re.search(r"SIS\s+Login\s+ID", header[2]):
        columns, login = columns + 1, 2
        sis_user = None
    else:
        assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]), header[:5]
        columns, sis_user, login = columns + 2, 2, 3
    assert "Section" in header[columns - 1], f"Invalid header row: the last student column is {header[columns - 1]!r}"
    assignments = []
    for index, name in enumerate(header[columns:], columns):
        if CANVAS_NON_ASSIGNMENT.search(name):
            continue  # strip_non_assignment_columns
        m = re.fullmatch(r"(.*)\s\((\d+)\)", name)  # Assignment.title_and_id
        assignments.append({"column": index, "title": m.group(1) if m else name, "id": m.group(2) if m else None})
    points, students = {}, []
    for row in rows[1:]:
        assert len(row) == len(header), f"a row of {len(row)} cells under a header of {len(header)}: {row}"
        if "Points Possible" in row[0]:  # check_for_non_student_row
            points = {a["title"]: row[a["column"]] for a in assignments}
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I) for c in row if c):
            continue
        student = {"name": row[0], "id": row[1], "sis_user_id": row[sis_user] if sis_user else "",
                   "sis_login_id": row[login],
                   "grades": {a["title"]: row[a["column"]].strip() for a in assignments}}
        # process_student: by ID, else SIS User ID, else SIS Login ID, else by name
        assert student["id"] or student["sis_user_id"] or student["sis_login_id"] or student["name"], row
        for grade in student["grades"].values():  # the decimal converter, and "-"/blank as no score
            assert grade in ("", "-", "EX") or re.fullmatch(r"-?[0-9.,]+%?", grade), f"not a grade: {grade!r}"
        students.append(student)
    return {"student_columns": header[:columns], "assignments": assignments, "points": points,
            "points_row": next(i for i, r in enumerate(rows) if "Points Possible" in r[0]), "students": students}


# -- Moodle's importer, ported: moodle/moodle lib/csvlib.class.php and grade/import/csv/classes/load_data.php -------

def moodle_read(data: bytes, map_from: str, map_to: str) -> dict:
    """What Moodle's CSV grade import takes from a file with "Map from" `map_from` "to" `map_to`: the identifier of
    each row and its grades by column. Raises AssertionError where Moodle refuses the file or mis-files a row."""
    text = data.decode("utf-8")  # the form's encoding, UTF-8 by default
    text = text.removeprefix("\ufeff")  # core_text::trim_utf8_bom
    text = re.sub(r"\r\n?", "\n", text).strip()
    rows = list(csv.reader(io.StringIO(text, newline=""), skipinitialspace=True))  # fgetcsv strips leading spaces
    header = [h.strip() for h in rows[0]]  # trim_headers
    assert len(set(header)) == len(header), f"duplicate column names: {header}"
    for row in rows[1:]:
        assert len(row) == len(header), f"csvweirdcolumns: {len(row)} fields under {len(header)} column names"
    assert map_to in ("userid", "username", "useridnumber", "useremail"), map_to
    key = header.index(map_from)
    grades = [i for i, h in enumerate(header) if h != map_from and not h.startswith(("Feedback:",))
              and h not in ("First name", "Surname", "Last name", "ID number", "Institution", "Department",
                            "Email address", "Username")]
    found = []
    for row in rows[1:]:
        value = row[key].strip()
        # A blank identifier is skipped, and the row's grades would go to the previous row's student.
        assert value, f"a row without {map_from}: Moodle would file its grades under the student above it: {row}"
        cells = {header[i]: row[i].strip() for i in grades}
        for cell in cells.values():  # update_grade_item: "" or "-" is no grade, else a number (unformat_float)
            assert cell in ("", "-") or re.fullmatch(r"-?\d+(?:[.,]\d+)?", cell), f"badgrade: {cell!r}"
        found.append({"user": value, "grades": cells, "row": dict(zip(header, row))})
    return {"header": header, "rows": found}


# -- the tests ----------------------------------------------------------------------------------------------------

def test_the_canvas_file_reads_as_canvas_reads_its_own_export(gradebook):
    example = canvas_read((EXAMPLES / "canvas_example.csv").read_bytes())
    assert [a["title"] for a in example["assignments"]] == ["Assignment One", "Assignment Two"]  # the reader works
    data = file_of(gradebook, "canvas")
    assert canvas_delimiter(data) == ","
    ours = canvas_read(data)
    # The byte order mark stays on the first name (Canvas does not strip it) and Canvas's header test still passes.
    assert data.startswith(b"\xef\xbb\xbf") and ours["student_columns"][0] == "\ufeffStudent"
    assert [ours["student_columns"][0].removeprefix("\ufeff"), *ours["student_columns"][1:]] == \
        example["student_columns"] == list(lms.CANVAS_STUDENT_COLUMNS)
    assert ours["points_row"] == example["points_row"] == 1
    assert [a["title"] for a in ours["assignments"]] == [name for name, _ in ASSIGNMENTS]
    assert all(a["id"] is None for a in ours["assignments"]), "no Canvas id is invented: Canvas matches the title"
    assert ours["points"] == {A1: "5", A2: "4", A3: "5"}
    by_login = {s["sis_login_id"]: s for s in ours["students"]}
    assert set(by_login) == set(STUDENTS), "SIS Login ID is the nbgrader student id"
    assert by_login["alice"]["id"] == "1001" and by_login["wang"]["id"] == "", "ID is lms_user_id, never invented"
    assert by_login["alice"]["name"] == "Able, Alice" and by_login["alice"]["sis_user_id"] == ""
    assert by_login["alice"]["grades"] == {A1: "5", A2: "4", A3: ""}


def test_the_moodle_file_reads_as_moodle_reads_its_own_export(gradebook):
    example = moodle_read((EXAMPLES / "moodle_example.csv").read_bytes(), "Email address", "useremail")
    assert [r["user"] for r in example["rows"]] == ["student7@example.com", "student5@example.com"]
    ours = moodle_read(file_of(gradebook, "moodle"), "Email address", "useremail")
    assert ours["header"][0] == "Email address" and "Email address" in example["header"], \
        "the identifier has the column name of Moodle's own export, first, so that 'Map from' starts on it"
    assert ours["header"] == ["Email address", "Username", "First name", "Last name", A1, A2, A3]
    assert sorted(r["user"] for r in ours["rows"]) == sorted(s[2] for s in STUDENTS.values())
    alice = next(r for r in ours["rows"] if r["user"] == "alice@example.org")
    assert alice["grades"] == {A1: "5", A2: "4", A3: "-"}
    by_id = moodle_read(file_of(gradebook, "moodle", match="id"), "Username", "username")
    assert by_id["header"][:2] == ["Username", "Email address"]
    assert sorted(r["user"] for r in by_id["rows"]) == sorted(STUDENTS)


def test_the_plain_csv_has_one_row_per_student_and_a_total(gradebook):
    data = file_of(gradebook, "csv")
    assert not data.startswith(b"\xef\xbb\xbf"), "the plain table is for programs: no byte order mark"
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    assert rows[0] == ["Student ID", "First name", "Last name", "Email", A1, A2, A3, "Total"]
    table = {r[0]: r for r in rows[1:]}
    assert set(table) == set(STUDENTS) and len(rows) == 1 + len(STUDENTS)
    assert table["alice"][4:] == ["5", "4", "", "9"]
    assert table["quincy"][4:] == ["", "", "1.5", "1.5"]


def test_scores_are_nbgraders_own(gradebook):
    """Every cell is Gradebook.find_submission(...).score: auto, manual (which replaces auto) and extra credit."""
    from nbgrader.api import Gradebook, MissingEntry

    grades = lms.read_grades(Gradebook(f"sqlite:///{gradebook}", course_id=""))
    with Gradebook(f"sqlite:///{gradebook}", course_id="") as gb:
        for sid in STUDENTS:
            for name, _points in ASSIGNMENTS:
                try:
                    nbgrader = gb.find_submission(name, sid).score
                except MissingEntry:
                    nbgrader = None
                assert grades.score(sid, name) == nbgrader == EXPECTED.get((sid, name)), (sid, name)


def test_a_student_without_a_submission_is_left_ungraded_not_given_zero(gradebook):
    canvas = {s["sis_login_id"]: s["grades"] for s in canvas_read(file_of(gradebook, "canvas"))["students"]}
    moodle = {r["row"]["Username"]: r["grades"] for r in
              moodle_read(file_of(gradebook, "moodle"), "Email address", "useremail")["rows"]}
    plain = {r["Student ID"]: r for r in csv.DictReader(io.StringIO(file_of(gradebook, "csv").decode(), newline=""))}
    for sid in STUDENTS:
        for name, _points in ASSIGNMENTS:
            score = EXPECTED.get((sid, name))
            written = "" if score is None else lms.number(score)
            assert canvas[sid][name] == written, ("canvas", sid, name)  # blank: Canvas changes nothing there
            assert moodle[sid][name] == (written or "-"), ("moodle", sid, name)  # Moodle's "no grade"
            assert plain[sid][name] == written, ("csv", sid, name)
    assert canvas["wang"][A2] == moodle["wang"][A2] == plain["wang"][A2] == "0", "a real zero stays a zero"
    assert export(gradebook, "canvas").missing == len(STUDENTS) * len(ASSIGNMENTS) - len(EXPECTED)


def test_chinese_names_and_commas_quotes_newlines_come_back_unchanged(gradebook):
    for fmt in lms.FORMATS:
        data = file_of(gradebook, fmt)
        assert data.startswith(b"\xef\xbb\xbf") == (fmt != "csv"), f"{fmt}: UTF-8 with a BOM for the LMS files"
        text = data.decode("utf-8-sig")
        assert "小明" in text and "王" in text
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert len({len(r) for r in rows}) == 1, f"{fmt}: a name broke a row: {rows}"
        cells = {c for r in rows for c in r}
        if fmt == "canvas":
            assert "王, 小明" in cells and "O'Brien, Jr.\nthe second, Quincy \"Q\"" in cells
        else:
            assert {"小明", "王", 'Quincy "Q"', "O'Brien, Jr.\nthe second"} <= cells
        assert b'Quincy ""Q""' in data, f"{fmt}: quotes doubled inside a quoted field (RFC 4180)"


def test_a_name_that_is_a_formula_is_written_as_text(gradebook):
    assert [lms.neutralise(c) for c in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", "Ann", "")] == \
        ["'=1+1", "'+1", "'-1", "'@SUM(A1)", "'\tx", "'\rx", "Ann", ""]
    for fmt in lms.FORMATS:
        rows = list(csv.reader(io.StringIO(file_of(gradebook, fmt).decode("utf-8-sig"), newline="")))
        cells = [c for r in rows for c in r]
        assert not [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r"))], f"{fmt}: a formula cell"
        assert not [c for c in cells if c.startswith("-") and c != "-"], f"{fmt}: a formula cell"
        assert any(c.startswith("'" + INJECTION) for c in cells), f"{fmt}: Mallory's name is gone or unprefixed"
    table = export(gradebook, "moodle")
    assert not table.notes, "a neutralised name is not an identifier: nothing to tell"


def test_an_identifier_that_had_to_be_neutralised_is_named(tmp_path, empty):
    path = make_gradebook(tmp_path / "gradebook.db", empty, {"alice": STUDENTS["alice"],
                                                     "eve": ("Eve", "Evans", "-eve@example.org", "")})
    table = lms.export("moodle", db_url=f"sqlite:///{path}")
    assert len(table.notes) == 1 and "eve's Email address starts with '-'" in table.notes[0], table.notes
    assert "'-eve@example.org" in [c for r in table.rows for c in r]


def test_only_the_assignments_asked_for(gradebook):
    rows = export(gradebook, "csv", assignments=[A3, A1]).rows
    assert rows[0] == ["Student ID", "First name", "Last name", "Email", A1, A3, "Total"], "the gradebook's order"
    alice = next(r for r in rows if r[0] == "alice")
    assert alice[4:] == ["5", "", "5"]
    canvas = canvas_read(file_of(gradebook, "canvas", assignments=[A2]))
    assert [a["title"] for a in canvas["assignments"]] == [A2] and canvas["points"] == {A2: "4"}
    with pytest.raises(lms.ExportError, match=f"no assignment 09_nope \\(it has: {A1}, {A2}, {A3}\\)"):
        export(gradebook, "canvas", assignments=["09_nope"])


def test_a_missing_email_is_refused_by_name_never_invented(tmp_path, empty):
    students = {**STUDENTS, "zed": ("Zed", "Zero", "", ""), "yan": ("Yan", "Yi", "  ", "")}
    path = make_gradebook(tmp_path / "gradebook.db", empty, students)
    for fmt, match in (("moodle", None), ("canvas", "email")):
        with pytest.raises(lms.ExportError) as caught:
            lms.export(fmt, db_url=f"sqlite:///{path}", match=match)
        said = str(caught.value)
        assert said.startswith("2 student(s) have no email address") and "yan, zed" in said, said
        assert "--match id" in said and "no file was written" in said
    ours = moodle_read(lms.to_bytes(lms.export("moodle", db_url=f"sqlite:///{path}", match="id").rows, "moodle"),
                       "Username", "username")
    assert {r["user"]: r["row"]["Email address"] for r in ours["rows"]}["zed"] == "", "the blank stays blank"
    with pytest.raises(lms.ExportError, match="no gradebook at .*nothing.db: autograde a class first"):
        lms.export("csv", db_url=f"sqlite:///{tmp_path / 'nothing.db'}")
    assert not (tmp_path / "nothing.db").exists(), "nbgrader would have created an empty gradebook"


# -- the command, as docs/instructors.md gives it -----------------------------------------------------------------

def documented_commands() -> list[str]:
    """The `attn export` lines of docs/instructors.md's bash blocks (tests/test_readme.py's RUN names this file)."""
    text = (nbs.ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    lines = [re.sub(r"\s+#\s.*$", "", line.strip()) for block in re.findall(r"```bash\n(.*?)```", text, re.S)
             for line in block.splitlines()]
    return [line for line in lines if line.startswith(".venv/bin/attn export")]


def attn(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a documented `.venv/bin/attn ...` line verbatim as this interpreter's `utils.cli`, in `cwd`: stdout as
    bytes (the file itself with --out -), stderr as text."""
    words = shlex.split(command)
    assert words[0] == ".venv/bin/attn", command
    env = {**os.environ, "PYTHONPATH": str(nbs.ROOT), "ATTN_LANG": "en"}
    proc = subprocess.run([sys.executable, "-m", "utils.cli", *words[1:]], cwd=cwd, env=env, capture_output=True,
                          timeout=120)
    proc.stderr = proc.stderr.decode("utf-8")
    return proc


def test_the_documented_export_commands_run_in_a_course_folder(tmp_path, empty):
    """docs/instructors.md's `attn export` commands, verbatim, in a course folder (its nbgrader_config.py and
    gradebook.db): each writes the file it says; and a course folder without a gradebook gets one sentence, exit 2."""
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    commands = documented_commands()
    assert len(commands) == 3, commands
    refused = attn(commands[0], course)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.startswith("attn export: no gradebook at ") and len(refused.stderr.splitlines()) == 1
    assert not (course / "gradebook.db").exists() and not (course / "grades-canvas.csv").exists()

    make_gradebook(course / "gradebook.db", empty)
    for command in commands:
        proc = attn(command, course)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr[-2000:])
        fmt = re.search(r"--format (\w+)", command).group(1)
        to_terminal = "--out -" in command
        said = proc.stderr if to_terminal else proc.stdout.decode("utf-8")
        assert f"{len(STUDENTS)} students, {len(ASSIGNMENTS)} assignments" in said, (command, said)
        data = proc.stdout if to_terminal else (course / f"grades-{fmt}.csv").read_bytes()
        assert (course / f"grades-{fmt}.csv").exists() != to_terminal
        assert data == lms.to_bytes(export(course / "gradebook.db", fmt).rows, fmt), command
        if fmt == "canvas":
            assert "Grades → Import" in said
            assert canvas_read(data)["student_columns"][1:] == list(lms.CANVAS_STUDENT_COLUMNS)[1:]
        elif fmt == "moodle":
            assert "map from Email address to useremail" in said
            moodle_read(data, "Email address", "useremail")
