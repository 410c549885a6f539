"""What a student hands in is data (issue 20): file and exchange tricks against collect, autograde and feedback.

One class on one machine, with real Unix users: attn-alice plays every trick (links out of her submission, a pipe, a
link to /dev/zero, a 2 GB file, 5000 files, hostile names, Python modules beside her notebook, an entry named for
bob, a link planted in inbound), bob and carol hand in honest work, and three more submissions are put into
submitted/ by hand. The instructor (root) runs the README's commands once; each test then checks one side of it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from traitlets.config import LoggingConfigurable

from utils import notebooks as nbs
from utils.submissions import Copy, SafeCollect, SafeReleaseAssignment, bad_name

from .conftest import fill_answers, nbgrader
from .unix_users import ensure_user, require_unix_users, run_as, shared_folder

A = "01_attention_intuition"
COURSE = "attention-course"
ALICE, BOB, CAROL = "attn-alice", "attn-bob", "attn-carol"
SECRET = "ROOT-ONLY-SECRET-7f3a"
MODULES = ("torch.py", "sitecustomize.py", "conftest.py", "nbgrader_config.py", "utils/__init__.py")
LATER = "2099-01-01 00:00:0{}.000000 UTC"  # newer than any real submission: collect would pick these first


# -- the copy itself, without nbgrader or root ------------------------------------------------------------------
class _Owner(LoggingConfigurable):
    def __init__(self, **limits: int) -> None:
        super().__init__(log=logging.getLogger("submissions-test"))
        self.coursedir = CourseDirectory(**limits)


@pytest.mark.parametrize("name, refused", [
    ("notes.txt", False), ("mes notes é 注意.md", False), ("-rf", True), ("..x", True), (".bashrc", True),
    ("new\nline", True), ("tab\tname", True), ("rtl\u202eexe.txt", True), ("bad\udcff.txt", True), ("x" * 101, True),
    ("trailing.", True), ("back\\slash", True), ("~", True),
])
def test_hostile_names_are_refused(name, refused):
    assert (bad_name(name, 100) is not None) == refused


def test_copy_keeps_to_regular_files_within_the_limits(tmp_path, caplog):
    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    (tmp_path / "private.txt").write_text("not the student's")
    (src / "a.ipynb").write_text("{}")
    for i in range(5):
        (src / f"f{i}.txt").write_bytes(b"x" * 900)
    (src / "big.bin").write_bytes(b"x" * 2000)
    (src / "link.txt").symlink_to(tmp_path / "private.txt")
    (src / "dir-link").symlink_to(tmp_path)
    os.mkfifo(src / "pipe")
    deep = src
    for level in range(3):
        deep = deep / f"d{level}"
        deep.mkdir()
    (deep / "deep.txt").write_text("x")
    caplog.set_level(logging.WARNING, "submissions-test")
    owner = _Owner(max_file_size=1, max_dir_size=3)  # KB, as nbgrader counts them: 1000 and 3000 bytes
    copy = Copy(owner, "alice", "collected")
    copy.max_depth = 2
    copy.run(str(src), str(dest), first=["a.ipynb"])
    assert copy.copied == ["a.ipynb", "f0.txt", "f1.txt", "f2.txt"]
    assert sorted(p.name for p in dest.rglob("*")) == ["a.ipynb", "d0", "d1", "f0.txt", "f1.txt", "f2.txt"]
    assert not any(p.is_symlink() for p in dest.rglob("*"))
    assert caplog.messages == [
        "alice: 'big.bin' not collected: 2000 bytes, over the limit of 1000 per file (CourseDirectory.max_file_size)",
        "alice: 'd0/d1/d2' not collected: deeper than 2 folders (SubmissionFiles.max_depth)",
        "alice: 'dir-link' not collected: it is a link (links are never followed)",
        ("alice: 'f3.txt' and everything after it not collected: the submission would pass 3000 bytes in all "
         "(CourseDirectory.max_dir_size)"),
    ]


def test_copy_takes_only_files_of_the_entrys_owner(tmp_path, caplog):
    src = tmp_path / "src"
    src.mkdir()
    (src / "mine.txt").write_text("x")
    caplog.set_level(logging.WARNING, "submissions-test")
    copy = Copy(_Owner(), "bob", "collected", owners={os.getuid() + 1})
    copy.run(str(src), str(tmp_path / "dest"))
    assert copy.copied == []
    assert caplog.messages[0].startswith("bob: 'mine.txt' not collected: it belongs to ")


# -- a class on one machine ----------------------------------------------------------------------------------------
def _nbgrader(course: Path, exchange: Path, *args: str, ok: bool = True) -> str:
    return nbgrader(course, *args, env={"ATTN_EXCHANGE": str(exchange)}, ok=ok)


def _as_student(user: str, home: Path, *args: str, submit: str | None = None) -> str:
    opts = ["--course", COURSE, f"--Exchange.root={home.parent / 'exchange'}"]
    if submit:  # what the hub's nbgrader_config.py for students should say (deploy/jupyterhub)
        opts.append(f"--ExchangeFactory.submit={submit}")
    # runuser sets HOME to the user's own: the data folder (nbgrader's cache of submissions) is named instead.
    proc = run_as(user, [sys.executable, "-m", "nbgrader", *args, *opts], cwd=home,
                  env={"JUPYTER_DATA_DIR": str(home / ".jupyter")})
    return proc.stdout + proc.stderr


_PLANT = r"""
import json, os, sys
entry, inbound, rootonly, markers, solved = json.loads(sys.argv[1])
def at(*parts): return os.path.join(entry, *parts)
os.symlink(os.path.join(rootonly, "secret.txt"), at("secret.txt"))  # a root-only file of the grading machine
os.symlink(os.path.join(rootonly, "secret.txt"), at("leak.html"))   # ... which feedback would hand back
os.symlink(rootonly, at("outside"))                                 # a folder outside
os.symlink("/dev/zero", at("zero"))                                 # endless
os.mkfifo(at("pipe"))                                               # reading it blocks forever
with open(at("huge.bin"), "wb") as f:
    f.truncate(2 * 10**9)                                           # 2 GB, sparse
