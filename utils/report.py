"""A class report after autograde: what the class got right, which mistakes it made, and who may need help.

`attn report [ASSIGNMENT...]` (and Formgrader's "Class report" page, `utils.formgrader_csp`) reads two things and
nothing else:

- **nbgrader's gradebook**, the one source of scores: every exercise's score for every student, through nbgrader's
  own API (`nbgrader.api.Gradebook`).
- **the autograded notebooks** (`autograded/STUDENT/ASSIGNMENT/`), for what the scores do not say: the report each
  course test cell carries (`utils.grading.RESULT_MIME`, written by the course's grader, never by the student's code),
  with the catalogued mistake it named, the section that explains it, and the checks that failed.

From them, per exercise: the score distribution (one seaborn plot per assignment), the mean, the difficulty (the mean
share of the points, as PrairieLearn's "mean score"), the discrimination (Pearson's correlation of the exercise's score
with the rest of the assignment's, as PrairieLearn's), the mean by quintile of the assignment's total, and the named
mistakes ranked by how many students made them, each with the students and a link to the notebook section that
explains it; the checks most of those who tried failed; and the students who may need help. The HTML is one
self-contained file (pictures inline, no script, a Content-Security-Policy that allows none); the CSV holds the same
counts. Every name and text that came from a submission is data: escaped in the HTML, neutralised in the CSV.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from . import course
from . import notebooks as nbs
from .i18n import _, speaking
from .results import RESULT_MIME

#: At most this many characters of any text taken from an autograded notebook (a check's name, a mistake's).
_TEXT = 200
#: A student whose share of the points is under this, or who handed nothing in, "may need help".
HELP_BELOW = 0.5
#: A named mistake made by at least this share of the students who handed in is one to re-teach.
RETEACH_SHARE = 0.1
#: How many sections "What to re-teach" lists before folding the rest (a whole course can have twenty).
SECTIONS_SHOWN = 8
#: A check failed by more than this share of those who tried the exercise: the exercise or its section may be unclear.
UNCLEAR_SHARE = 0.5
#: The report's only policy: no script of any kind, pictures inline, its own styles.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


# -- what the gradebook and the autograded notebooks hold ----------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """One student's result on one exercise: the gradebook's score, and what the grader's report said."""

    score: float
    max_score: float
    implemented: bool = True
    mistake: str | None = None
    section: str | None = None
    failed: tuple[str, ...] = ()  # the names of the checks that failed
    reported: bool = False  # the grader's report was found in the autograded notebook

    @property
    def full(self) -> bool:
        return self.max_score > 0 and self.score >= self.max_score


@dataclass
class Submission:
    student: str
    name: str  # "First Last" as the gradebook has it, or ""
    score: float
    max_score: float
    attempts: dict[str, Attempt] = field(default_factory=dict)


@dataclass
class AssignmentData:
    assignment: str
    exercises: tuple[course.Exercise, ...]
    submissions: list[Submission]
    missing: list[tuple[str, str]]  # (student, name): in the gradebook, nothing handed in
    notes: list[str] = field(default_factory=list)  # what could not be read, said to the instructor


def _text(value: Any) -> str | None:
    return value[:_TEXT] if isinstance(value, str) and value else None


def read_report(notebook_json: Any, assignment: str) -> dict[str, dict[str, Any]]:
    """The grader's report of each course exercise in an autograded notebook (parsed JSON), by exercise name.

    Only a code cell whose nbgrader grade_id is one of the course's test cells for `assignment` counts (autograde gave
    every other cell's nbgrader metadata back to the course, `utils.engine.autograde.KeepCourseCells`, and wrote each
    test cell's output itself); every value is checked for its type and cut to a bounded length."""
    tests = {f"test_{e.name}": e.name for e in course.notebook(assignment).exercises}
    found: dict[str, dict[str, Any]] = {}
    cells = notebook_json.get("cells") if isinstance(notebook_json, dict) else None
    for cell in cells if isinstance(cells, list) else ():
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
        exercise = tests.get(meta.get("grade_id")) if isinstance(meta, dict) else None
        if exercise is None or exercise in found:
            continue
        for output in cell.get("outputs") or ():
            report = output.get("data", {}).get(RESULT_MIME) if isinstance(output, dict) else None
            if isinstance(output.get("data"), dict) and isinstance(report, dict):
                checks = report.get("checks") if isinstance(report.get("checks"), list) else []
                found[exercise] = {
                    "implemented": report.get("implemented") is not False,
                    "mistake": _text(report.get("mistake")),
                    "section": _text(report.get("section")),
                    "failed": tuple(n for c in checks if isinstance(c, dict) and c.get("passed") is False
                                    and (n := _text(c.get("name")))),
                }
                break
    return found


