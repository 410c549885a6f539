"""Grades an LMS can import: nbgrader's gradebook as Canvas's or Moodle's grade-import CSV, or as a plain table.

nbgrader's gradebook (gradebook.db) stays the one source of scores: it is read only through nbgrader's own API
(`nbgrader.api.Gradebook`), and each score is the submission's `score` as nbgrader totals it (auto + manual + extra
credit). Nothing here invents a score or an identifier.

The formats, as their publishers write and read them:

Canvas (Grades → Import). Sources: Canvas's own importer and exporter, instructure/canvas-lms
app/models/gradebook_importer.rb and app/models/gradebook_exporter.rb (https://github.com/instructure/canvas-lms),
which the Instructor Guide's "How do I import grades in the Gradebook?"
(https://community.canvaslms.com/t5/Instructor-Guide/How-do-I-import-grades-in-the-Gradebook/ta-p/807) describes;
Ohio State's guide to it (https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/
import-csv-file-carmen-grades): "Student Name ... OR Student ID OR Student SIS User ID ..., SIS Login ID ...,
Section ..., Assignment Name".
  - The header row starts "Student", "ID" (the importer checks `row[0].include?("Student") && row[1].include?("ID")`),
    then "SIS User ID", "SIS Login ID" (or "SIS Login ID" alone), and the last student column must be "Section".
  - Every later column is an assignment, except the totals Canvas exports ("Current Score", "Final Grade", ...).
    A column named "Title (123)" updates assignment 123; any other name updates the assignment of that exact title,
    else the import creates a new assignment of that name. We name each column by the nbgrader assignment id.
  - A row whose first cell contains "Points Possible" gives each assignment's points; the exporter writes it second,
    as "    Points Possible" and four empty cells. We write nbgrader's max score there.
  - A student row is matched on ID (Canvas's numeric user id), else SIS User ID, else SIS Login ID, else the name
    ("Last, First" or "First Last"). We write ID = the student's `lms_user_id` in nbgrader (blank if unknown; nbgrader
    keeps it "so teachers ... can send grades to a LMS such as Canvas"), SIS User ID blank (nbgrader does not know
    it), SIS Login ID = the nbgrader student id (--match id, the default) or their email (--match email), Section
    blank (the importer reads no section).
  - A blank cell (or "-") is "no score": the import changes nothing there. A student without a submission gets a
    blank cell, never 0.
  - "All text should be UTF-8 encoded" (Canvas's SIS CSV format page, the one Canvas page on CSV encoding:
    https://developerdocs.instructure.com/services/canvas/sis/file.sis_csv); quoting is RFC 4180's ("Fields that
    contain a comma must be surrounded by double-quotes ... internal double-quotes doubled").

Moodle (Grades → Import → CSV file). Sources: docs.moodle.org "Grade import" (https://docs.moodle.org/en/Grade_import;
e.g. https://docs.moodle.org/311/en/Grade_import): "The import file format is the same as the corresponding export
format"; "By default 'Map from' is set to First Name, and 'Map to' to userid. Change both dropdowns to: 'Email
Address' to 'useremail', or to 'Id Number' to 'useridnumber'"; "email addresses are case sensitive in grade import
files". Moodle's importer, moodle/moodle grade/import/csv/classes/load_data.php, and its tests' sample file
(grade/import/csv/tests/load_data_test.php).
  - The first row names the columns; every row has as many fields as the header (Moodle refuses the file
    otherwise: "csvweirdcolumns"). One column identifies the student: "Map from" that column "to" userid, username,
    useridnumber or useremail. Each other column is mapped to an existing grade item, a new grade item, or ignored.
  - A row whose identifier is blank is not checked, and the row's grades go to the student of the row before it
    (`$this->studentid` is kept from that row): so a student without the identifier is an error here, never a blank
    cell. A student Moodle does not find ends the whole import ("usermappingerrorusernotfound").
  - We write "Email address" (useremail, the default: --match email) and "Username" (the nbgrader student id;
    username, with --match id), the matched one first so that "Map from" starts on it; then "First name",
    "Last name", then one column per assignment, named by its id.
  - "-" is no grade in both of Moodle's paths (an existing grade item: "-" or blank; a new grade item: only "-" is
    left out); its own export writes "-" for a grade not given. So a student without a submission gets "-".
  - The importer converts from the encoding chosen on the form (UTF-8 by default) and removes a UTF-8 byte order
    mark ("remove Unicode BOM from first line", lib/csvlib.class.php).

Plain CSV: "Student ID", "First name", "Last name", "Email", one column per assignment, "Total"; blank where there is no
submission; the total adds the scores shown. UTF-8 without a byte order mark, for programs (pandas, R, csv).

Encoding: the Canvas and Moodle files are UTF-8 *with* a byte order mark. Both importers accept it (Moodle removes it;
Canvas's header test is `include?("Student")`, which "\\ufeffStudent" passes, and Canvas's own exporter adds one for
users of Excel), and it is what lets Excel open the file with Chinese names intact before the instructor uploads it.

CSV injection (OWASP, https://owasp.org/www-community/attacks/CSV_Injection): a cell that starts with =, +, -, @,
a tab or a carriage return is written with a single quote in front, so that a spreadsheet shows it as text instead
of running it. Names and emails are what students typed; scores are numbers we write and are left as they are.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .speech import _

FORMATS = ("canvas", "moodle", "csv")
#: What each format matches students on unless --match says otherwise.
DEFAULT_MATCH = {"canvas": "id", "moodle": "email", "csv": "id"}
#: The LMS's name for the column that --match fills, by format and match.
MATCH_COLUMN = {("canvas", "id"): "SIS Login ID", ("canvas", "email"): "SIS Login ID",
                ("moodle", "id"): "Username", ("moodle", "email"): "Email address",
                ("csv", "id"): "Student ID", ("csv", "email"): "Email"}
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS_POSSIBLE = "    Points Possible"  # as Canvas's exporter writes it; the importer looks for "Points Possible"
MOODLE_NO_GRADE = "-"
#: OWASP's list: a cell starting with one of these is a formula (or starts one) in Excel, LibreOffice, Google Sheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: UTF-8 with a byte order mark for the two LMS files (see the module's docstring), without for the plain table.
ENCODING = {"canvas": "utf-8-sig", "moodle": "utf-8-sig", "csv": "utf-8"}


class ExportError(Exception):
    """A problem the instructor can fix (no gradebook, an unknown assignment, a student without an identifier)."""


@dataclass(frozen=True)
class Student:
    """One student of the gradebook, as nbgrader keeps them (None read as "")."""

    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""

    def sortable_name(self) -> str:
        """The name as Canvas lists students, "Last, First" (its last way to match a row); else the name there is."""
        if self.last_name and self.first_name:
            return f"{self.last_name}, {self.first_name}"
        return self.last_name or self.first_name or self.id


@dataclass
class Grades:
    """What the gradebook holds for the export: the assignments with their points, the students, the scores."""

    assignments: list[tuple[str, float]]  # (nbgrader assignment id, max score), in the gradebook's order
    students: list[Student]
    scores: dict[tuple[str, str], float] = field(default_factory=dict)  # (student id, assignment id) -> score

    def score(self, student: str, assignment: str) -> float | None:
        """The student's score for the assignment, or None when nbgrader has no (graded) submission of it."""
        return self.scores.get((student, assignment))