os.mkdir(at("zzz-many"))
for i in range(5000):
    open(at("zzz-many", f"f{i:04}.txt"), "w").write("x")
for name in ("new\nline.txt", "-rf", "x" * 250):
    open(at(name), "w").write("x")
open(os.fsencode(at("bad")) + b"\xff.txt", "w").write("x")
# An entry named for bob, newer than his own, holding the solution; a link and a pipe in inbound, newer than hers.
forged = os.path.join(inbound, "attn-bob+01_attention_intuition+2099-01-01 00:00:01.000000 UTC+forged")
os.mkdir(forged)
open(os.path.join(forged, "01_attention_intuition.ipynb"), "w").write(solved)
open(os.path.join(forged, "timestamp.txt"), "w").write("2099-01-01 00:00:01.000000 UTC")
os.symlink(rootonly, os.path.join(inbound, "attn-alice+01_attention_intuition+2099-01-01 00:00:02.000000 UTC+lnk"))
os.mkfifo(os.path.join(inbound, "attn-alice+01_attention_intuition+2099-01-01 00:00:03.000000 UTC+fifo"))
"""

_PRY = r"""
import json, os, shutil, sys
paths = json.loads(sys.argv[1])
done = {}
def attempt(what, action):
    try:
        action()
        done[what] = "done"
    except OSError as e:
        done[what] = type(e).__name__
