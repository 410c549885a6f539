"""A learner's own progress: which exercises are done, their last scores and the mistakes named, read on this machine.

Two sources, both the learner's own and both local (nothing here opens a connection or sends anything anywhere):

- the visible checks: each test cell, once run, stores its report in its output (`RESULT_MIME`, what
  `utils.results.ExerciseResult.report` writes); the saved notebook keeps it;
- the hidden tests: `attn check` records each run (`record_check`) in a per-user state folder (`state_dir`), never
  beside the notebook (nbgrader's `submit` copies the whole assignment folder): one JSON file per notebook,
  ``checks/<id>.json`` = ``{"format": 1, "assignment": id, "runs": [run, ...]}``, oldest first, the last `HISTORY`
  runs; a run is ``{"when": ISO time (UTC), "file": the notebook checked, "lang", "exercise": --exercise or null,
  "result": NotebookResult.to_json()}`` (each exercise's score, feedback and `mistake`, the catalogue's English name).

`attn progress` prints the tables (`render`), or one JSON object (`to_json`); in JupyterLab, a cell
``from utils.progress import show; show()`` shows them as HTML (`Progress._repr_mimebundle_`).
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import course, speech
from . import notebooks as nbs
from .results import RESULT_MIME
from .speech import LANGUAGES, _, speaking

#: How many runs of `attn check` each notebook's record keeps (the mistakes named since fixed come from them).
HISTORY = 20
STATE_ENV = "ATTN_STATE_DIR"
_FORMAT = 1


# -- where the record lives ----------------------------------------------------------------------------------------
def state_dir() -> Path:
    """The per-user folder of the records: $ATTN_STATE_DIR, else $XDG_STATE_HOME/attn, else %LOCALAPPDATA%/attn on
    Windows, else ~/.local/state/attn."""
    if configured := os.environ.get(STATE_ENV):
        return Path(configured)
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return Path(xdg) / "attn"
    if sys.platform == "win32" and (local := os.environ.get("LOCALAPPDATA")):
        return Path(local) / "attn"
    return Path.home() / ".local" / "state" / "attn"


def record_path(assignment: str) -> Path:
    return state_dir() / "checks" / f"{assignment}.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _assignment_of(result: Any) -> str | None:
    for exercise in result.exercises:
        with contextlib.suppress(course.UnknownName):
            return course.exercise(exercise.id)[0].id
    return None


def record_check(result: Any, notebook: str | Path, exercise: str | None = None) -> Path | None:
    """Add one run of `attn check` (its `NotebookResult`) to its notebook's record; the path written, or None. Never
    raises: where the record cannot be written (a read-only home, a full disk) it says so on stderr and goes on."""
    try:
        assignment = _assignment_of(result)
        if assignment is None:
            return None
        path = record_path(assignment)
        runs, problem = _read_runs(path)
        if problem and not runs and path.exists():  # unreadable: kept aside, and the record starts afresh
            os.replace(path, path.with_name(path.name + ".damaged"))
        run = {"when": _now(), "file": str(Path(nbs.find_notebook(notebook)).resolve()), "lang": result.lang,
               "exercise": exercise, "result": result.to_json()}
        data = {"format": _FORMAT, "assignment": assignment, "runs": [*(r["raw"] for r in runs), run][-HISTORY:]}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(temporary, path)  # whole or not at all: a run killed half-way leaves the old record
        finally:
            with contextlib.suppress(OSError):
                temporary.unlink()
        return path
    except Exception as exc:  # noqa: BLE001 - the grade is what matters: never let its record fail `attn check`
        lang = getattr(result, "lang", "en")
        with contextlib.suppress(Exception), speaking(lang if lang in LANGUAGES else "en"):
            print(_("attn check: note: this result was not recorded for `attn progress` ({error})").format(
                error=f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _exercise_entry(value: Any) -> dict[str, Any] | None:
    """A graded exercise as a report or a run stores it, checked and bounded; None when it is not one (the data
    comes from a file a person may have edited)."""
    if not isinstance(value, dict) or not isinstance(value.get("id"), str) or not _number(value.get("score")) \
            or not _number(value.get("max_score")) or not isinstance(value.get("passed"), bool):
        return None
    mistake = value.get("mistake")
    feedback = value.get("feedback")
    return {"id": value["id"], "score": float(value["score"]), "max_score": float(value["max_score"]),
            "passed": value["passed"], "mistake": mistake[:200] if isinstance(mistake, str) and mistake else None,
            "feedback": feedback[:2000] if isinstance(feedback, str) else "",
            "implemented": value.get("implemented") is not False}


def _read_runs(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The runs of one record, oldest first, each checked (with `raw`, the run as stored); and what was wrong with
    the file, if anything."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [], None
    except (OSError, UnicodeDecodeError) as exc:
        return [], f"{type(exc).__name__}: {exc}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return [], _("not JSON: {error}").format(error=exc)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        return [], _("no list of runs in it")
    runs = []
    for run in data["runs"]:
        if not isinstance(run, dict) or not isinstance(run.get("result"), dict) or not _when(run.get("when")):
            continue
        exercises = [e for e in map(_exercise_entry, run["result"].get("exercises") or []) if e]
        if not isinstance(run["result"].get("exercises"), list) or not exercises:
            continue
        runs.append({"when": run["when"], "file": run.get("file") if isinstance(run.get("file"), str) else "",
                     "lang": run.get("lang") if run.get("lang") in LANGUAGES else "en",
                     "exercise": run.get("exercise") if isinstance(run.get("exercise"), str) else None,
                     "exercises": exercises, "raw": run})
    return runs, (None if len(runs) == len(data["runs"]) else _("some runs in it could not be read"))


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _shown_time(when: datetime) -> str:
    return when.astimezone().strftime("%Y-%m-%d %H:%M")


# -- what a learner has done ---------------------------------------------------------------------------------------
def copy_path(assignment: str, lang: str) -> Path:
    """The learner's copy of a notebook in an edition: notebooks/<id>/<id>.ipynb or notebooks/<lang>/<id>/..."""
    return nbs.release_path(assignment, nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang)