def read_grades(gradebook: Any, assignments: Sequence[str] | None = None) -> Grades:
    """The gradebook's assignments (those named in `assignments`, in the gradebook's order), every student, and
    each submission's score, through nbgrader's `Gradebook`."""
    every = [a.name for a in gradebook.assignments]
    chosen = list(assignments or [])
    unknown = [a for a in chosen if a not in every]
    if unknown:
        raise ExportError(_("the gradebook has no assignment {unknown} (it has: {known})").format(
            unknown=", ".join(unknown), known=", ".join(every) or _("none")))
    names = [a for a in every if a in chosen] if chosen else every
    if not names:
        raise ExportError(_("the gradebook has no assignments yet: autograde a class first (`attn autograde ID`)"))
    students = [Student(s.id, s.first_name or "", s.last_name or "", s.email or "", s.lms_user_id or "")
                for s in gradebook.students]
    if not students:
        raise ExportError(_("the gradebook has no students yet: autograde a class first (`attn autograde ID`)"))
    students.sort(key=lambda s: (s.last_name.casefold(), s.first_name.casefold(), s.id))
    grades = Grades([], students)
    for name in names:
        assignment = gradebook.find_assignment(name)
        grades.assignments.append((name, float(assignment.max_score)))
        # Each SubmittedAssignment's score, as Gradebook.find_submission(name, student).score gives it (one query
        # per assignment rather than one per student).
        for submission in assignment.submissions:
            grades.scores[(submission.student.id, name)] = float(submission.score)
    return grades


