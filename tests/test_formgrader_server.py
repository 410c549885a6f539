"""Formgrader's buttons and pages never hold up the instructor's server (utils/formgrader_csp.py, project issue 32).

nbgrader's Formgrader handlers are synchronous: Autograde (the sanitiser, the grading engine) and a submission's page
(nbconvert) ran on the Jupyter server's event loop, and while they ran nothing else answered, `/api/status` included.
Here a real server, started as `attn lab` starts it (jupyter-config/ on JUPYTER_CONFIG_PATH) in a fresh copy of the
course, grades a submission whose answer cells loop until their time limit, and a finished one, pressed at once
through Formgrader's API as its buttons do (session cookie and _xsrf header). Meanwhile `/api/status` is asked every
0.2 s, a Formgrader page and its API every half second, and the page of a submission with long notes (seconds of
nbconvert) every two seconds: each must answer in time, the two presses must run one after the other, the scores must
be right (0 for the loop, full marks for the finished notebook), and the assignment list must not change meanwhile.
Against nbgrader's own handlers `/api/status` waits for the whole grading, or for the whole rendering of a page.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from utils import notebooks as nbs

from .conftest import fill_answers, free_port

NB, OTHER = nbs.assignments()[:2]
TOKEN = "attn-formgrader-server-test"
#: Seconds each answer cell (and each exercise's checks) may run while grading: the looping submission takes about
#: three of these per answer cell.
TIME_LIMIT_S = 3
#: The longest a request to the server may take while a grading runs (a 2-core machine shared with other tests), and
#: the longest for Formgrader's API calls that read the gradebook and list the course's folders (alone: 0.05-0.3 s).
#: Both, and PAGE_S, on a quiet machine: they are multiplied by the load seen meanwhile (utils.notebooks.load_factor,
#: at most 4), as the server's answers are slowed by it. A blocked event loop answers only after a whole grading (13.75 s
#: here before utils/formgrader_csp.py), which stretches with the load too.
ANSWER_S, API_S = 2.0, 5.0
#: The longest a submission's page may take to render while a grading runs.
PAGE_S = 15.0
LOOP = "while True:\n    pass\n"
#: Notes a student may well add to a notebook: long (each cell under the 32,000 characters that utils.sanitize renders
#: as markdown), in markdown nbconvert renders (bold, code, links, maths): the page takes nbconvert a while.
NOTES = "\n".join(f"* step **{i}**: `scores[{i}]` as in [the paper](https://arxiv.org/abs/1706.03762), $s_{{{i}}}^2$"
                  for i in range(300))


def _copy_course(dest: Path) -> Path:
    """The working tree's files (tracked, and new ones not ignored) copied to `dest`, as a fresh clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=nbs.ROOT,
                            capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (nbs.ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(nbs.ROOT / rel, dest / rel)
    return dest


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`attn lab` (utils/cli.py) in a copy of the course, with its own HOME; yields (url, course, log path)."""
    base = tmp_path_factory.mktemp("formgrader-server")
    course = _copy_course(base / "course")
    home = base / "home"
    home.mkdir()
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONPATH": str(course),  # the copy's own utils/ (the environment's editable install is this checkout)
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "ATTN_EXERCISE_TIME_LIMIT": str(TIME_LIMIT_S), "ATTN_CELL_TIME_LIMIT": str(TIME_LIMIT_S),
    }
    log_path = base / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "utils.cli", "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
             f"--IdentityProvider.token={TOKEN}", f"--LabApp.workspaces_dir={home / 'workspaces'}",
             f"--LabApp.user_settings_dir={home / 'settings'}"],
            cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while f"{url}/lab" not in log_path.read_text():
        assert proc.poll() is None, log_path.read_text()[-3000:]
        if time.monotonic() > deadline:
            pytest.fail("the server did not start in 120 s:\n" + log_path.read_text()[-3000:])
        time.sleep(0.5)
    yield url, course, log_path
    os.killpg(proc.pid, 15)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)


def _session(url: str):
    """A browser's session on Formgrader: the login cookie, and the _xsrf cookie sent back as X-XSRFToken."""
    import requests

    s = requests.Session()
    s.get(f"{url}/?token={TOKEN}", timeout=60).raise_for_status()  # the login cookie, for the server's root
    s.get(f"{url}/formgrader/manage_assignments", timeout=60).raise_for_status()
    s.headers["X-XSRFToken"] = s.cookies["_xsrf"]
    return s


def _fork(session):
    import requests

    s = requests.Session()
    s.cookies.update(session.cookies)
    s.headers.update(session.headers)
    return s


def _csp_with_nonce(response) -> bool:
    policy = response.headers.get("Content-Security-Policy", "")
    script_src = next((r for r in policy.split(";") if r.strip().startswith("script-src")), "")
    return "'nonce-" in script_src and "'unsafe-inline'" not in script_src and b"<script nonce=" in response.content


@pytest.mark.slow
def test_grading_and_pages_leave_the_server_answering(server):
    from nbgrader.api import Gradebook

    url, course, log_path = server
    fg = _session(url)

    def press(path: str, s=fg) -> dict:
        r = s.post(f"{url}/formgrader/api/{path}", timeout=600)
        assert r.status_code == 200, (path, r.status_code, r.text[-2000:], log_path.read_text()[-3000:])
        return r.json()

    for assignment in (NB, OTHER):
        generated = press(f"assignment/{assignment}/assign")
        assert generated["success"], generated
    release = press(f"assignment/{OTHER}/release")  # Formgrader shows it released all along (below)
    assert release["success"], release
    released = nbs.read(course / "release" / NB / f"{NB}.ipynb")
    nbs.write(fill_answers(released, NB), course / "submitted" / "alice" / NB / f"{NB}.ipynb")
    looping = nbs.read(course / "release" / NB / f"{NB}.ipynb")
    for cell in filter(nbs.is_answer_cell, looping.cells):
        cell.source = LOOP
    nbs.write(looping, course / "submitted" / "loopy" / NB / f"{NB}.ipynb")
    wordy = fill_answers(nbs.read(course / "release" / NB / f"{NB}.ipynb"), NB)
    wordy.cells += [nbformat.v4.new_markdown_cell(f"### My notes, part {part}\n\n{NOTES}") for part in range(8)]
    nbs.write(wordy, course / "submitted" / "wordy" / NB / f"{NB}.ipynb")
    for student in ("alice", "wordy"):  # the first also starts the grading engine
        graded = press(f"submission/{NB}/{student}/autograde")
        assert graded["success"], graded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        wordy_id = gb.find_submission_notebook(NB, NB, "wordy").id
    t = time.monotonic()
    page = fg.get(f"{url}/formgrader/submissions/{wordy_id}/", timeout=600)
    alone = time.monotonic() - t
    assert page.status_code == 200 and "My notes, part 0" in page.text, page.text[-2000:]

    # Two presses at once: the looping submission, then alice again, each from its own connection.
    results: dict[str, tuple[dict, float]] = {}
    failed: list[BaseException] = []

    def autograde(student: str) -> None:
        try:
            results[student] = press(f"submission/{NB}/{student}/autograde", _fork(fg)), time.monotonic() - t0
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failed.append(exc)

    # And /api/status, asked every 0.2 s from start to end by a page of its own (JupyterLab polls it).
    status: list[float] = []
    done = threading.Event()

    def poll_status(s) -> None:
        while not done.is_set():
            t = time.monotonic()
            s.get(f"{url}/api/status", timeout=600).raise_for_status()
            status.append(time.monotonic() - t)
            time.sleep(0.2)

    t0 = time.monotonic()
    poller = threading.Thread(target=poll_status, args=(_fork(fg),), daemon=True)
    poller.start()
    presses = [threading.Thread(target=autograde, args=(s,)) for s in ("loopy", "alice")]
    presses[0].start()
    time.sleep(0.5)
    presses[1].start()

    # Meanwhile: what the instructor's browser asks while it waits, every half second.
    probes = {
        "/api/status": f"{url}/api/status",
        "Formgrader page": f"{url}/formgrader/manage_submissions/{NB}",
        "gradebook API": f"{url}/formgrader/api/submissions/{NB}",
        "assignments API": f"{url}/formgrader/api/assignments",
    }
    seen: dict[str, list[float]] = {name: [] for name in probes}
    pages: list[tuple[float, float]] = []  # (when it was answered, seconds it took): wordy's page, as grading goes on
    last_page = 0.0
    load = nbs.load_factor()  # the most seen while the presses run
    while presses[0].is_alive() or presses[1].is_alive():
        load = max(load, nbs.load_factor())
        assert time.monotonic() - t0 < 600, "the two presses did not finish in 10 minutes"
        for name, probe in probes.items():
            t = time.monotonic()
            r = fg.get(probe, timeout=600)
            seen[name].append(time.monotonic() - t)
            assert r.status_code == 200, (name, r.status_code, r.text[-1000:])
            if name == "Formgrader page":
                assert _csp_with_nonce(r), r.headers
            if name == "assignments API":  # a grading of NB never makes the other assignment look unreleased
                assert {a["name"]: a["status"] for a in r.json()}.get(OTHER) == "released", r.json()
        if "loopy" not in results and time.monotonic() - last_page > 2:
            t = time.monotonic()
            r = fg.get(f"{url}/formgrader/submissions/{wordy_id}/", timeout=600)
            last_page = time.monotonic()
            pages.append((last_page - t0, last_page - t))
            assert r.status_code == 200 and 'id="notebook-container"' in r.text, (r.status_code, r.text[-1000:])
            assert _csp_with_nonce(r), r.headers
        time.sleep(0.5)
    for p in presses:
        p.join()
    done.set()
    poller.join()
    if failed:
        raise failed[0]

    (loopy, loopy_done), (alice, alice_done) = results["loopy"], results["alice"]
    slowest = {name: round(max(times), 2) for name, times in seen.items()}
    answer_s, api_s, page_s = (load * bound for bound in (ANSWER_S, API_S, PAGE_S))
    print(f"\nloopy graded in {loopy_done:.1f} s, alice (pressed 0.5 s later) answered at {alice_done:.1f} s; "
          f"load factor up to {load:.1f}; "
          f"/api/status asked {len(status)} times, slowest {max(status):.2f} s; slowest answers in turn: {slowest}; "
          f"wordy's page alone {alone:.2f} s, meanwhile {len(pages)} times: "
          + ", ".join(f"{took:.2f} s (at {at:.0f} s)" for at, took in pages))
    assert loopy["success"] and alice["success"], (loopy, alice)
    assert loopy_done > 2 * TIME_LIMIT_S, f"the looping submission took {loopy_done:.1f} s: the test saw no wait"
    # Every answer came in time, and there were many of them while loopy was graded.
    assert max(status) < answer_s and len(status) >= loopy_done / (2 * load), (load, status)
    assert all(max(times) < (api_s if "API" in name else answer_s) for name, times in seen.items()), (load, slowest, seen)
    # Wordy's page, rendered while loopy was graded.
    answered_while_grading = [(at, took) for at, took in pages if at < loopy_done]
    assert answered_while_grading and all(took < page_s for _, took in pages), (load, pages)
    # One after the other: alice's press waited for loopy's grading, and each log is its own student's.
    assert alice_done > loopy_done, (loopy_done, alice_done)
    assert "behind the jobs pressed before it" in alice["log"], alice["log"][-2000:]
    assert "alice" not in loopy.get("log", "") and "loopy" not in alice.get("log", ""), (loopy, alice)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: (gb.find_submission(NB, s).score, gb.find_submission(NB, s).max_score) for s in ("loopy", "alice")}
    assert scores["loopy"][0] == 0 and scores["loopy"][1] > 0, scores
    assert scores["alice"][0] == scores["alice"][1] > 0, scores
    # The gradebook is the course's: nothing opened another one in another folder.
    assert sorted(p.relative_to(course) for p in course.rglob("gradebook.db")) == [Path("gradebook.db")]