attempt("list inbound", lambda: os.listdir(paths["inbound"]))
attempt("list the feedback", lambda: os.listdir(paths["feedback"]))
attempt("read alice's notebook", lambda: open(os.path.join(paths["alice"], paths["notebook"])).read())
attempt("replace alice's notebook", lambda: open(os.path.join(paths["alice"], paths["notebook"]), "w").write("{}"))
attempt("add a file to alice's entry", lambda: open(os.path.join(paths["alice"], "bob.txt"), "w").write("x"))
attempt("delete alice's entry", lambda: shutil.rmtree(paths["alice"]))
attempt("rename alice's entry", lambda: os.rename(paths["alice"], paths["alice"] + "-gone"))
attempt("rename carol's entry", lambda: os.rename(paths["carol"], paths["carol"] + "-gone"))
attempt("replace the released notebook", lambda: open(paths["released"], "w").write("{}"))
attempt("delete the released notebook", lambda: os.unlink(paths["released"]))
attempt("rename the course folder", lambda: os.rename(paths["course"], paths["course"] + "-gone"))
# nbgrader's own submit leaves carol's entry 0777: a student who learned its name could add to it.
attempt("add a file to carol's entry", lambda: open(os.path.join(paths["carol"], "bob-was-here.txt"), "w").write("x"))
print(json.dumps(done))
"""


def _solved(release: Path) -> str:
    return json.dumps(fill_answers(nbs.read(release), A), indent=1)


@pytest.fixture(scope="module")
def klass():
    require_unix_users(through_view=True)
    with shared_folder("attn-submissions-") as base:
        users = {u: ensure_user(u) for u in (ALICE, BOB, CAROL)}
        rootonly, markers, exchange, course = base / "rootonly", base / "markers", base / "exchange", base / "course"
        rootonly.mkdir(mode=0o700)
        (rootonly / "secret.txt").write_text(SECRET)
        (rootonly / "secret.txt").chmod(0o600)
        markers.mkdir()
        markers.chmod(0o1777)
        exchange.mkdir()
        exchange.chmod(0o1777)  # as a hub's
        course.mkdir(mode=0o700)  # the instructor's: no student may enter it
        shutil.copytree(nbs.SOLUTIONS / A, course / "solutions" / A)
        shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
        logs = {"generate": _nbgrader(course, exchange, "generate_assignment", A),
                "release": _nbgrader(course, exchange, "release_assignment", A)}
        solved = _solved(course / "release" / A / f"{A}.ipynb")

        homes = {}
        for user, entry in users.items():
            homes[user] = base / f"home-{user}"
            homes[user].mkdir(mode=0o700)
            os.chown(homes[user], entry.pw_uid, entry.pw_gid)
        with ThreadPoolExecutor(2) as pool:  # at once: the CLI's start-up is most of the time
            list(pool.map(lambda u: _as_student(u, homes[u], "fetch_assignment", A), (ALICE, BOB)))
        (homes[CAROL] / A).mkdir()  # carol has her copy from elsewhere: only submitting matters for her

        # alice: the solution and, beside it, modules that would announce being imported; bob: the blank copy.
        work = homes[ALICE] / A
        (work / f"{A}.ipynb").write_text(solved)
        (work / "extra.ipynb").write_text(solved)
        (work / "leak.ipynb").write_text(solved)
        for module in MODULES:
            (work / module).parent.mkdir(exist_ok=True)
            marker = markers / module.replace("/", "_")
            (work / module).write_text(f"open({str(marker)!r}, 'w').write('imported')\nraise SystemExit(3)\n")
        (homes[CAROL] / A / f"{A}.ipynb").write_text(solved)
        for user in (ALICE, CAROL):
            for path in [homes[user], *homes[user].rglob("*")]:
                os.lchown(path, users[user].pw_uid, users[user].pw_gid)
        safe = "utils.submissions.SafeSubmit"
        with ThreadPoolExecutor(3) as pool:  # carol submits with nbgrader's own submit, the others with SafeSubmit
            outs = dict(zip(users, pool.map(
                lambda u: _as_student(u, homes[u], "submit", A, submit=None if u == CAROL else safe), users)))
        entries = {u: Path(re.search(r"Destination: (.*)", outs[u]).group(1).strip()) for u in users}
        inbound = exchange / COURSE / "inbound"
        # alice fills her own entry with tricks (she owns it), names one for bob and plants a link in inbound.
        run_as(ALICE, [sys.executable, "-c", _PLANT,
                       json.dumps([str(entries[ALICE]), str(inbound), str(rootonly), str(markers), solved])])
        paths = {"inbound": str(inbound), "feedback": str(exchange / COURSE / "feedback"),
                 "alice": str(entries[ALICE]), "carol": str(entries[CAROL]), "notebook": f"{A}.ipynb",
                 "released": str(exchange / COURSE / "outbound" / A / f"{A}.ipynb"), "course": str(exchange / COURSE)}
        (exchange / COURSE / "feedback").mkdir(mode=0o711)  # as release_feedback makes it, for bob to try
        pried = json.loads(run_as(BOB, [sys.executable, "-c", _PRY, json.dumps(paths)]).stdout)
        (exchange / COURSE / "feedback").rmdir()

        logs["collect"] = _nbgrader(course, exchange, "collect", A)
        # Three submissions handed in another way (README: put into submitted/ by hand), each with a trick.
        hand = {s: course / "submitted" / s / A for s in ("dave", "erin", "frank")}
        for folder in hand.values():
            folder.mkdir(parents=True)
        shutil.copy(course / "release" / A / f"{A}.ipynb", hand["dave"])
        (hand["dave"] / "secret.html").symlink_to(rootonly / "secret.txt")
        os.mkfifo(hand["dave"] / "pipe")
        (hand["erin"] / f"{A}.ipynb").symlink_to(course / "solutions" / A / f"{A}.ipynb")  # the solution itself
        os.mkfifo(hand["frank"] / f"{A}.ipynb")  # reading it would block autograde forever
        logs["autograde"] = _nbgrader(course, exchange, "autograde", A, "--create")
        logs["generate_feedback"] = _nbgrader(course, exchange, "generate_feedback", A)
        logs["release_feedback"] = _nbgrader(course, exchange, "release_feedback", A)
        logs["fetch_feedback"] = _as_student(ALICE, homes[ALICE], "fetch_feedback", A)
        yield {"base": base, "course": course, "exchange": exchange, "logs": logs, "homes": homes,
               "entries": entries, "pried": pried, "markers": markers}


def _lines(log: str, student: str) -> list[str]:
    """The WARNING lines about a student's files. Whether collect dated the entry by its change time depends on how
    long alice took to plant her tricks after submitting (tests/test_collect_dates.py checks the dating)."""
    return [m.group(1) for m in re.finditer(rf"\| WARNING\] ({re.escape(student)}: .*)", log)
            if "dated by when it was last changed" not in m.group(1)]


@pytest.mark.slow
def test_collect_copies_only_a_students_own_bounded_regular_files(klass):
    collected = klass["course"] / "submitted" / ALICE / A
    names = sorted(str(p.relative_to(collected)) for p in collected.rglob("*") if "zzz-many/" not in str(p))
    assert names == sorted([f"{A}.ipynb", "conftest.py", "extra.ipynb", "leak.ipynb", "nbgrader_config.py",
                            "sitecustomize.py", "submission_secret.txt", "timestamp.txt", "torch.py", "utils",
                            "utils/__init__.py", "zzz-many"])
    assert not any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in collected.rglob("*"))
    # 500 entries looked at (the ten refused above included), the 479th file of zzz-many/ the first one past them
    assert sorted(p.name for p in (collected / "zzz-many").iterdir()) == [f"f{i:04}.txt" for i in range(478)]
    assert sum(p.stat().st_size for p in collected.rglob("*") if p.is_file()) < 50_000_000
    assert _lines(klass["logs"]["collect"], ALICE) == [
        ("attn-alice: '-rf' not collected: its name could pass for an option or a path (a leading '-', '.' or '~', "
         "a trailing '.', a '\\')"),
        "attn-alice: 'bad\\udcff.txt' not collected: its name is not valid UTF-8",
        ("attn-alice: 'huge.bin' not collected: 2000000000 bytes, over the limit of 10000000 per file "
         "(CourseDirectory.max_file_size)"),
        "attn-alice: 'leak.html' not collected: it is a link (links are never followed)",
        "attn-alice: 'new\\nline.txt' not collected: its name has control or invisible characters",
        "attn-alice: 'outside' not collected: it is a link (links are never followed)",
        "attn-alice: 'pipe' not collected: it is not a regular file (a pipe, socket or device)",
        "attn-alice: 'secret.txt' not collected: it is a link (links are never followed)",
        f"attn-alice: '{'x' * 60}…{'x' * 10}' not collected: its name is longer than 100 characters",
        "attn-alice: 'zero' not collected: it is a link (links are never followed)",
        ("attn-alice: 'zzz-many/f0478.txt' and everything after it not collected: over 500 files and folders "
         "(SubmissionFiles.max_files)"),
    ]


@pytest.mark.slow
def test_collect_takes_an_inbound_entry_only_from_the_student_it_names(klass):
    log = klass["logs"]["collect"]
    assert ("Inbound entry 'attn-bob+01_attention_intuition+2099-01-01 00:00:01.000000 UTC+forged' not collected: "
            "it claims to be attn-bob's but belongs to attn-alice") in log
    assert ("Inbound entry 'attn-alice+01_attention_intuition+2099-01-01 00:00:02.000000 UTC+lnk' not collected: "
            "it is a link (links are never followed)") in log
    assert ("Inbound entry 'attn-alice+01_attention_intuition+2099-01-01 00:00:03.000000 UTC+fifo' not collected: "
            "it is not a folder") in log
    assert "attn-carol: 'bob-was-here.txt' not collected: it belongs to attn-bob, not to the student" in log
    submitted = klass["course"] / "submitted"
    released = (klass["course"] / "release" / A / f"{A}.ipynb").read_text()
    assert (submitted / BOB / A / f"{A}.ipynb").read_text() == released, "bob's own (blank) work, not alice's"
    assert not (submitted / CAROL / A / "bob-was-here.txt").exists()
    assert (submitted / ALICE / A / "timestamp.txt").read_text() < "2099", "alice's real entry, not the link"
    assert sorted(p.name for p in submitted.iterdir()) == [ALICE, BOB, CAROL, "dave", "erin", "frank"]


@pytest.mark.slow
def test_nothing_root_only_reaches_the_course_the_exchange_or_a_student(klass):
    for where in (klass["course"], klass["exchange"], klass["homes"][ALICE]):
        for path in where.rglob("*"):
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 10**7:
                assert SECRET not in path.read_text(errors="replace"), path


@pytest.mark.slow
def test_only_the_assignments_notebooks_are_graded_and_the_others_keep_their_grades(klass):
    with Gradebook(f"sqlite:///{klass['course'] / 'gradebook.db'}", COURSE) as gb:
        scores = {s: gb.find_submission(A, s).score for s in (ALICE, BOB, CAROL, "dave")}
        for student in ("erin", "frank"):
            with pytest.raises(MissingEntry):
                gb.find_submission(A, student)
        full = gb.find_assignment(A).max_score
    assert full > 0
    assert scores == {ALICE: full, BOB: 0, CAROL: full, "dave": 0}
    assert sorted(os.listdir(klass["markers"])) == [], "a module beside the notebook was imported"
    log = klass["logs"]["autograde"]
    assert ("attn-alice: files that are not the assignment's notebooks, never graded, run, imported or copied on "
            "(01_attention_intuition): 'conftest.py', 'extra.ipynb', 'leak.ipynb', 'nbgrader_config.py', "
            "'sitecustomize.py', 'torch.py', 'utils/__init__.py', 'zzz-many/f0000.txt'") in log
    assert "erin: '01_attention_intuition.ipynb' not graded: it is a link (links are never followed)" in log
    assert ("frank: '01_attention_intuition.ipynb' not graded: it is not a regular file (a pipe, socket or device)"
            in log)
    assert "dave: 'secret.html' not copied: it is a link (links are never followed)" in log
    assert "dave: 'pipe' not copied: it is not a regular file (a pipe, socket or device)" in log


@pytest.mark.slow
def test_autograded_and_feedback_hold_only_what_the_course_generates(klass):
    course = klass["course"]
    for student in (ALICE, BOB, CAROL, "dave"):
        kept = {"timestamp.txt", "submission_secret.txt"} if student != "dave" else set()
        assert sorted(os.listdir(course / "autograded" / student / A)) == sorted({f"{A}.ipynb"} | kept)
        assert os.listdir(course / "feedback" / student / A) == [f"{A}.html"]
    released = os.listdir(klass["exchange"] / COURSE / "feedback")
    assert len(released) == 3 and all(re.fullmatch(r"[0-9a-f]{32}\.html", n) for n in released)
    assert "dave: feedback not released" in klass["logs"]["release_feedback"]
    fetched = [p.name for p in (klass["homes"][ALICE] / A / "feedback").rglob("*") if p.is_file()]
    assert fetched == [f"{A}.html"]


@pytest.mark.slow
def test_students_cannot_reach_each_others_work(klass):
    refused = {what for what, result in klass["pried"].items() if result != "done"}
    assert refused == set(klass["pried"]) - {"add a file to carol's entry"}, klass["pried"]
    inbound = os.stat(klass["exchange"] / COURSE / "inbound")
    assert inbound.st_mode & stat.S_ISVTX, "nobody may rename or delete another's entry"
    assert stat.S_IMODE(os.stat(klass["entries"][ALICE]).st_mode) == 0o770
    assert stat.S_IMODE(os.stat(klass["exchange"] / COURSE / "feedback").st_mode) == 0o711


@pytest.mark.slow
def test_a_course_folder_a_student_made_first_is_refused(klass):
    exchange = klass["base"] / "exchange-taken"
    exchange.mkdir()
    exchange.chmod(0o1777)
    run_as(BOB, ["mkdir", "-p", str(exchange / COURSE / "inbound")])
    # The course's configuration is in force for both (the fixture's release made inbound sticky): run in-process.
    coursedir = CourseDirectory(root=str(klass["course"]), course_id=COURSE, assignment_id=A,
                                db_url=f"sqlite:///{klass['course'] / 'gradebook.db'}", max_dir_size=50_000)
    for exchange_class in (SafeReleaseAssignment, SafeCollect):
        command = exchange_class(coursedir=coursedir, authenticator=Authenticator(), root=str(exchange))
        with pytest.raises(ExchangeError) as refused:
            command.start()
        assert str(refused.value) == (
            f"Refusing {exchange / COURSE}: it belongs to attn-bob, not to you (root) or root. A student may have "
            "made it before the course was released there, to read or replace what others hand in. Move it aside "
            f"(sudo mv '{exchange / COURSE}' '{exchange / COURSE}.suspect') and run this command again: it is then "
            "made anew, yours.")
    assert sorted(os.listdir(exchange / COURSE)) == ["inbound"], "nothing released into bob's folder"