def _api(course_dir: Path) -> Any:
    """nbgrader's API for the course folder `course_dir` (its nbgrader_config.py), as Formgrader has it."""
    import os

    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader

    here = os.getcwd()
    os.chdir(course_dir)
    try:
        app = NbGrader()
        app.load_config_file()
        api = NbGraderAPI(parent=app)
        api.coursedir.root = str(course_dir)
    finally:
        os.chdir(here)
    return api


def _db_url(coursedir: Any) -> str:
    """The gradebook's URL, a relative sqlite path (the course's `sqlite:///gradebook.db`) taken from the course's
    root, not from wherever this process happens to be."""
    url = str(coursedir.db_url)
    path = url.removeprefix("sqlite:///")
    if url.startswith("sqlite:///") and path and not path.startswith(("/", ":memory:")):
        return f"sqlite:///{Path(coursedir.root) / path}"
    return url


def collect(api: Any, assignments: Sequence[str] | None = None) -> list[AssignmentData]:
    """What the gradebook and the autograded notebooks say about each assignment (default: each of the course's
    assignments the gradebook has), in the course's order."""
    from nbgrader.api import Assignment as NbAssignment
    from nbgrader.api import Grade, Gradebook, GradeCell, Notebook, SubmittedAssignment, SubmittedNotebook

    unknown = [a for a in assignments or () if a not in known()]
    if unknown:
        raise nbs.CourseError(f"{unknown[0]!r} is not one of the course's notebooks (known: {', '.join(known())})")
    url = _db_url(api.coursedir)
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        raise nbs.CourseError(f"no gradebook at {url.removeprefix('sqlite:///')}: run `attn autograde ASSIGNMENT` in "
                              "the course folder first")
    gb = Gradebook(url, api.coursedir.course_id)
    try:
        in_gradebook = {a.name for a in gb.assignments}
        chosen = [a for a in (assignments or known()) if a in in_gradebook or assignments]
        for a in chosen:
            if a not in in_gradebook:
                raise nbs.CourseError(f"the gradebook has no assignment {a!r}: run `nbgrader generate_assignment {a}` "
                                      "and `attn autograde` first")
        students = {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) for s in gb.students}
        rows = (gb.db.query(NbAssignment.name, SubmittedAssignment.student_id, GradeCell.name, Grade.auto_score,
                            Grade.manual_score, Grade.extra_credit, GradeCell.max_score)
                .select_from(Grade).join(SubmittedNotebook).join(SubmittedAssignment).join(NbAssignment)
                .join(GradeCell, Grade.cell_id == GradeCell.id).join(Notebook, GradeCell.notebook_id == Notebook.id)
                .filter(NbAssignment.name.in_(chosen)).all())
    finally:
        gb.close()
    scores: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
    for assignment, student, cell, auto, manual, extra, max_score in rows:
        score = (manual if manual is not None else auto or 0.0) + (extra or 0.0)  # nbgrader's Grade.score
        scores[(assignment, student)][cell] = (float(score), float(max_score or 0.0))
    out = []
    for assignment in chosen:
        exercises = course.notebook(assignment).exercises
        data = AssignmentData(assignment, exercises, [], [])
        for student in sorted(students):
            graded = scores.get((assignment, student))
            if graded is None:
                data.missing.append((student, students[student]))
                continue
            reports = _autograded(api, assignment, student, data.notes)
            attempts = {}
            for e in exercises:
                score, max_score = graded.get(f"test_{e.name}", (0.0, float(e.points)))
                found = reports.get(e.name)
                attempts[e.name] = (Attempt(score, max_score, reported=True, **found) if found
                                    else Attempt(score, max_score))
            data.submissions.append(Submission(student, students[student], sum(a.score for a in attempts.values()),
                                               sum(a.max_score for a in attempts.values()), attempts))
        out.append(data)
    return out