def neutralise(cell: str) -> str:
    """`cell` as a spreadsheet shows it and never runs it: a leading ' where the cell would start a formula (OWASP)."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def number(score: float) -> str:
    """A score as the LMS reads it: "10", "9.5", "1.6667" (at most four decimals, never an exponent)."""
    if not math.isfinite(score):
        raise ExportError(_("the gradebook holds a score that is not a number ({score})").format(score=score))
    text = f"{round(score, 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


@dataclass
class Table:
    """The rows of one file, header first, with the notes the instructor should read."""

    fmt: str
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    students: int = 0
    assignments: int = 0
    missing: int = 0  # cells without a submission


def table(grades: Grades, fmt: str, match: str | None = None) -> Table:
    """The rows of `fmt`'s file for `grades`; raises ExportError, naming them, when students lack the identifier
    that `match` (default: the format's) needs."""
    if fmt not in FORMATS:
        raise ExportError(_("unknown format {fmt} (known: {known})").format(fmt=fmt, known=", ".join(FORMATS)))
    match = match or DEFAULT_MATCH[fmt]
    if match == "email" and fmt != "csv":
        lacking = sorted(s.id for s in grades.students if not s.email.strip())
        if lacking:
            raise ExportError(_(
                "{count} student(s) have no email address in the gradebook, and the file matches students on it "
                "({column}): {students}. Add their addresses (`nbgrader db student import FILE.csv`, a CSV file with "
                "the columns id and email) or match on the nbgrader student id instead (--match id); no file was "
                "written").format(
                count=len(lacking), column=MATCH_COLUMN[fmt, match], students=", ".join(lacking)))
    names = [name for name, _points in grades.assignments]
    out = Table(fmt, [], students=len(grades.students), assignments=len(names))
    texts: list[list[str]] = []  # the student columns of each row, before neutralising

    def cells(student: Student) -> list[str]:
        row = []
        for name in names:
            score = grades.score(student.id, name)
            out.missing += score is None
            row.append(number(score) if score is not None else (MOODLE_NO_GRADE if fmt == "moodle" else ""))
        return row

    if fmt == "canvas":
        out.rows.append([*CANVAS_STUDENT_COLUMNS, *names])
        out.rows.append([CANVAS_POINTS_POSSIBLE, "", "", "", "", *(number(points) for _name, points in
                                                                   grades.assignments)])
        for s in grades.students:
            texts.append([s.sortable_name(), s.lms_user_id, "", s.email if match == "email" else s.id, ""])
            out.rows.append(cells(s))
        first = 2
    elif fmt == "moodle":
        ids = ["Email address", "Username"] if match == "email" else ["Username", "Email address"]
        out.rows.append([*ids, "First name", "Last name", *names])
        for s in grades.students:
            by = {"Email address": s.email, "Username": s.id}
            texts.append([by[ids[0]], by[ids[1]], s.first_name, s.last_name])
            out.rows.append(cells(s))
        first = 1
    else:
        out.rows.append(["Student ID", "First name", "Last name", "Email", *names, "Total"])
        for s in grades.students:
            texts.append([s.id, s.first_name, s.last_name, s.email])
            row = cells(s)
            got = [grades.score(s.id, name) for name in names]
            out.rows.append([*row, number(sum(g for g in got if g is not None))])
        first = 1
    header = out.rows[0]
    for index, (student, words) in enumerate(zip(grades.students, texts, strict=True)):
        safe = [neutralise(word) for word in words]
        for column, (word, written) in enumerate(zip(words, safe, strict=True)):
            if written != word and header[column] in (MATCH_COLUMN[fmt, match], "ID"):
                out.notes.append(_(
                    "{student}'s {column} starts with {char!r}, which a spreadsheet would run as a formula: it is "
                    "written as {written!r}, and the LMS will not find the student by it; correct it in the "
                    "gradebook").format(student=student.id, column=header[column], char=word[:1], written=written))
        out.rows[first + index] = [*safe, *out.rows[first + index]]
    return out


def to_bytes(rows: Iterable[Sequence[str]], fmt: str) -> bytes:
    """The file: RFC 4180 CSV (commas, quotes doubled, CRLF), UTF-8 with or without a byte order mark (ENCODING)."""
    text = io.StringIO(newline="")
    csv.writer(text, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return text.getvalue().encode(ENCODING[fmt])


def open_gradebook(db_url: str) -> Any:
    """nbgrader's Gradebook at `db_url`, refused (rather than created empty, as nbgrader would) when a SQLite file
    is missing."""
    from nbgrader.api import Gradebook

    if db_url.startswith("sqlite:///"):
        path = Path(db_url.removeprefix("sqlite:///"))
        if not path.is_file():
            raise ExportError(_("no gradebook at {path}: autograde a class first (`attn autograde ID`), or name the "
                                "gradebook with --db FILE").format(path=path.resolve()))
    # course_id "": Gradebook.check_course adds no course for an empty id, so reading writes nothing to the gradebook
    # (its queries of students, assignments and submissions are not filtered by course).
    return Gradebook(db_url, course_id="")


def export(fmt: str, *, db_url: str, assignments: Sequence[str] | None = None, match: str | None = None) -> Table:
    """The rows of `fmt`'s file for the gradebook at `db_url`."""
    gradebook = open_gradebook(db_url)
    try:
        return table(read_grades(gradebook, assignments), fmt, match)
    finally:
        gradebook.close()


def next_step(fmt: str, match: str | None = None) -> str:
    """What the instructor does with the file, in one line."""
    match = match or DEFAULT_MATCH[fmt]
    if fmt == "canvas":
        return _("next, in Canvas: Grades → Import, choose the file, Upload Data, check the changes it lists, Save "
                 "Changes (docs/instructors.md, Grades into your LMS)")
    if fmt == "moodle":
        return _("next, in Moodle: Grades → Import → CSV file, then map from {column} to {field} and each assignment "
                 "to its grade item (docs/instructors.md, Grades into your LMS)").format(
            column=MATCH_COLUMN[fmt, match], field="useremail" if match == "email" else "username")
    return ""