def test_the_patch_is_idempotent_and_covers_every_button():
    from nbgrader.apps import api
    from nbgrader.server_extensions.formgrader import apihandlers, handlers

    from utils import formgrader_csp

    first = formgrader_csp.install_offload()
    assert formgrader_csp.install_offload() is first
    assert api.capture_log is formgrader_csp.capture_log
    assert set(first) == set(formgrader_csp.WRITES) | {"SubmissionHandler"}
    for name in formgrader_csp.WRITES:
        assert inspect.iscoroutinefunction(inspect.unwrap(getattr(apihandlers, name).post)), name
    assert inspect.iscoroutinefunction(inspect.unwrap(handlers.SubmissionHandler.get))
    # nbgrader's other POST handlers: only the flag (one row of the gradebook).
    posts = {name for name, cls in vars(apihandlers).items() if isinstance(cls, type) and "post" in vars(cls)}
    assert posts - set(formgrader_csp.WRITES) == {"FlagSubmissionHandler"}


def test_each_job_has_its_own_course_directory(tmp_path):
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import LoggingConfigurable

    from utils.formgrader_csp import private_coursedir

    parent = LoggingConfigurable()
    shared = CourseDirectory(parent=parent, root=str(tmp_path), db_url="sqlite:///gradebook.db", max_file_size=123)
    mine = private_coursedir(shared)
    mine.assignment_id, mine.student_id = NB, "alice"
    assert (shared.assignment_id, shared.student_id) == ("", "*") and mine.parent is parent
    assert mine.db_url == f"sqlite:///{tmp_path / 'gradebook.db'}"
    same = {n for n in shared.trait_names(config=True) if getattr(shared, n) == getattr(mine, n)}
    assert set(shared.trait_names(config=True)) - same == {"assignment_id", "student_id", "db_url"}
    assert private_coursedir(CourseDirectory(parent=parent, db_url="sqlite:////abs/gb.db")).db_url == "sqlite:////abs/gb.db"


