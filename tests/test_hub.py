"""The class route for real: deploy/jupyterhub/setup.sh, then a JupyterHub with an instructor and two students.

Everything goes through the hub's proxy with each person's own token, as their browser would: the instructor's
Formgrader API (generate, release, collect, autograde, generate and release feedback) and the students' Assignments
panel (fetch, submit, fetch feedback) and contents API. The hub, the proxy and every server run as they would on a
class's machine (each person a Unix user), with the test's own exchange, Jupyter configuration and hub folder:
nothing is written to /etc or /srv. Needs root (tests/unix_users.py) and configurable-http-proxy (npm).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest
import requests
import websocket
from nbgrader.api import Gradebook

from utils import notebooks as nbs

from .conftest import assert_no_secrets, fill_answers, free_port
from .unix_users import INSTRUCTOR, ensure_user, in_view, require_unix_users, run_as, shared_folder

DEPLOY = nbs.ROOT / "deploy" / "jupyterhub"
ASSIGNMENT = "01_attention_intuition"
COURSE_ID = "attention-course"
ALICE, BOB = "attn-alice", "attn-bob"  # alice hands in the solution's answers, bob the blank copy
PEOPLE = (INSTRUCTOR, ALICE, BOB)
MIB = 2**20
# Time limits. Each is generous, not scaled: ten times or more what the step takes on a quiet two-core machine (the hub
# up ~3 s of 90, three servers started together ~10 s of 150, a request ~0.1 s of 30, an autograde ~10 s of 300; the
# Steps table printed at the end has the figures), so a two-core machine at three times its load passes them; they
# stop only what will never answer. The hub's own spawner limits are deploy/jupyterhub's (120 s to start, 60 s to
# answer), which a class's machine needs as much.


class Steps:
    """Times each step of the walk-through and prints the table at the end."""

    def __init__(self):
        self.rows: list[tuple[str, float]] = []
        self.start = time.perf_counter()

    def __call__(self, name: str):
        steps = self

        class Timer:
            def __enter__(self):
                self.t0 = time.perf_counter()

            def __exit__(self, *exc):
                steps.rows.append((name, time.perf_counter() - self.t0))

        return Timer()

    def report(self) -> str:
        lines = [f"  {name:<58} {seconds:6.1f} s" for name, seconds in self.rows]
        lines.append(f"  {'total (setup to shutdown)':<58} {time.perf_counter() - self.start:6.1f} s")
        return "\n".join(lines)


def tree(pid: int) -> list[psutil.Process]:
    try:
        top = psutil.Process(pid)
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def memory(processes: list[psutil.Process]) -> tuple[float, float]:
    """(RSS, PSS) in MiB of these processes together; PSS shares libraries out fairly between processes."""
    rss = pss = 0
    for p in processes:
        info = p.memory_full_info()
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    return rss / MIB, pss / MIB


def cpu_seconds(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def disabled_in_lab(session: requests.Session, base: str) -> set[str]:
    """The JupyterLab plugins that a server's /lab page turns off (its page configuration)."""
    page = session.get(f"{base}/lab", timeout=30).text
    config = json.loads(page.split('id="jupyter-config-data" type="application/json">', 1)[1].split("</script>")[0])
    disabled = config.get("disabledExtensions", [])
    return {k for k, v in disabled.items() if v} if isinstance(disabled, dict) else set(disabled)


def run_in_kernel(base: str, token: str, code: str) -> str:
    """Start a kernel through the proxy, run `code` over the websocket as JupyterLab does; what it printed."""
    headers = {"Authorization": f"token {token}"}
    kernel = requests.post(f"{base}/api/kernels", headers=headers, json={"name": "python3"}, timeout=60)
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]
    ws = websocket.create_connection(f"{base.replace('http', 'ws', 1)}/api/kernels/{kid}/channels",
                                     header=[f"Authorization: token {token}"], timeout=120)
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({
        "header": {"msg_id": msg_id, "username": "", "session": uuid.uuid4().hex, "msg_type": "execute_request",
                   "version": "5.3", "date": ""},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    out = []
    try:
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))
            elif msg["msg_type"] == "execute_reply":
                break
    finally:
        ws.close()
    return "".join(out)


