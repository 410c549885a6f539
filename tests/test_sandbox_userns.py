"""Grading by an instructor who is not root (their server on a JupyterHub) isolates the learner's code too.

As root the sandbox drops each worker to `nobody` in its own namespaces. An instructor's Jupyter server runs as the
instructor, so utils.engine.sandbox builds the same namespaces inside an unprivileged user namespace and puts each worker in
a user namespace of its own. This test grades, as a real unprivileged Unix user and from a clone that user owns (so
everything a learner could damage is theirs), the attacks of tests/attacks.py that only isolation defeats: reading
the hidden tests or the solutions, writing the grader's files, and killing every process in sight. Each must earn
exactly what it earns when root grades it, and the clone must be unchanged afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from utils import notebooks as nbs

from .attacks import ATTACKS
from .test_adversarial import _course_state, _tree_digest
from .unix_users import INSTRUCTOR, ensure_user, require_unix_users, run_as

pytestmark = pytest.mark.slow
CHOSEN = [a for a in ATTACKS if a.get("isolated") or a.get("writes") or a.get("unsafe")
          or a["id"] in ("background-processes-left-behind", "endless-loop-in-a-function", "fork-bomb-in-a-function")]
PROBE = """
import json, sys, tempfile
from pathlib import Path
from utils.engine.sandbox import isolation
from tests.attacks import ATTACKS
from tests.test_adversarial import build, grade_with
from utils.engine.checking import Engine
repo, ids = Path(sys.argv[1]), sys.argv[2:]
out = {"isolation": isolation(), "scores": {}}
with Engine() as engine:  # one warm zygote, recycled between attacks, as a class's grading keeps it
    for attack in ATTACKS:
        if attack["id"] in ids:
            path = build(attack, repo, Path(tempfile.mkdtemp()) / attack["id"])
            if "exit" in attack:
                code, result, err = grade_with(repo, path)
            else:
                try:
                    code, result, err = 0, engine.check(path).to_json(), ""
                except Exception as exc:
                    code, result, err = 2, None, f"{type(exc).__name__}: {exc}"
            out["scores"][attack["id"]] = result["score"] if result else f"exit {code}: {err[-300:]}"
    out["zygotes"] = engine.started
print(json.dumps(out))
"""


def expected(attack: dict) -> float:
    return attack["total"] if "total" in attack else sum(attack["scores"].values())


def test_an_unprivileged_instructor_grades_in_a_sandbox_as_strong_as_roots(tmp_path):
    require_unix_users()
    entry = ensure_user(INSTRUCTOR)
    clone = Path(entry.pw_dir) / f"attn-userns-{os.getpid()}"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=nbs.ROOT, capture_output=True, check=True).stdout
    try:
        for rel in filter(None, tracked.decode().split("\0")):
            if (nbs.ROOT / rel).is_file():
                (clone / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(nbs.ROOT / rel, clone / rel)
        before = _course_state(clone)  # the key grading makes on first use made first, then the clone handed over
        subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(clone)], check=True)
        proc = run_as(INSTRUCTOR, [sys.executable, "-c", PROBE, str(clone), *(a["id"] for a in CHOSEN)],
                      cwd=clone, env={"PYTHONPATH": str(clone)}, timeout=900)
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        assert report["isolation"] is None, f"not isolated as {INSTRUCTOR}: {report['isolation']}"
        wrong = {a["id"]: (report["scores"].get(a["id"]), expected(a)) for a in CHOSEN
                 if report["scores"].get(a["id"]) != expected(a)}
        assert not wrong, f"attacks that earned what they should not (got, expected): {wrong}"
        assert _tree_digest(clone) == before, "grading changed the instructor's grader/, utils/ or solutions/"
        print(f"\nas {INSTRUCTOR} (uid {entry.pw_uid}), isolated in user namespaces: "
              + ", ".join(f"{k} {v:g}" for k, v in report["scores"].items()))
    finally:
        shutil.rmtree(clone, ignore_errors=True)