def _autograded(api: Any, assignment: str, student: str, notes: list[str]) -> dict[str, dict[str, Any]]:
    """The grader's reports in `student`'s autograded notebook, if it lies where it should: a student id is data (a
    folder name), and one that leads out of autograded/ (`..`, a link) reads nothing."""
    top = (Path(api.coursedir.root) / api.coursedir.autograded_directory).resolve()
    path = Path(api.coursedir.format_path(api.coursedir.autograded_directory, student, assignment)) / f"{assignment}.ipynb"
    if path.resolve().parent.parent.parent != top:
        notes.append(f"{student}: the autograded notebook is not in autograded/{student}/{assignment}/: its scores are "
                     "the gradebook's, its mistakes unknown")
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return read_report(json.load(f), assignment)
    except (OSError, ValueError, RecursionError) as exc:
        notes.append(f"{student}: {assignment}.ipynb in autograded/ could not be read ({type(exc).__name__}): its "
                     "scores are the gradebook's, its mistakes unknown")
        return {}


# -- statistics ----------------------------------------------------------------------------------------------------
def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r, or None where it is undefined (fewer than three pairs, or no spread in either)."""
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return None if sxx <= 1e-12 or syy <= 1e-12 else sxy / math.sqrt(sxx * syy)


@dataclass
class Named:
    """A catalogued mistake the grader named on one exercise, and the students it named it for."""

    exercise: str
    mistake: str
    section: str | None
    students: list[str]


@dataclass
class ExerciseStats:
    exercise: course.Exercise
    scores: list[float]
    mean: float
    difficulty: float  # mean share of the points: 1 = everyone full marks
    discrimination: float | None
    quintiles: list[float | None]  # mean share of the points in each fifth of the class by total, lowest first
    full: int
    attempted: int
    mistakes: list[Named]
    checks: list[tuple[str, int]]  # failed checks, by how many who tried failed them


def exercise_stats(data: AssignmentData) -> list[ExerciseStats]:
    subs = data.submissions
    totals = [s.score for s in subs]
    order = sorted(range(len(subs)), key=lambda i: (totals[i], subs[i].student))
    fifths = [order[len(order) * q // 5: len(order) * (q + 1) // 5] for q in range(5)]
    out = []
    for e in data.exercises:
        attempts = [s.attempts[e.name] for s in subs]
        scores = [a.score for a in attempts]
        top = max((a.max_score for a in attempts), default=float(e.points)) or float(e.points)
        mean = statistics.fmean(scores) if scores else 0.0
        named: dict[str, Named] = {}
        for s, a in zip(subs, attempts):
            if a.mistake and not a.full:
                named.setdefault(a.mistake, Named(e.name, a.mistake, a.section, [])).students.append(s.student)
        tried = [a for a in attempts if a.implemented and a.reported]
        checks = Counter(name for a in tried if not a.full for name in set(a.failed))
        out.append(ExerciseStats(
            e, scores, mean, mean / top if top else 0.0,
            pearson(scores, [t - x for t, x in zip(totals, scores)]),
            [statistics.fmean(scores[i] / top for i in f) if f and top else None for f in fifths],
            sum(a.full for a in attempts), sum(a.implemented for a in attempts),
            sorted(named.values(), key=lambda n: (-len(n.students), n.mistake)),
            sorted(checks.items(), key=lambda kv: (-kv[1], kv[0])),
        ))
    return out


@dataclass
class Help:
    student: str
    name: str
    score: float
    max_score: float
    missing: list[str]  # assignments not handed in
    untried: list[str]  # exercises still raising NotImplementedError
    mistakes: list[str]


def needs_help(datas: Sequence[AssignmentData]) -> list[Help]:
    """Students under HELP_BELOW of the points over the report's assignments (a missing one counts as 0), lowest
    first."""
    people: dict[str, Help] = {}
    for data in datas:
        points = float(sum(e.points for e in data.exercises))
        for student, name in data.missing:
            h = people.setdefault(student, Help(student, name, 0.0, 0.0, [], [], []))
            h.max_score += points
            h.missing.append(data.assignment)
        for s in data.submissions:
            h = people.setdefault(s.student, Help(s.student, s.name, 0.0, 0.0, [], [], []))
            h.score += s.score
            h.max_score += s.max_score
            h.untried += [e for e, a in s.attempts.items() if not a.implemented]
            h.mistakes += [a.mistake for a in s.attempts.values() if a.mistake and not a.full]
    low = [h for h in people.values() if h.max_score and h.score / h.max_score < HELP_BELOW]
    return sorted(low, key=lambda h: (h.score / h.max_score, h.student))


# -- words -------------------------------------------------------------------------------------------------------
def _title(assignment: str, lang: str) -> str:
    from .docs import title

    try:
        return title(assignment, lang)
    except (OSError, ValueError):
        return assignment


def _grader_words() -> None:
    """The mistakes' names and sections are the grader's words: say them in the report's language too."""
    from . import speech

    speech.add_grader_catalogue(nbs.grader_dir() / "locale")