@pytest.mark.slow
def test_a_class_on_jupyterhub_release_to_feedback_as_three_unix_users():
    require_unix_users()
    proxy = shutil.which("configurable-http-proxy", path="/usr/local/bin:/usr/bin:/bin")
    if proxy is None:
        reason = "needs configurable-http-proxy (npm install -g configurable-http-proxy; .ci/run does it as root)"
        if os.environ.get("ATTN_REQUIRE_USERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    users = {name: ensure_user(name) for name in PEOPLE}
    steps = Steps()
    tag = f"attn-hub-test-{secrets.token_hex(4)}"
    # Each person's server works in a folder of this test inside their home (the hub's notebook_dir, which is "~"
    # on a class's hub), so that tests sharing these users never meet; removed at the end.
    own = {name: Path(entry.pw_dir) / tag for name, entry in users.items()}
    course = own[INSTRUCTOR] / COURSE_ID
    hub = None
    spawned: dict[int, psutil.Process] = {}
    with shared_folder("attn-hub-") as shared:
        try:
            for name, entry in users.items():
                own[name].mkdir(mode=0o700)
                os.chown(own[name], entry.pw_uid, entry.pw_gid)
            exchange, jupyter_config, hub_dir = shared / "exchange", shared / "jupyter", shared / "hub"

            # 1. setup.sh, as an instructor would run it, reusing this environment instead of building one.
            with steps("setup.sh (existing environment, clone of the course)"):
                proc = subprocess.run(in_view(
                    ["bash", str(DEPLOY / "setup.sh"), "--existing-env", sys.prefix, "--exchange", str(exchange),
                     "--jupyter-config", str(jupyter_config), "--hub-dir", str(hub_dir), "--course-dir", str(course),
                     INSTRUCTOR, ALICE, BOB]),
                    check=False, capture_output=True, text=True, timeout=300)
                assert proc.returncode == 0, proc.stdout + proc.stderr
            assert (course / "nbgrader_config.py").is_file()
            course_folder = exchange / COURSE_ID
            assert course_folder.stat().st_uid == users[INSTRUCTOR].pw_uid, "the instructor owns the course's exchange"
            assert (jupyter_config / "nbgrader_config.py").is_file()
            assert (hub_dir / "class.txt").read_text().split("\n")[-3:] == [ALICE, BOB, ""]

            # 2. The hub: the deployed configuration plus what a test needs (free ports, a service that may hand
            # out tokens). Servers start in this test's folders and keep Jupyter's state there.
            service_token = secrets.token_hex(32)
            port, hub_port, api_port = free_port(), free_port(), free_port()
            state = {"JUPYTER_DATA_DIR": ".jupyter-data", "JUPYTER_CONFIG_DIR": ".jupyter", "IPYTHONDIR": ".ipython",
                     "MPLCONFIGDIR": ".mpl", "XDG_CACHE_HOME": ".cache", "XDG_CONFIG_HOME": ".config",
                     "npm_config_cache": ".npm"}
            (hub_dir / "test_config.py").write_text(f"""
import pwd
c = get_config()  # noqa: F821
load_subconfig({str(DEPLOY / 'jupyterhub_config.py')!r})  # noqa: F821
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.JupyterHub.services = [{{"name": "attn-hub-test", "api_token": {service_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "attn-hub-test", "services": ["attn-hub-test"],
                            "scopes": ["tokens", "read:users", "list:users"]}}]
c.Spawner.notebook_dir = "~/{tag}"
def _in_test_folder(name):
    return lambda spawner: f"{{pwd.getpwnam(spawner.user.name).pw_dir}}/{tag}/{{name}}"
c.Spawner.environment.update({{key: _in_test_folder(name) for key, name in {state!r}.items()}})
""")
            url = f"http://127.0.0.1:{port}"

            def hub_log_tail() -> str:
                return (hub_dir / "hub.log").read_text()[-6000:]

            log = (hub_dir / "hub.log").open("w")
            with steps("JupyterHub and its proxy up"):
                hub = subprocess.Popen(
                    in_view([str(Path(sys.prefix) / "bin" / "jupyterhub"), "-f", str(hub_dir / "test_config.py")]),
                    cwd=hub_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                    env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
                         "ATTN_HUB_DIR": str(hub_dir)})
                deadline = time.monotonic() + 90
                while True:
                    assert hub.poll() is None, "the hub exited:\n" + hub_log_tail()
                    assert time.monotonic() < deadline, "the hub did not answer:\n" + hub_log_tail()
                    try:
                        if requests.get(f"{url}/hub/api", timeout=2).ok:
                            break
                    except requests.ConnectionError:
                        pass
                    time.sleep(0.3)

            # 3. Each person logs in with a token of their own (what the login page gives a browser's cookie).
            tokens = {}
            with steps("a token for each of the three users"):
                for name in PEOPLE:
                    r = requests.post(f"{url}/hub/api/users/{name}/tokens", timeout=30,
                                      headers={"Authorization": f"token {service_token}"},
                                      json={"note": "tests/test_hub.py", "expires_in": 3600})
                    assert r.status_code == 201, r.text
                    tokens[name] = r.json()["token"]
            sessions = {}
            for name in PEOPLE:
                sessions[name] = requests.Session()
                sessions[name].headers["Authorization"] = f"token {tokens[name]}"
            server = {name: f"{url}/user/{name}" for name in PEOPLE}

            with steps("three servers started together and ready"):
                answers = {}
                threads = [threading.Thread(target=lambda n=n: answers.__setitem__(
                    n, sessions[n].post(f"{url}/hub/api/users/{n}/server", timeout=150))) for n in PEOPLE]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for name in PEOPLE:
                    assert answers[name].status_code in (201, 202), (name, answers[name].text)
                deadline = time.monotonic() + 150
                for name in PEOPLE:
                    while True:
                        model = sessions[name].get(f"{url}/hub/api/users/{name}", timeout=30).json()
                        status = model["servers"].get("", {})
                        if status.get("ready"):
                            break
                        assert status.get("pending") and time.monotonic() < deadline, (
                            f"{name}'s server did not start: {model}\n" + hub_log_tail())
                        time.sleep(0.5)
            for p in tree(hub.pid)[1:]:
                spawned[p.pid] = p
            servers = {p.username(): p for p in spawned.values() if "jupyterhub-singleuser" in " ".join(p.cmdline())}
            assert set(servers) == set(PEOPLE), servers
            assert Path(servers[INSTRUCTOR].cwd()) == course, "the instructor's server runs in their course"
            assert servers[INSTRUCTOR].environ().get("PYTHONPATH") == str(course), "it grades with the clone's utils"
            assert Path(servers[ALICE].cwd()) == own[ALICE], "a student's server works where their files are"

            time.sleep(2)  # let the servers settle before measuring them idle
            idle_rss, idle_pss = memory(tree(servers[ALICE].pid))

            fg = f"{server[INSTRUCTOR]}/formgrader/api"
            teacher = sessions[INSTRUCTOR]

            def formgrader(path: str) -> dict:
                r = teacher.post(f"{fg}/{path}", timeout=300)
                assert r.status_code == 200, (path, r.status_code, r.text[:2000])
                answer = r.json()
                assert answer["success"], f"{path}:\n{answer.get('error', '')[-3000:]}\n{answer.get('log', '')[-3000:]}"
                return answer

            def assignments_panel(name: str, action: str) -> list[dict]:
                r = sessions[name].post(f"{server[name]}/assignments/{action}", timeout=120,
                                        json={"assignment_id": ASSIGNMENT, "course_id": COURSE_ID})
                assert r.status_code == 200, (name, action, r.status_code, r.text[:2000])
                answer = r.json()
                assert answer["success"], (name, action, answer.get("value"))
                return answer["value"]

            # 4. Release, from the instructor's Formgrader.
            with steps("instructor: Generate (Formgrader)"):
                formgrader(f"assignment/{ASSIGNMENT}/assign")
            with steps("instructor: Release (Formgrader)"):
                formgrader(f"assignment/{ASSIGNMENT}/release")
            assert (course_folder / "outbound" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()

            # 5. Students: Fetch, work (alice writes the solution's answers through the contents API), Submit.
            notebook_path = f"api/contents/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
            for name in (ALICE, BOB):
                with steps(f"{name}: Fetch (Assignments panel)"):
                    listed = assignments_panel(name, "fetch")
                assert any(a["assignment_id"] == ASSIGNMENT and a["status"] == "fetched" for a in listed), listed
                if name == ALICE:
                    with steps(f"{name}: fill in the answers (contents API)"):
                        r = sessions[name].get(f"{server[name]}/{notebook_path}", timeout=30)
                        assert r.status_code == 200, (r.status_code, r.text[:3000], hub_log_tail())
                        model = r.json()
                        nb = fill_answers(nbformat.from_dict(model["content"]), ASSIGNMENT)
                        r = sessions[name].put(f"{server[name]}/{notebook_path}", timeout=30,
                                               json={"type": "notebook", "format": "json", "content": nb})
                        assert r.status_code == 200, r.text
                with steps(f"{name}: Submit (Assignments panel)"):
                    listed = assignments_panel(name, "submit")
                assert any(a["status"] == "submitted" for a in listed), listed

            # 6. Collect, autograde each submission, generate and release feedback.
            with steps("instructor: Collect (Formgrader)"):
                formgrader(f"assignment/{ASSIGNMENT}/collect")
            assert sorted(p.name for p in (course / "submitted").iterdir()) == [ALICE, BOB]
            cpu_before = cpu_seconds(servers[INSTRUCTOR])
            for name in (ALICE, BOB):
                with steps(f"instructor: Autograde {name} (Formgrader)"):
                    graded = formgrader(f"submission/{ASSIGNMENT}/{name}/autograde")
            grading_cpu = cpu_seconds(servers[INSTRUCTOR]) - cpu_before
            # The instructor's server is not root: grading isolates the learner's code in user namespaces.
            assert "not isolated" not in graded["log"], graded["log"][-2000:]
            # Formgrader's pages carry the course's Content-Security-Policy (setup.sh enables utils.formgrader_csp).
            page = teacher.get(f"{server[INSTRUCTOR]}/formgrader/manage_assignments", timeout=30)
            assert page.status_code == 200 and "'nonce-" in page.headers.get("Content-Security-Policy", ""), \
                page.headers
            instructor_rss, instructor_pss = memory(tree(servers[INSTRUCTOR].pid))
            with steps("instructor: Generate Feedback (Formgrader)"):
                formgrader(f"assignment/{ASSIGNMENT}/generate_feedback")
            with steps("instructor: Release Feedback (Formgrader)"):
                released = formgrader(f"assignment/{ASSIGNMENT}/release_feedback")

            # The scores, in the gradebook and in Formgrader's own list.
            r = teacher.get(f"{fg}/submissions/{ASSIGNMENT}", timeout=30)
            shown = {s["student"]: (s["score"], s["max_score"]) for s in r.json()}
            with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
                alice, bob = (gb.find_submission(ASSIGNMENT, s) for s in (ALICE, BOB))
                assert alice.score == alice.max_score > 0, "the solution's answers earn full marks"
                assert bob.score == 0, "the blank copy earns nothing"
                full = alice.max_score
            assert shown == {ALICE: (full, full), BOB: (0, full)}

            # 7. Students: Fetch Feedback, and read it in their own folder through their own server.
            for name, score in ((ALICE, full), (BOB, 0.0)):
                with steps(f"{name}: Fetch Feedback (Assignments panel)"):
                    listed = assignments_panel(name, "fetch_feedback")
                mine = [s for a in listed if a["status"] == "submitted" for s in a["submissions"]]
                assert len(mine) == 1 and mine[0]["has_local_feedback"], (listed, released.get("log"))
                html_path = f"{mine[0]['local_feedback_path']}/{ASSIGNMENT}.html"
                r = sessions[name].get(f"{server[name]}/api/contents/{html_path}", timeout=30)
                assert r.status_code == 200, r.text
                html = r.json()["content"]
                assert f"Score: {score:.1f} / {full:.1f}" in html, f"{name}'s feedback shows their score"
                assert_no_secrets(html, ASSIGNMENT, f"{name}'s feedback through the hub")

            # 8. One student cannot reach another's server, folder, submission or feedback.
            refused, denied = [], 0
            for intruder, victim in ((ALICE, BOB), (BOB, ALICE)):
                s = sessions[intruder]
                for what in (f"{server[victim]}/api/contents", f"{server[victim]}/{notebook_path}",
                             f"{server[victim]}/assignments?course_id={COURSE_ID}", f"{url}/hub/api/users/{victim}"):
                    r = s.get(what, timeout=30, allow_redirects=False)
                    assert r.status_code in (403, 404), (intruder, what, r.status_code)
                    refused.append(r.status_code)
                r = s.post(f"{url}/hub/api/users/{victim}/server", timeout=30)
                assert r.status_code in (403, 404), (intruder, "start another's server", r.status_code)
                refused.append(r.status_code)
                assert s.get(f"{fg}/submissions/{ASSIGNMENT}", timeout=30,
                             allow_redirects=False).status_code in (403, 404), "a student reaches Formgrader"
                r = s.get(f"{server[intruder]}/formgrader/api/status", timeout=30, allow_redirects=False)
                assert r.status_code == 404, "students' servers run without Formgrader"
                assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= disabled_in_lab(
                    s, server[intruder]), "students' JupyterLab shows no Formgrader or Create Assignment"
            assert "@jupyter/nbgrader:formgrader" not in disabled_in_lab(teacher, server[INSTRUCTOR])
            r = sessions[BOB].get(f"{server[BOB]}/api/contents/..%2F..%2F{ALICE}", timeout=30)
            assert r.status_code in (400, 403, 404), ("bob's server outside his folder", r.status_code)
            refused.append(r.status_code)
            # bob's own server refuses to show what his Unix user cannot read, even behind a link in his folder.
            alice_submission = next((exchange / COURSE_ID / "inbound").glob(f"{ALICE}+*"))
            links = {"peek-home": Path(users[ALICE].pw_dir), "peek-inbound": exchange / COURSE_ID / "inbound",
                     "peek-feedback": exchange / COURSE_ID / "feedback", "peek-graded": course}
            for link, target in links.items():
                run_as(BOB, ["ln", "-s", str(target), str(own[BOB] / link)])
                r = sessions[BOB].get(f"{server[BOB]}/api/contents/{link}", timeout=30)
                assert r.status_code != 200 or not r.json()["content"], (link, r.status_code, r.text[:300])
                refused.append(r.status_code)
            # ... and as his Unix user, nothing of alice's can be listed or read.
            alice_feedback = next((own[ALICE] / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html"))
            for command in (["ls", users[ALICE].pw_dir], ["cat", str(own[ALICE] / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")],
                            ["cat", str(alice_feedback)], ["ls", str(exchange / COURSE_ID / "inbound")],
                            ["ls", str(exchange / COURSE_ID / "feedback")],
                            ["cat", str(course / "submitted" / ALICE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")],
                            ["cat", str(course / "feedback" / ALICE / ASSIGNMENT / f"{ASSIGNMENT}.html")],
                            ["ls", str(course / "grader")]):
                proc = run_as(BOB, command, check=False)
                assert proc.returncode != 0 and "Permission denied" in proc.stderr, (command, proc.stdout[:300])
                denied += 1
            # Their submissions in the exchange are found only by a name with a random part, which nobody but the
            # instructor can list (nbgrader's design), and even by that name bob can neither read nor change one
            # (utils.submissions.SafeSubmit: the entry 0770 with the instructor's group; nbgrader leaves it 0777).
            assert len(alice_submission.name.rsplit("+", 1)[-1]) >= 12
            for command in (["cat", str(alice_submission / f"{ASSIGNMENT}.ipynb")],
                            ["touch", str(alice_submission / "bob-was-here")]):
                proc = run_as(BOB, command, check=False)
                assert proc.returncode != 0 and "Permission denied" in proc.stderr, (command, proc.stdout[:300])
                denied += 1

            # 9. A kernel on one student's server (torch, as every notebook imports it).
            with steps(f"{ALICE}: start a kernel and import torch"):
                out = run_in_kernel(server[ALICE], tokens[ALICE], "import torch; print(torch.__version__)")
            assert "2." in out, out
            for p in tree(hub.pid)[1:]:
                spawned[p.pid] = p
            kernel = [p for p in tree(servers[ALICE].pid)[1:] if "ipykernel" in " ".join(p.cmdline())]
            assert len(kernel) == 1
            kernel_rss, kernel_pss = memory(kernel)
            server_rss, server_pss = memory([servers[ALICE]])

            sizes = {"one submission in the exchange": folder_size(alice_submission),
                     "one student's feedback HTML": alice_feedback.stat().st_size,
                     f"exchange after {ASSIGNMENT}, two students": folder_size(exchange)}
        finally:
            with steps("hub stopped (servers, kernels and proxy with it)"):
                if hub is not None:
                    for p in tree(hub.pid)[1:]:
                        spawned[p.pid] = p
                    hub.send_signal(signal.SIGTERM)  # the hub stops every server and the proxy it started
                    try:
                        hub.wait(timeout=60)
                    except subprocess.TimeoutExpired:
                        hub.kill()
                        hub.wait()
                    log.close()
                # Nothing the hub started may outlive the test.
                left = []
                for p in spawned.values():
                    try:
                        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                            p.kill()
                            left.append(p)
                    except psutil.NoSuchProcess:
                        pass
                psutil.wait_procs(left, timeout=10)
            for path in own.values():
                shutil.rmtree(path, ignore_errors=True)
            hub_log = (shared / "hub" / "hub.log")
            hub_log = hub_log.read_text() if hub_log.is_file() else ""

    assert not left, f"processes outlived the hub: {[p.pid for p in left]}\n{hub_log[-3000:]}"
    print(f"\nJupyterHub class walk-through ({ASSIGNMENT}; 2 cores), each step through the hub's proxy:")
    print(steps.report())
    print("Memory (MiB; RSS counts shared libraries in every process, PSS shares them out):")
    print(f"  one student's server, idle after start:       RSS {idle_rss:5.0f}   PSS {idle_pss:5.0f}")
    print(f"  the same server after the exchange steps:      RSS {server_rss:5.0f}   PSS {server_pss:5.0f}")
    print(f"  its kernel after `import torch`:               RSS {kernel_rss:5.0f}   PSS {kernel_pss:5.0f}")
    print(f"  the instructor's server after autograding:    RSS {instructor_rss:5.0f}   PSS {instructor_pss:5.0f}")
    print(f"CPU to autograde two submissions of {ASSIGNMENT}: {grading_cpu:.1f} s "
          "(the instructor's server and its isolated grading workers)")
    print(f"Refused between students: {len(refused)} requests through the hub (HTTP "
          f"{', '.join(f'{code} x{refused.count(code)}' for code in sorted(set(refused)))}), {denied} reads as bob's "
          f"Unix user (Permission denied)")
    print("Disk: " + "; ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sizes.items()))
    # The sizing of docs/instructors.md rests on these: they go to the table of measured figures (utils/figures.py).
    from utils import figures

    figures.record("hub-memory", by="tests/test_hub.py", what="a class on JupyterHub, memory (RSS): one student's "
                   "server idle / after fetching and submitting / its kernel with torch / the instructor's server "
                   "after autograding", value=f"{idle_rss:.0f} / {server_rss:.0f} / {kernel_rss:.0f} / "
                   f"{instructor_rss:.0f} MiB")
    figures.record("hub-grading-cpu", by="tests/test_hub.py", what=f"a class on JupyterHub: CPU to autograde two "
                   f"submissions of {ASSIGNMENT}", value=f"{grading_cpu:.1f} s")