def test_a_commands_log_holds_only_its_own_thread():
    """Formgrader's button shows its command's log; lines logged meanwhile by other threads are not in it."""
    import logging

    from utils.formgrader_csp import capture_log

    log = logging.getLogger("attn-test-capture")
    log.setLevel(logging.INFO)
    other = threading.Event()

    class App:
        def __init__(self, fail: bool = False) -> None:
            self.log, self.fail = log, fail

        def start(self) -> None:
            log.info("mine, before")
            elsewhere = threading.Thread(target=lambda: (log.info("not mine"), other.set()))
            elsewhere.start()
            elsewhere.join()
            log.warning("mine, after")
            if self.fail:
                raise SystemExit(1)

    assert capture_log(App()) == {"success": True, "log": "[INFO] mine, before\n[WARNING] mine, after\n"}
    failed = capture_log(App(fail=True))
    assert other.is_set() and not failed["success"] and "SystemExit" in failed["error"]
    assert failed["log"] == "[INFO] mine, before\n[WARNING] mine, after\n" and not log.handlers


def test_a_command_that_leaves_the_server_elsewhere_is_brought_back(tmp_path, monkeypatch, caplog):
    import logging

    from utils import formgrader_csp

    home, elsewhere = tmp_path / "course", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(formgrader_csp, "_SERVER_CWD", [str(home)])
    formgrader_csp.back_to_server_cwd(logging.getLogger("attn-test-cwd"))
    assert os.getcwd() == str(home) and "back to" in caplog.text