def section_link(assignment: str, section: str, lang: str, lab_url: str) -> str:
    """Where the student copy explains `section`, opened in JupyterLab: its heading's anchor (JupyterLab makes a
    heading's id from its text, spaces as '-')."""
    heading = _(section)
    folder = "notebooks" if lang == "en" else f"notebooks/{lang}"
    return (f"{lab_url.rstrip('/')}/lab/tree/{folder}/{assignment}/{assignment}.ipynb#"
            + quote(heading.replace(" ", "-"), safe=""))


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _num(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


# -- the pictures ------------------------------------------------------------------------------------------------
def _plot(data: AssignmentData, stats: Sequence[ExerciseStats]) -> tuple[str, str]:
    """One picture of the assignment's score distributions, one panel per exercise (a seaborn histogram); returns
    the PNG as a data: URL and its alt text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from . import viz

    # No words in the picture (a machine without a CJK font matplotlib reads would draw Chinese as boxes): the
    # exercises' names and numbers only; the caption under it says what the axes are, in the report's language.
    with plt.rc_context({"axes.prop_cycle": matplotlib.cycler(color=viz.PALETTE)}):
        fig, axes = plt.subplots(1, len(stats), figsize=(2.3 * len(stats) + 0.6, 2.4), squeeze=False, sharey=True)
        for ax, st in zip(axes[0], stats):
            top = float(st.exercise.points)
            bins = [x - 0.5 for x in range(int(math.ceil(top)) + 2)] if top <= 12 else 12
            sns.histplot(x=st.scores, bins=bins, ax=ax, color=viz.PALETTE[0], edgecolor="white")
            ax.set_title(st.exercise.name, fontsize=9)
            ax.set_xlim(-0.6, top + 0.6)
            ax.tick_params(labelsize=7)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90)
        plt.close(fig)
    alt = _("Histograms of the points each student earned, one per exercise: {parts}.").format(parts="; ".join(
        _("{exercise}: {full} of {n} full marks, mean {mean} of {max}").format(
            exercise=st.exercise.name, full=st.full, n=len(st.scores), mean=_num(st.mean, 1),
            max=course.points(st.exercise.points)) for st in stats))
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode(), alt


# -- the page ----------------------------------------------------------------------------------------------------
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", "Noto Sans", "Noto Sans CJK SC", sans-serif; margin: 2rem auto;
       max-width: 72rem; padding: 0 1rem; color: #1f2328; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #d0d7de; } h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0; } th, td { border: 1px solid #d0d7de; padding: .25rem .55rem;
       text-align: left; vertical-align: top; } th { background: #f6f8fa; } td.n { text-align: right; }
.lead { background: #fff8c5; border: 1px solid #d4a72c; padding: .6rem 1rem; border-radius: 6px; }
.muted { color: #59636e; } details summary { cursor: pointer; } img { max-width: 100%; }
a { color: #0550ae; } code { background: #f6f8fa; padding: 0 .2rem; }
"""


def known() -> list[str]:
    """The course's assignments, in order."""
    return [nb.id for nb in course.NOTEBOOKS]


def page_links(formgrader: str, assignment: str | None, lang: str, assignments: Sequence[str]) -> list[tuple[str, str]]:
    """The links at the top of the report Formgrader serves (under `formgrader`, its URL): back to Formgrader, the
    whole course, each assignment, the other language, the CSV."""
    here = f"{formgrader}/attn-report"
    page = f"{here}/{assignment}" if assignment else here
    with speaking(lang):
        links = [(_("Formgrader"), formgrader), (_("the course"), f"{here}?lang={lang}")]
        links += [(a[:2], f"{here}/{a}?lang={lang}") for a in (known() if assignment else assignments)]
    other = "zh" if lang == "en" else "en"
    return links + [("中文" if other == "zh" else "English", f"{page}?lang={other}"),
                    ("CSV", f"{here}/{assignment or 'course'}.csv")]


def render_html(datas: Sequence[AssignmentData], lang: str = "en", lab_url: str = "http://localhost:8888/",
                generated: str | None = None, nav: Sequence[tuple[str, str]] = ()) -> str:
    """The report as one self-contained HTML page, in `lang`; `nav`: links (label, URL) to show above it."""
    _grader_words()
    with speaking(lang):
        return _render(datas, lang, lab_url, generated or time.strftime("%Y-%m-%d %H:%M"), nav)


def _render(datas: Sequence[AssignmentData], lang: str, lab_url: str, generated: str,
            nav: Sequence[tuple[str, str]]) -> str:
    one = len(datas) == 1
    heading = (_("Class report: {title}").format(title=f"{datas[0].assignment[:2]} · {_title(datas[0].assignment, lang)}")
               if one else _("Class report: the course"))
    all_stats = {d.assignment: exercise_stats(d) for d in datas}
    source = _("From nbgrader’s gradebook and the autograded notebooks, {when}.").format(when=generated)
    terms = _("Difficulty: the mean share of the points (1 = everyone earned them all). Discrimination: how closely the "
              "exercise’s score follows the rest of the assignment’s (Pearson’s r; near 0 or negative: the exercise "
              "measures something else, or its grading does).")
    links = " · ".join(f'<a href="{_e(url)}">{_e(label)}</a>' for label, url in nav)
    parts = [f"<nav>{links}</nav>"] if nav else []
    parts += [f"<h1>{_e(heading)}</h1>", f'<p class="muted">{_e(source)} {_e(terms)}</p>']
    parts += _reteach(datas, all_stats, lang, lab_url)
    if not one:
        parts += _overview(datas, all_stats)
    for data in datas:
        parts += _assignment(data, all_stats[data.assignment], lang, lab_url, one)
    parts += _help(needs_help(datas), datas)
    notes = [n for d in datas for n in d.notes]
    if notes:
        parts.append(f"<h2>{_e(_('What could not be read'))}</h2><ul>"
                     + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>")
    return (f'<!DOCTYPE html>\n<html lang="{_e("zh-Hans" if lang == "zh" else lang)}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(heading)}</title><style>{STYLE}</style></head>\n<body><main>\n"
            + "\n".join(parts) + "\n</main></body></html>\n")


def _mistake_cells(n: Named, assignment: str, lang: str, lab_url: str, of: int) -> str:
    name = _e(_(n.mistake))
    where = (f'<a href="{_e(section_link(assignment, n.section, lang, lab_url))}">{_e(_(n.section))}</a>'
             if n.section else "—")
    shown = ", ".join(map(_e, n.students))
    who = (f"<details><summary>{_e(_('{n} students').format(n=len(n.students)))}</summary>{shown}</details>"
           if len(n.students) > 8 else shown)
    return (f"<td>{name}</td><td class='n'>{len(n.students)}</td><td class='n'>{_pct(len(n.students) / of)}</td>"
            f"<td>{where}</td><td>{who}</td>")


@dataclass
class Section:
    """A notebook section and the mistakes it explains that the class made: the students who made any of them."""

    assignment: str
    section: str
    students: set[str]
    mistakes: list[Named]


def sections(datas: Sequence[AssignmentData], all_stats: dict[str, list[ExerciseStats]]) -> list[Section]:
    """The sections that explain the mistakes named, by how many students made one of them, most first."""
    found: dict[tuple[str, str], Section] = {}
    for data in datas:
        for st in all_stats[data.assignment]:
            for m in st.mistakes:
                if m.section:
                    sec = found.setdefault((data.assignment, m.section), Section(data.assignment, m.section, set(), []))
                    sec.students.update(m.students)
                    sec.mistakes.append(m)
    return sorted(found.values(), key=lambda s: (-len(s.students), s.assignment, s.section))


def _reteach(datas: Sequence[AssignmentData], all_stats: dict[str, list[ExerciseStats]], lang: str,
             lab_url: str) -> list[str]:
    handed = {d.assignment: len(d.submissions) for d in datas}
    secs = [s for s in sections(datas, all_stats)
            if handed[s.assignment] and len(s.students) / handed[s.assignment] >= RETEACH_SHARE]
    rows = [(len(m.students) / handed[d.assignment], d, st, m) for d in datas for st in all_stats[d.assignment]
            for m in st.mistakes if handed[d.assignment] and len(m.students) / handed[d.assignment] >= RETEACH_SHARE]
    hard = [(d, st) for d in datas for st in all_stats[d.assignment] if handed[d.assignment] and st.difficulty < 0.5]
    unclear = [(d, st, check, failed) for d in datas for st in all_stats[d.assignment]
               for check, failed in st.checks[:3] if st.attempted and failed / st.attempted > UNCLEAR_SHARE]
    out = [f"<h2>{_e(_('What to re-teach'))}</h2>"]
    if not secs and not rows and not hard and not unclear:
        none = _("No catalogued mistake was made by {share} or more of the class, every exercise earned half its points "
                 "on average, and no check was failed by more than half of those who tried.").format(
            share=_pct(RETEACH_SHARE))
        out.append(f'<p class="lead">{_e(none)}</p>')
        return out
    if secs:
        lead = _("Sections to revisit: each explains mistakes that {share} or more of the students who handed in made, "
                 "most students first.").format(share=_pct(RETEACH_SHARE))
        items = []
        for sec in secs:
            link = section_link(sec.assignment, sec.section, lang, lab_url)
            by_name: dict[str, set[str]] = {}
            for m in sec.mistakes:  # one mistake named on two exercises (02's scaling, in both): its students once
                by_name.setdefault(m.mistake, set()).update(m.students)
            made = "; ".join(f"{_(name)} ({len(who)})" for name, who in
                             sorted(by_name.items(), key=lambda kv: (-len(kv[1]), kv[0])))
            said = _("{n} students ({share}): {mistakes}").format(
                n=len(sec.students), share=_pct(len(sec.students) / handed[sec.assignment]), mistakes=made)
            items.append(f'<li>{_e(sec.assignment[:2])} · <a href="{_e(link)}">{_e(_(sec.section))}</a> — {_e(said)}</li>')
        shown, more = items[:SECTIONS_SHOWN], items[SECTIONS_SHOWN:]
        folded = (f"<details><summary>{_e(_('{n} more sections').format(n=len(more)))}</summary>"
                  f'<ol start="{SECTIONS_SHOWN + 1}">{"".join(more)}</ol></details>') if more else ""
        out.append(f'<div class="lead"><p>{_e(lead)}</p><ol>{"".join(shown)}</ol>{folded}</div>')
    if rows:
        rows.sort(key=lambda r: (-r[0], r[1].assignment, r[3].mistake))
        said = _("The mistakes made by {share} or more of the students who handed in, most common first.").format(
            share=_pct(RETEACH_SHARE))
        out.append(f"<p>{_e(said)}</p>")
        head = "".join(f"<th>{_e(h)}</th>" for h in (_("exercise"), _("mistake"), _("students"), _("share"),
                                                      _("section"), _("who")))
        out.append(f"<table><thead><tr>{head}</tr></thead><tbody>" + "".join(
            f"<tr><td>{_e(d.assignment[:2])} <code>{_e(st.exercise.name)}</code></td>"
            f"{_mistake_cells(m, d.assignment, lang, lab_url, len(d.submissions))}</tr>"
            for _share, d, st, m in rows) + "</tbody></table>")
    if hard:
        said = _("Exercises that earned less than half their points on average: {list}.").format(list="; ".join(
            f"{d.assignment[:2]} {st.exercise.name} ({_num(st.difficulty)})" for d, st in hard))
        out.append(f"<p>{_e(said)}</p>")
    if unclear:
        said = _("{n} checks were failed by more than half of those who tried the exercise: the exercise, or the "
                 "section before it, may be unclear.").format(n=len(unclear))
        head = "".join(f"<th>{_e(h)}</th>" for h in (_("exercise"), _("check"), _("failed"), _("of those who tried")))
        out.append(f"<details><summary>{_e(said)}</summary><table><thead><tr>{head}</tr></thead><tbody>" + "".join(
            f"<tr><td>{_e(d.assignment[:2])} <code>{_e(st.exercise.name)}</code></td><td>{_e(check)}</td>"
            f"<td class='n'>{failed}</td><td class='n'>{st.attempted}</td></tr>"
            for d, st, check, failed in unclear) + "</tbody></table></details>")
    return out


def _overview(datas: Sequence[AssignmentData], all_stats: dict[str, list[ExerciseStats]]) -> list[str]:
    head = "".join(f"<th>{_e(h)}</th>" for h in (_("notebook"), _("handed in"), _("missing"), _("mean"),
                                                  _("full marks"), _("hardest exercise")))
    rows = []
    for d in datas:
        stats = all_stats[d.assignment]
        points = float(sum(e.points for e in d.exercises))
        mean = statistics.fmean(s.score for s in d.submissions) if d.submissions else 0.0
        full = sum(s.score >= s.max_score > 0 for s in d.submissions)
        hardest = min(stats, key=lambda s: s.difficulty) if stats and d.submissions else None
        rows.append(f"<tr><td><a href='#{_e(d.assignment)}'>{_e(d.assignment)}</a></td>"
                    f"<td class='n'>{len(d.submissions)}</td><td class='n'>{len(d.missing)}</td>"
                    f"<td class='n'>{_num(mean, 1)} / {_e(course.points(points))}</td><td class='n'>{full}</td>"
                    f"<td>{'—' if hardest is None else '<code>' + _e(hardest.exercise.name) + '</code> ' + _num(hardest.difficulty)}</td></tr>")
    return [f"<h2>{_e(_('The course'))}</h2>", f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"]


def _assignment(data: AssignmentData, stats: list[ExerciseStats], lang: str, lab_url: str, one: bool) -> list[str]:
    n = len(data.submissions)
    title = f"{data.assignment[:2]} · {_title(data.assignment, lang)}"
    out = [f'<h2 id="{_e(data.assignment)}">{_e(title if not one else _("The exercises"))}</h2>',
           f"<p>{_e(_('{n} handed in, {missing} missing.').format(n=n, missing=len(data.missing)))}</p>"]
    if not n:
        return out
    src, alt = _plot(data, stats)
    caption = _("Across: the points earned (0 to the exercise's points); up: how many students earned them.")
    out.append(f'<figure><img src="{src}" alt="{_e(alt)}"><figcaption class="muted">{_e(caption)}</figcaption></figure>')
    head = "".join(f"<th>{_e(h)}</th>" for h in (_("exercise"), _("mean"), _("difficulty"), _("discrimination"),
                                                  _("full marks"), _("tried"), _("mean by fifth of the class, lowest "
                                                                                  "first")))
    out.append(f"<table><thead><tr>{head}</tr></thead><tbody>" + "".join(
        f"<tr><td><code>{_e(st.exercise.name)}</code></td>"
        f"<td class='n'>{_num(st.mean)} / {_e(course.points(st.exercise.points))}</td>"
        f"<td class='n'>{_num(st.difficulty)}</td><td class='n'>{_num(st.discrimination)}</td>"
        f"<td class='n'>{st.full}</td><td class='n'>{st.attempted}</td>"
        f"<td>{' · '.join(_num(q) for q in st.quintiles)}</td></tr>" for st in stats) + "</tbody></table>")
    for st in stats:
        if not st.mistakes and not st.checks:
            continue
        out.append(f"<h3><code>{_e(st.exercise.name)}</code></h3>")
        if st.mistakes:
            head = "".join(f"<th>{_e(h)}</th>" for h in (_("mistake"), _("students"), _("share"), _("section"),
                                                          _("who")))
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>" + "".join(
                f"<tr>{_mistake_cells(m, data.assignment, lang, lab_url, n)}</tr>" for m in st.mistakes)
                + "</tbody></table>")
        if st.checks:
            said = _("The checks failed most often, by how many of the {n} who tried").format(n=st.attempted)
            out.append(f"<details><summary>{_e(said)}</summary><ul>"
                       + "".join(f"<li>{_e(c)}: {k}</li>" for c, k in st.checks[:8]) + "</ul></details>")
    return out


def _help(helps: list[Help], datas: Sequence[AssignmentData]) -> list[str]:
    out = [f"<h2>{_e(_('Students who may need help'))}</h2>",
           f"<p>{_e(_('Under {share} of the points, a missing notebook counting as none; lowest first.').format(share=_pct(HELP_BELOW)))}</p>"]
    if not helps:
        out.append(f"<p>{_e(_('None.'))}</p>")
        return out
    named = any(h.name for h in helps)
    head = "".join(f"<th>{_e(h)}</th>" for h in (_("student"), *([_("name")] if named else []), _("points"),
                                                  _("not handed in"), _("not tried"), _("mistakes named")))
    rows = "".join(
        f"<tr><td>{_e(h.student)}</td>{f'<td>{_e(h.name)}</td>' if named else ''}"
        f"<td class='n'>{_num(h.score, 1)} / {_e(course.points(h.max_score))}</td>"
        f"<td>{_e(', '.join(a[:2] for a in h.missing))}</td><td>{_e(', '.join(h.untried))}</td>"
        f"<td>{_e('; '.join(_(m) for m in dict.fromkeys(h.mistakes)))}</td></tr>" for h in helps)
    out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return out


# -- the CSV -----------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("kind", "assignment", "exercise", "name", "students", "of", "share", "mean", "max_score",
               "difficulty", "discrimination", "section", "who")


