"""Collect dates a submission by when it was last changed, which only the kernel sets (issue 32).

A student who writes straight into the exchange's inbound folder chooses the entry's name, time stamp included, and
owns the entry afterwards; they cannot choose its change time (st_ctime: every write, chmod, rename or link sets it to
now, and no unprivileged call sets it back). `utils.submissions.SafeCollect` believes a name only when the change
time confirms it, and otherwise dates the entry by that change time with a WARNING line. Nobody can fake a change
time without moving the clock, root included, so these tests make the order of events with real time (sleeps).

Here collect runs in this process as the collecting user (who may play every student on one machine); the class
with real Unix users, a due date, autograde and nbgrader's late penalty is in `test_a_late_entry_under_an_earlier_
name_scores_zero_and_an_honest_one_keeps_its_score` (slow).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import parse_utc

from utils import notebooks as nbs
from utils import submissions
from utils.submissions import SafeCollect

from .conftest import fill_answers, nbgrader
from .unix_users import ensure_user, require_unix_users, run_as, shared_folder

A = "01_attention_intuition"
COURSE = "attention-course"
LOG = "collect-dates-test"
DATED = "dated by when it was last changed"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _stamp(when: datetime.datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"


class _Class:
    """An exchange and a course of the collecting user's, with a gradebook that holds the assignment."""

    def __init__(self, base: Path, gradebook: Path) -> None:
        self.exchange, self.course = base / "exchange", base / "course"
        self.inbound = self.exchange / COURSE / "inbound"
        self.inbound.mkdir(parents=True)
        self.inbound.chmod(0o3733)
        self.course.mkdir()
        shutil.copy(gradebook, self.course / "gradebook.db")  # made once: nbgrader's migrations take a second or two
        self.db = f"sqlite:///{self.course / 'gradebook.db'}"

    def due(self, when: datetime.datetime | None) -> None:
        with Gradebook(self.db, COURSE) as gb:
            gb.update_or_create_assignment(A, duedate=when)

    def entry(self, student: str, named: datetime.datetime, suffix: str = "x", text: str = "{}") -> Path:
        """What nbgrader submit leaves: a folder named with `named`, the notebook and timestamp.txt, written now."""
        path = self.inbound / f"{student}+{A}+{_stamp(named)}+{suffix}"
        path.mkdir()
        (path / f"{A}.ipynb").write_text(text)
        (path / "timestamp.txt").write_text(_stamp(named))
        return path

    def collect(self, caplog: pytest.LogCaptureFixture, **traits) -> dict[str, datetime.datetime]:
        """Collect (as `nbgrader collect` would, with `traits` on SafeCollect); each student's timestamp.txt."""
        coursedir = CourseDirectory(root=str(self.course), course_id=COURSE, assignment_id=A, db_url=self.db)
        caplog.clear()
        collect = SafeCollect(coursedir=coursedir, authenticator=Authenticator(), root=str(self.exchange),
                              log=logging.getLogger(LOG), **traits)
        collect.start()
        submitted = self.course / "submitted"
        return {s.name: parse_utc((s / A / "timestamp.txt").read_text()) for s in submitted.iterdir()}


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory) -> Path:
    """A gradebook holding the assignment, without a due date."""
    path = tmp_path_factory.mktemp("gradebook") / "gradebook.db"
    # nbgrader runs `alembic` when it makes a gradebook (as the course's nbgrader_config.py arranges for its commands)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
        with Gradebook(f"sqlite:///{path}", COURSE) as gb:
            gb.update_or_create_assignment(A, duedate=None)
    return path


@pytest.fixture
def klass(tmp_path, caplog, gradebook):
    caplog.set_level(logging.INFO, LOG)
    return _Class(tmp_path, gradebook)


def _dated(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if DATED in r.getMessage()]


def test_an_honest_entry_is_dated_by_its_name(klass, caplog):
    named = _utcnow()
    klass.entry("alice", named)
    dates = klass.collect(caplog)
    assert dates == {"alice": named}
    assert _dated(caplog) == []
    assert (klass.course / "submitted" / "alice" / A / "timestamp.txt").read_text() == _stamp(named)


def test_an_entry_named_before_it_was_written_is_dated_by_its_change_time(klass, caplog):
    before = _utcnow()
    entry = klass.entry("mallory", before - datetime.timedelta(minutes=5))
    dates = klass.collect(caplog)
    assert before - datetime.timedelta(seconds=1) <= dates["mallory"] <= _utcnow()
    changed = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=os.stat(entry).st_ctime_ns // 1000)
    assert dates["mallory"] >= changed
    [line] = _dated(caplog)
    assert re.fullmatch(
        rf"mallory: the submission named {re.escape(_stamp(before - datetime.timedelta(minutes=5)))} was last "
        rf"changed at {re.escape(_stamp(dates['mallory']))}, 30\d s later: dated by when it was last changed "
        rf"\(inbound entry '.*'\)", line), line