def _is_course_copy(path: str) -> bool:
    """Is `path` a copy in some course folder's notebooks/ (this clone's or another's), not a file elsewhere?"""
    p = Path(path)
    edition = p.parent.parent
    return (p.stem == p.parent.name and p.suffix == ".ipynb" and any(nb.id == p.stem for nb in course.NOTEBOOKS)
            and (edition.name == "notebooks" or (edition.name in LANGUAGES and edition.parent.name == "notebooks")))


def _edition_of(path: str) -> str | None:
    """The edition of a course copy (`_is_course_copy`), None for a file elsewhere."""
    if not _is_course_copy(path):
        return None
    name = Path(path).parent.parent.name
    return name if name in LANGUAGES else "en"


@dataclass
class ExerciseProgress:
    """One exercise: what the saved notebook's test cell says (`visible`), the last `attn check` of it (`hidden`,
    with `when` and `file`), and the mistakes named to the learner, newest first: (when or None, name, where)."""

    name: str
    points: float
    visible: dict[str, Any] | None = None
    hidden: dict[str, Any] | None = None
    mistakes: list[tuple[datetime | None, str, str]] = field(default_factory=list)
    status: str = "not run"  # "done", "not yet", "check again", "not run", "left out" (cannot run on this system)

    @property
    def done(self) -> bool:
        return self.status == "done"


@dataclass
class NotebookProgress:
    """One notebook of the learner's copy: its exercises, or `problem` (not there, not readable)."""

    id: str
    path: Path
    title: str
    exercises: list[ExerciseProgress]
    saved: datetime | None = None
    problem: str | None = None
    notes: list[str] = field(default_factory=list)
    last_check: dict[str, Any] | None = None  # the last whole-notebook run: when, file, score, max_score

    @property
    def ran(self) -> bool:
        return any(e.visible or e.hidden for e in self.exercises)