def render_csv(datas: Sequence[AssignmentData]) -> str:
    """The report's counts as CSV: one `exercise` row per exercise, one `mistake` row per named mistake, one `check`
    row per failed check; names and sections in English (the catalogue's), students separated by spaces. A text that
    a spreadsheet would run as a formula is written as text (`utils.lms.neutralise`)."""
    from .lms import neutralise

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for data in datas:
        n = len(data.submissions)
        for st in exercise_stats(data):
            base = {"assignment": data.assignment, "exercise": st.exercise.name}
            rows = [{**base, "kind": "exercise", "students": len(st.scores), "of": n, "mean": round(st.mean, 4),
                     "max_score": st.exercise.points, "difficulty": round(st.difficulty, 4),
                     "discrimination": "" if st.discrimination is None else round(st.discrimination, 4)}]
            rows += [{**base, "kind": "mistake", "name": m.mistake, "students": len(m.students), "of": n,
                      "share": round(len(m.students) / n, 4), "section": m.section or "", "who": " ".join(m.students)}
                     for m in st.mistakes]
            rows += [{**base, "kind": "check", "name": c, "students": k, "of": st.attempted,
                      "share": round(k / st.attempted, 4) if st.attempted else ""} for c, k in st.checks]
            for row in rows:
                w.writerow([neutralise(v) if isinstance(v := row.get(c, ""), str) else v for c in CSV_COLUMNS])
    return buf.getvalue()