def test_an_entry_named_in_the_future_is_dated_by_its_change_time(klass, caplog):
    """A name in the future would make the entry nbgrader's pick (the latest) for ever."""
    now = _utcnow()
    klass.entry("mallory", now - datetime.timedelta(seconds=1), "honest")
    klass.entry("mallory", datetime.datetime(2099, 1, 1), "future", text='{"future": 1}')
    dates = klass.collect(caplog)
    assert dates["mallory"] < datetime.datetime(2099, 1, 1)
    [line] = _dated(caplog)
    assert "the submission named 2099-01-01 00:00:00.000000 UTC" in line and " s earlier: " in line


def test_an_on_time_entry_changed_after_the_due_date_is_late(klass, caplog):
    """Adding a file (or editing one, or changing a mode) after the due date makes the entry late, past the
    tolerance a submit needs to copy its files."""
    named = _utcnow()
    entry = klass.entry("carol", named)
    time.sleep(0.3)
    due = _utcnow()
    klass.due(due)
    assert klass.collect(caplog, timestamp_tolerance=1.0) == {"carol": named}, "on time, untouched"
    time.sleep(1.2)
    (entry / "notes.txt").write_text("added after the due date")
    shutil.rmtree(klass.course / "submitted")
    late = klass.collect(caplog, timestamp_tolerance=1.0)["carol"]
    assert late > due + datetime.timedelta(seconds=1)
    assert len(_dated(caplog)) == 1 and _dated(caplog)[0].startswith("carol: ")
    # deeper in the entry too: a folder inside it, a file changed there
    shutil.rmtree(klass.course / "submitted")
    (entry / "notes.txt").unlink()
    (entry / "sub").mkdir()
    (entry / "sub" / "deep.txt").write_text("x")
    time.sleep(1.2)
    (entry / "sub" / "deep.txt").write_text("edited")
    again = klass.collect(caplog, timestamp_tolerance=1.0)["carol"]
    assert again > late + datetime.timedelta(seconds=1)


def test_with_before_duedate_a_late_entry_under_an_earlier_name_is_not_picked(klass, caplog):
    """nbgrader picks the latest entry before the due date (--before-duedate): by date, not by name."""
    on_time = _utcnow()
    klass.entry("mallory", on_time, "honest", text='{"honest": 1}')
    time.sleep(0.3)
    due = _utcnow()
    klass.due(due)
    time.sleep(1.5)
    # After the due date (and past the tolerance), a better notebook named between the honest one and the due date.
    klass.entry("mallory", on_time + (due - on_time) / 2, "forged", text='{"forged": 1}')
    dates = klass.collect(caplog, before_duedate=True, timestamp_tolerance=1.0)
    assert dates == {"mallory": on_time}
    assert json.loads((klass.course / "submitted" / "mallory" / A / f"{A}.ipynb").read_text()) == {"honest": 1}
    shutil.rmtree(klass.course / "submitted")
    dates = klass.collect(caplog, timestamp_tolerance=1.0)  # the latest: the forged one, late
    assert dates["mallory"] > due
    assert json.loads((klass.course / "submitted" / "mallory" / A / f"{A}.ipynb").read_text()) == {"forged": 1}