def _read_notebook(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The learner's notebook as JSON (not validated: only its outputs are read), or why it cannot be read."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, _("not JSON: {error}").format(error=exc)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, _("JSON, but with no cells")
    return data, None


def _text(value: Any) -> str:
    return "".join(v for v in value if isinstance(v, str)) if isinstance(value, list) else value \
        if isinstance(value, str) else ""


def _title(data: dict[str, Any], fallback: str) -> str:
    for cell in data["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            if m := re.search(r"^# (?:\d\d · )?(.+)$", _text(cell.get("source")), re.M):
                return m.group(1).strip()[:120]
    return fallback


def _reports(data: dict[str, Any], exercises: set[str]) -> tuple[dict[str, dict[str, Any]], int]:
    """The stored report of each exercise's test cell (the cell whose grade_id is test_<name> first, else any cell
    holding a report of it), and how many reports could not be read."""
    found: dict[str, tuple[bool, dict[str, Any]]] = {}
    damaged = 0
    for cell in data["cells"]:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code" or not isinstance(cell.get("outputs"), list):
            continue
        meta = cell.get("metadata")
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        for output in cell["outputs"]:
            bundle = output.get("data") if isinstance(output, dict) else None
            if not isinstance(bundle, dict) or RESULT_MIME not in bundle:
                continue
            report = bundle[RESULT_MIME]
            if isinstance(report, str):
                with contextlib.suppress(json.JSONDecodeError):
                    report = json.loads(report)
            entry = _exercise_entry(report)
            if entry is None or entry["id"] not in exercises:
                damaged += 1
                continue
            own = grade_id == f"test_{entry['id']}"
            if entry["id"] not in found or (own and not found[entry["id"]][0]):
                found[entry["id"]] = (own, entry)
    return {name: entry for name, (_own, entry) in found.items()}, damaged


def notebook_progress(assignment: str, path: Path) -> NotebookProgress:
    """What the learner has done in one notebook: the saved copy at `path` and the records of `attn check`."""
    entry = course.notebook(assignment)
    exercises = [ExerciseProgress(e.name, e.points) for e in entry.exercises]
    progress = NotebookProgress(assignment, path, assignment, exercises)
    data, problem = _read_notebook(path)
    if data is not None:
        progress.title = _title(data, assignment)
        with contextlib.suppress(OSError):
            progress.saved = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
        reports, damaged = _reports(data, {e.name for e in exercises})
        for ex in exercises:
            ex.visible = reports.get(ex.name)
        if damaged:
            progress.notes.append(_("{n} check report(s) in the saved notebook could not be read (edited by hand?): "
                                    "run those test cells again").format(n=damaged))
    elif problem == "missing":
        progress.problem = _("not there: {path} (a fresh copy: `{command}`)").format(
            path=_shown_path(path), command="make release" if speech.language() == "en" else "attn release --lang zh")
    else:
        progress.problem = _("cannot be read ({error}): restore it from a backup (.backups/) or take a fresh copy"
                             ).format(error=problem)
    runs, damaged_record = _read_runs(record_path(assignment))
    if damaged_record:
        progress.notes.append(_("the record of your checks ({path}) is damaged ({error}): what could be read is "
                                "shown; the next `attn check` starts it afresh").format(
            path=record_path(assignment), error=damaged_record))
    mine = str(path.resolve())
    runs = [r for r in runs if r["file"] == mine or not _is_course_copy(r["file"])]  # a download, Colab's file: yours
    by_name = {ex.name: ex for ex in exercises}
    for run in runs:  # oldest first: each later run replaces what an earlier one said
        when = _when(run["when"])
        if run["exercise"] is None:
            progress.last_check = {"when": when, "file": run["file"],
                                   "score": sum(e["score"] for e in run["exercises"] if e["id"] in by_name),
                                   "max_score": sum(e["max_score"] for e in run["exercises"] if e["id"] in by_name)}
        for result in run["exercises"]:
            ex = by_name.get(result["id"])
            if ex is None or result["max_score"] == 0:  # not graded here (a module this system lacks)
                continue
            ex.hidden = {**result, "when": when, "file": run["file"]}
            if result["mistake"]:
                ex.mistakes.append((when, result["mistake"], "hidden"))
    for ex in exercises:
        if ex.visible and ex.visible["mistake"]:
            ex.mistakes.append((progress.saved, ex.visible["mistake"], "visible"))
        ex.mistakes = _newest_first(ex.mistakes)
        ex.status = _status(ex, progress.saved)
    return progress


def _newest_first(mistakes: list[tuple[datetime | None, str, str]]) -> list[tuple[datetime | None, str, str]]:
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    ordered = sorted(mistakes, key=lambda m: m[0] or oldest, reverse=True)
    seen: set[str] = set()
    return [m for m in ordered if not (m[1] in seen or seen.add(m[1]))]  # type: ignore[func-returns-value]


def _status(ex: ExerciseProgress, saved: datetime | None) -> str:
    """Done: the last `attn check` passed it (the hidden tests are the stricter), and the notebook saved since does
    not fail its visible checks; never checked, its visible checks passed. "check again": the visible checks pass in a
    notebook saved after a check that failed it."""
    visible, hidden = ex.visible, ex.hidden
    if hidden is None and visible is not None and visible["max_score"] == 0:
        return "left out"  # a module it needs is not installed here (07's Triton on macOS): not counted
    if hidden is None:
        return "not run" if visible is None else "done" if visible["passed"] else "not yet"
    newer = visible is not None and saved is not None and saved > hidden["when"]
    if newer and visible["passed"] != hidden["passed"]:
        return "check again" if visible["passed"] else "not yet"
    return "done" if hidden["passed"] else "not yet"


def _shown_path(path: Path | str) -> str:
    path = Path(path)
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(nbs.ROOT))
    return str(path)


# -- which notebooks, which language --------------------------------------------------------------------------------
def working_language() -> str:
    """The edition the learner has been working in: the one whose copy was saved with a check's report, or checked,
    last ($ATTN_LANG first; English when nothing was done yet)."""
    if os.environ.get("ATTN_LANG") in LANGUAGES:
        return os.environ["ATTN_LANG"]
    latest: tuple[float, str] = (0.0, "en")
    for lang in LANGUAGES:
        for nb in course.NOTEBOOKS:
            path = copy_path(nb.id, lang)
            with contextlib.suppress(OSError, UnicodeDecodeError):
                if RESULT_MIME in path.read_text(encoding="utf-8"):
                    latest = max(latest, (path.stat().st_mtime, lang))
    for nb in course.NOTEBOOKS:
        for run in _read_runs(record_path(nb.id))[0]:
            edition = _edition_of(run["file"]) or run["lang"]
            when = _when(run["when"])
            if when is not None:
                latest = max(latest, (when.timestamp(), edition))
    return latest[1]


def _answer_ids(data: dict[str, Any]) -> set[str]:
    ids = set()
    for cell in data["cells"]:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        if isinstance(nbgrader, dict) and isinstance(nbgrader.get("grade_id"), str):
            ids.add(nbgrader["grade_id"])
    return ids


def resolve(name: str, lang: str) -> tuple[str, Path]:
    """A notebook the learner names: an id (01_attention_intuition), its number (01), or a notebook file or folder
    (recognised by its name, else by its exercise cells); (assignment, path of the copy)."""
    ids = [nb.id for nb in course.NOTEBOOKS]
    if name in ids:
        return name, copy_path(name, lang)
    if re.fullmatch(r"\d\d?", name) and (found := [i for i in ids if i[:2] == name.zfill(2)]):
        return found[0], copy_path(found[0], lang)
    if not Path(name).exists():
        raise nbs.CourseError(_("no notebook {name}: give an id such as 01_attention_intuition, its number (01), or a "
                                "notebook file").format(name=name))
    path = nbs.find_notebook(name)
    for candidate in (path.stem, path.parent.name):
        if candidate in ids:
            return candidate, path
    data, _problem = _read_notebook(path)
    answers = _answer_ids(data) if data else set()
    best = max(course.NOTEBOOKS, key=lambda nb: len(answers & {e.name for e in nb.exercises}))
    if not answers & {e.name for e in best.exercises}:
        raise nbs.CourseError(_("{path} is not one of the course's notebooks: its name matches none and it holds none "
                                "of their exercises").format(path=path))
    return best.id, path


@dataclass
class Progress:
    """The learner's progress in the notebooks asked for, said in `lang`: text (`render`), HTML (`html`), JSON."""

    lang: str
    notebooks: list[NotebookProgress]

    @property
    def done(self) -> int:
        return sum(ex.done for nb in self.notebooks for ex in nb.exercises)

    @property
    def total(self) -> int:
        """The exercises that count: all but those that cannot run on this system."""
        return sum(ex.status != "left out" for nb in self.notebooks for ex in nb.exercises)

    def next(self) -> tuple[NotebookProgress, ExerciseProgress] | None:
        return next(((nb, ex) for nb in self.notebooks for ex in nb.exercises
                     if not ex.done and ex.status != "left out"), None)

    def render(self) -> str:
        with _speaking(self.lang):
            return _render_text(self)

    def html(self) -> str:
        with _speaking(self.lang):
            return _render_html(self)

    def to_json(self) -> dict[str, Any]:
        with _speaking(self.lang):
            return _to_json(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/html": self.html(), "text/plain": self.render()}

    def __repr__(self) -> str:
        return self.render()


def progress(names: list[str] | tuple[str, ...] = (), lang: str | None = None) -> Progress:
    """The learner's progress in the notebooks named (default: all eight of the edition), said in `lang` (default:
    the edition the learner has been working in)."""
    lang = lang or (_language_of_path(names[0]) if names and Path(names[0]).exists() else None) or working_language()
    with _speaking(lang):
        chosen = [resolve(name, lang) for name in names] or [(nb.id, copy_path(nb.id, lang)) for nb in course.NOTEBOOKS]
        return Progress(lang, [notebook_progress(assignment, path) for assignment, path in chosen])


def _language_of_path(name: str) -> str | None:
    """The language a notebook file is written in (its setup cell's `set_language`), or None."""
    with contextlib.suppress(nbs.CourseError):
        data, _problem = _read_notebook(nbs.find_notebook(name))
        for cell in (data or {}).get("cells", []):
            if isinstance(cell, dict) and cell.get("cell_type") == "code":
                if m := re.search(r"""set_language\(\s*["'](\w+)["']\s*\)""", _text(cell.get("source"))):
                    return m.group(1) if m.group(1) in LANGUAGES else None
    return None


@contextlib.contextmanager
def _speaking(lang: str):
    """Speak `lang`, with the grader's catalogue too where the hidden tests lie beside the course (not in a learner's
    pip install: there a mistake's name the course's catalogue lacks is said in English)."""
    with contextlib.suppress(FileNotFoundError):
        speech.add_grader_catalogue(nbs.grader_dir() / "locale")
    with speaking(lang):
        yield


# -- the words -------------------------------------------------------------------------------------------------------
def _status_words(status: str) -> str:
    return {"done": _("✓ done"), "not yet": _("✗ not yet"), "check again": _("↻ check again"),
            "not run": _("· not run"), "left out": _("– not on this system")}[status]


def _score(entry: dict[str, Any] | None) -> str:
    return "–" if entry is None else f"{entry['score']:g} / {entry['max_score']:g}"


def _what_to_fix(ex: ExerciseProgress, saved: datetime | None) -> str:
    """The first line of the newest feedback of an exercise not done (the likely mistake, or what failed), short."""
    if ex.done or ex.status == "left out" or not (ex.visible or ex.hidden):
        return ""
    hidden_newer = ex.hidden is not None and (ex.visible is None or saved is None or saved <= ex.hidden["when"])
    feedback = (ex.hidden if hidden_newer else ex.visible or {}).get("feedback") or ""
    line = feedback.strip().splitlines()[0] if feedback.strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"


def _mistake_words(ex: ExerciseProgress) -> str:
    said = []
    for when, name, where in ex.mistakes:
        source = _("your test cell") if where == "visible" else _("attn check")
        if when is None:
            said.append(_("{mistake} ({where})").format(mistake=_(name), where=source))
        else:
            said.append(_("{mistake} ({where}, {when})").format(mistake=_(name), where=source, when=_shown_time(when)))
    return "; ".join(said)


def _headline(nb: NotebookProgress) -> str:
    """What a notebook's table says above it: its title and file, or its problem."""
    return f"{nb.id[:2]} · {nb.title}  ({_shown_path(nb.path)})"


def _summary(nb: NotebookProgress) -> list[str]:
    """The lines under a notebook's headline: never run, the visible and hidden totals, notes."""
    lines = []
    if not nb.ran:
        lines.append(_("never run: no test cell has been run in your saved notebook, and `attn check` has not "
                       "graded it"))
    else:
        shown = [e.visible for e in nb.exercises if e.visible]
        if shown:
            lines.append(_("your test cells: {score} / {max_score} points in the notebook saved {when}").format(
                score=f"{sum(e['score'] for e in shown):g}", max_score=f"{sum(e['max_score'] for e in shown):g}",
                when=_shown_time(nb.saved) if nb.saved else "?"))
        else:
            lines.append(_("your test cells: none run in your saved notebook"))
        if nb.last_check:
            last = nb.last_check
            elsewhere = "" if last["file"] == str(nb.path.resolve()) else " " + _("(of {file})").format(
                file=_shown_path(last["file"]))
            lines.append(_("hidden tests: {score} / {max_score} points in the last `attn check`, {when}{elsewhere}")
                         .format(score=f"{last['score']:g}", max_score=f"{last['max_score']:g}",
                                 when=_shown_time(last["when"]), elsewhere=elsewhere))
        else:
            lines.append(_("hidden tests: not graded yet: run `attn check {path}`").format(path=_shown_path(nb.path)))
    return lines + nb.notes


def _header() -> list[str]:
    return [_("exercise"), _("status"), _("test cell"), _("attn check"), _("mistakes named (newest first)")]


def _row(ex: ExerciseProgress) -> list[str]:
    return [ex.name, _status_words(ex.status), _score(ex.visible), _score(ex.hidden), _mistake_words(ex)]


def _total(p: Progress) -> str:
    following = p.next()
    if following is None:
        return _("{done} of {total} exercises done: all of them").format(done=p.done, total=p.total)
    nb, ex = following
    return _("{done} of {total} exercises done; next: {number} {exercise} ({title})").format(
        done=p.done, total=p.total, number=nb.id[:2], exercise=ex.name, title=nb.title)


def _footer() -> str:
    return _("Read from your saved notebooks and the records `attn check` keeps in {folder}; nothing is sent "
             "anywhere.").format(folder=state_dir())


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _columns(text))


def _render_text(p: Progress) -> str:
    lines = []
    for nb in p.notebooks:
        lines.append(_headline(nb))
        if nb.problem:
            lines += ["  " + nb.problem, ""]
            continue
        lines += ["  " + line for line in _summary(nb)]
        if nb.ran:
            rows = [_header(), *(_row(ex) for ex in nb.exercises)]
            widths = [max(_columns(r[i]) for r in rows) for i in range(4)]
            for ex, row in zip([None, *nb.exercises], rows):
                lines.append(("    " + "  ".join(_pad(cell, widths[i]) for i, cell in enumerate(row[:4]))
                              + "  " + row[4]).rstrip())
                if ex is not None and (fix := _what_to_fix(ex, nb.saved)):
                    lines.append("      ↳ " + fix)
        lines.append("")
    return "\n".join([*lines, _total(p), _footer()])


def _render_html(p: Progress) -> str:
    def esc(text: str) -> str:
        return html.escape(text, quote=True)

    cell = 'style="text-align:left; vertical-align:top; padding:2px 8px"'
    parts = []
    for nb in p.notebooks:
        parts.append(f"<h4>{esc(_headline(nb))}</h4>")
        if nb.problem:
            parts.append(f"<p>{esc(nb.problem)}</p>")
            continue
        parts += [f"<p>{esc(line)}</p>" for line in _summary(nb)]
        if nb.ran:
            head = "".join(f"<th {cell}>{esc(h)}</th>" for h in _header())
            rows = "".join("<tr>" + "".join(f"<td {cell}>{esc(c)}</td>" for c in _row(ex)) + "</tr>"
                           + (f'<tr><td {cell}></td><td {cell} colspan="4"><small>↳ {esc(fix)}</small></td></tr>'
                              if (fix := _what_to_fix(ex, nb.saved)) else "")
                           for ex in nb.exercises)
            parts.append(f'<table style="margin-left:0"><tr>{head}</tr>{rows}</table>')
    parts += [f"<p><b>{esc(_total(p))}</b></p>", f"<p><i>{esc(_footer())}</i></p>"]
    return '<div class="attn-progress">' + "".join(parts) + "</div>"


def _iso(when: datetime | None) -> str | None:
    return when.isoformat(timespec="seconds") if when else None


def _to_json(p: Progress) -> dict[str, Any]:
    notebooks = []
    for nb in p.notebooks:
        exercises = []
        for ex in nb.exercises:
            keys = ("score", "max_score", "passed", "mistake", "feedback")
            visible = {k: ex.visible[k] for k in keys} if ex.visible else None
            hidden = ({k: ex.hidden[k] for k in (*keys, "file")}
                      | {"when": _iso(ex.hidden["when"])}) if ex.hidden else None
            exercises.append({"name": ex.name, "points": ex.points, "status": ex.status, "done": ex.done,
                              "visible": visible, "hidden": hidden,
                              "mistakes": [{"name": name, "said": _(name), "where": where, "when": _iso(when)}
                                           for when, name, where in ex.mistakes]})
        last = nb.last_check
        notebooks.append({"id": nb.id, "title": nb.title, "path": str(nb.path), "problem": nb.problem,
                          "ran": nb.ran, "saved": _iso(nb.saved), "notes": nb.notes,
                          "last_check": {**last, "when": _iso(last["when"])} if last else None,
                          "exercises": exercises})
    following = p.next()
    return {"lang": p.lang, "notebooks": notebooks, "done": p.done, "total": p.total,
            "next": {"notebook": following[0].id, "exercise": following[1].name} if following else None,
            "records": str(state_dir())}


# -- where a learner asks ---------------------------------------------------------------------------------------------
def show(*notebooks: str, lang: str | None = None) -> None:
    """Show your progress in a notebook cell (HTML, with a text fallback): `from utils.progress import show; show()`.
    Save your notebooks first: what is read is the saved files. In a notebook that set its language, that one."""
    chosen = lang or (speech.language() if speech._LANGUAGE[0] else None)  # set_language in this kernel
    result = progress(list(notebooks), chosen)
    try:
        from IPython.display import display
    except ImportError:
        print(result.render())
        return
    display(result)


def main(names: list[str], lang: str | None = None, as_json: bool = False) -> int:
    """`attn progress`: print the tables (or one JSON object); 0, or a CourseError for a notebook it cannot find."""
    result = progress(names, lang)
    print(json.dumps(result.to_json()) if as_json else result.render())
    return 0