# -- attn report ---------------------------------------------------------------------------------------------------
def write(course_dir: Path, assignments: Sequence[str] | None, *, lang: str = "en", out: Path | None = None,
          lab_url: str = "http://localhost:8888/") -> tuple[Path, Path, list[AssignmentData]]:
    """Write the report (HTML) and its counts (CSV) for `assignments` (default: the whole course) into `out`
    (default: COURSE/reports/); returns their paths and the data."""
    datas = collect(_api(course_dir), assignments)
    if not datas:
        raise nbs.CourseError("the gradebook has none of the course's assignments: autograde a class first")
    name = datas[0].assignment if len(datas) == 1 else "course"
    out = out or course_dir / "reports"
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if lang == "en" else f".{lang}"
    page, table = out / f"{name}{suffix}.html", out / f"{name}.csv"
    page.write_text(render_html(datas, lang, lab_url), encoding="utf-8")
    table.write_text(render_csv(datas), encoding="utf-8")
    return page, table, datas


def summary_lines(datas: Iterable[AssignmentData]) -> list[str]:
    """What `attn report` prints: per assignment, who handed in, and its most common named mistake."""
    lines = []
    for data in datas:
        stats = exercise_stats(data)
        top = max((m for st in stats for m in st.mistakes), key=lambda m: len(m.students), default=None)
        said = (_("most common mistake: {mistake} ({exercise}, {n} students)").format(
            mistake=_(top.mistake), exercise=top.exercise, n=len(top.students)) if top else _("no mistake named"))
        lines.append(_("{assignment}: {n} handed in, {missing} missing; {said}").format(
            assignment=data.assignment, n=len(data.submissions), missing=len(data.missing), said=said))
    return lines