def test_what_others_add_to_an_open_entry_does_not_make_it_late(klass, caplog):
    """nbgrader's own submit leaves the entry 0777: a file another user adds there is not the student's (it is not
    collected) and changes the folder's time, which therefore does not count for a folder others may write in."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the added file another owner")
    named = _utcnow()
    entry = klass.entry("carol", named)
    entry.chmod(0o777)
    time.sleep(1.5)
    (entry / "bob-was-here.txt").write_text("x")
    os.chown(entry / "bob-was-here.txt", 4242, -1)
    assert klass.collect(caplog, timestamp_tolerance=1.0) == {"carol": named}
    assert _dated(caplog) == []


def test_an_entry_changed_while_it_is_collected_is_dated_by_what_was_copied(klass, caplog, monkeypatch):
    named = _utcnow()
    klass.entry("mallory", named, text='{"first": 1}')
    time.sleep(1.5)
    run = submissions.Copy.run

    def changed_first(self, src, dest, *args, **kwargs):  # the student's write lands between dating and copying
        (Path(src) / f"{A}.ipynb").write_text('{"changed": 1}')
        return run(self, src, dest, *args, **kwargs)

    monkeypatch.setattr(submissions.Copy, "run", changed_first)
    dates = klass.collect(caplog, timestamp_tolerance=1.0)
    assert json.loads((klass.course / "submitted" / "mallory" / A / f"{A}.ipynb").read_text()) == {"changed": 1}
    assert dates["mallory"] > named + datetime.timedelta(seconds=1)
    assert len(_dated(caplog)) == 1


# -- a class with real Unix users, a due date and nbgrader's late penalty -----------------------------------------
ALICE, BOB, CAROL = "attn-alice", "attn-bob", "attn-carol"
TOLERANCE = 5.0

_FORGE = r"""
import json, os, sys
inbound, name, notebook, stamp = json.loads(sys.argv[1])
entry = os.path.join(inbound, name)
os.mkdir(entry)
open(os.path.join(entry, "01_attention_intuition.ipynb"), "w").write(notebook)
open(os.path.join(entry, "timestamp.txt"), "w").write(stamp)
"""


def _as_student(user: str, home: Path, *args: str) -> str:
    opts = ["--course", COURSE, f"--Exchange.root={home.parent / 'exchange'}",
            "--ExchangeFactory.submit=utils.submissions.SafeSubmit"]
    proc = run_as(user, [sys.executable, "-m", "nbgrader", *args, *opts], cwd=home,
                  env={"JUPYTER_DATA_DIR": str(home / ".jupyter")})
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_late_entry_under_an_earlier_name_scores_zero_and_an_honest_one_keeps_its_score():
    """Issue 32's attack: with penalty_method = "zero", alice submits on time with nbgrader submit; after the due
    date bob writes straight into inbound an entry named before it, and carol edits the notebook of her on-time
    entry. Collect dates both by when they were last changed (one WARNING line each), autograde finds them late and
    nbgrader's late penalty takes their points; alice keeps hers."""
    require_unix_users(through_view=True)
    with shared_folder("attn-collect-dates-") as base:
        users = {u: ensure_user(u) for u in (ALICE, BOB, CAROL)}
        exchange, course = base / "exchange", base / "course"
        exchange.mkdir()
        exchange.chmod(0o1777)
        course.mkdir(mode=0o700)
        shutil.copytree(nbs.SOLUTIONS / A, course / "solutions" / A)
        config = (nbs.ROOT / "nbgrader_config.py").read_text()
        (course / "nbgrader_config.py").write_text(config + (
            '\nc.LateSubmissionPlugin.penalty_method = "zero"\n'
            f"c.SafeCollect.timestamp_tolerance = {TOLERANCE}\n"))
        env = {"ATTN_EXCHANGE": str(exchange)}
        nbgrader(course, "generate_assignment", A, env=env)
        nbgrader(course, "release_assignment", A, env=env)
        solved = json.dumps(fill_answers(nbs.read(course / "release" / A / f"{A}.ipynb"), A), indent=1)
        homes = {}
        for user, entry in users.items():
            homes[user] = base / f"home-{user}"
            (homes[user] / A).mkdir(parents=True, mode=0o700)
            (homes[user] / A / f"{A}.ipynb").write_text(solved)
            for path in [homes[user], *homes[user].rglob("*")]:
                os.lchown(path, entry.pw_uid, entry.pw_gid)
        with ThreadPoolExecutor(2) as pool:  # alice and carol hand in the solution with nbgrader submit, on time
            outs = dict(zip((ALICE, CAROL), pool.map(lambda u: _as_student(u, homes[u], "submit", A), (ALICE, CAROL))))
        entries = {u: Path(re.search(r"Destination: (.*)", outs[u]).group(1).strip()) for u in outs}
        named = {u: parse_utc(p.name.rsplit("+", 3)[2]) for u, p in entries.items()}
        # The due date: after both names and past the tolerance of both; bob and carol act after it.
        due = max(named.values()) + datetime.timedelta(seconds=TOLERANCE + 0.5)
        while _utcnow() < due + datetime.timedelta(seconds=1.2):
            time.sleep(0.2)
        earlier = due - datetime.timedelta(minutes=1)
        forged = f"{BOB}+{A}+{_stamp(earlier)}+forged"
        inbound = exchange / COURSE / "inbound"
        run_as(BOB, [sys.executable, "-c", _FORGE, json.dumps([str(inbound), forged, solved, _stamp(earlier)])])
        run_as(CAROL, [sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(' ')",
                       str(entries[CAROL] / f"{A}.ipynb")])
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE) as gb:
            gb.update_or_create_assignment(A, duedate=due)
        collect = nbgrader(course, "collect", A, env=env)
        autograde = nbgrader(course, "autograde", A, "--create", env=env)

        dated = re.findall(rf"\| WARNING\] (.*{DATED}.*)", collect)
        assert sorted(line.split(":")[0] for line in dated) == [BOB, CAROL], collect
        bob_line = next(line for line in dated if line.startswith(BOB))
        assert f"the submission named {_stamp(earlier)} was last changed at " in bob_line, bob_line
        stamps = {u: parse_utc((course / "submitted" / u / A / "timestamp.txt").read_text()) for u in users}
        assert stamps[ALICE] == named[ALICE] <= due
        assert stamps[BOB] > due and stamps[CAROL] > due, (stamps, due)
        assert earlier < due, "the attack: by its name alone, bob's entry was on time"
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE) as gb:
            got = {u: gb.find_submission(A, u) for u in users}
            full = gb.find_assignment(A).max_score
            scores = {u: (s.score, s.late_submission_penalty, s.total_seconds_late > 0) for u, s in got.items()}
        assert full > 0
        assert scores == {ALICE: (full, 0.0, False), BOB: (full, full, True), CAROL: (full, full, True)}, scores
        assert re.search(rf"{BOB}.* is [\d.]+ seconds late", autograde), autograde[-3000:]
