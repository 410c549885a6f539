"""The `attn` command as people use it: clear refusals, a readable report, and `attn lab` serving the course."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from utils import notebooks as nbs
from utils.checking import render

from .conftest import free_port


def attn(*args, **kw):
    return subprocess.run([sys.executable, "-m", "utils.cli", *args], capture_output=True, text=True, cwd=nbs.ROOT, **kw)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: d / "missing.ipynb", "no notebook there"),
        (lambda d: (d / "mine.ipynb").write_text("{}") and d / "mine.ipynb", "not a readable notebook"),
        (lambda d: (d / "mine.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
         and d / "mine.ipynb", "not one of the course notebooks"),
        (
            lambda d: (d / "01_attention_intuition.ipynb").write_text("{not json") and d / "01_attention_intuition.ipynb",
            "not a readable notebook",
        ),
    ],
)
def test_check_refuses_what_it_cannot_grade_with_advice(tmp_path, make, fragment):
    proc = attn("check", str(make(tmp_path)), "--json")
    assert proc.returncode == 2
    assert proc.stdout == "" and fragment in proc.stderr


def test_report_lists_each_exercise_and_explains_failures():
    text = render(
        {
            "notebook": "nb",
            "score": 1.5,
            "max_score": 4.0,
            "exercises": [
                {"id": "softmax", "score": 1.5, "max_score": 2.0, "passed": False, "feedback": "overflow", "mistake": "m"},
                {"id": "pool", "score": 0.0, "max_score": 2.0, "passed": True, "feedback": "fine", "mistake": None},
            ],
        }
    )
    assert text.splitlines()[0] == "nb: 1.5 / 4 points"
    assert "FAIL  softmax" in text and "overflow" in text and "fine" not in text


def test_maintenance_commands_report_an_up_to_date_course():
    assert attn("references", "--check").returncode == 0
    assert attn("release", "--check").returncode == 0


def test_lab_serves_the_course_with_nbgrader(tmp_path):
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "utils.cli", "lab", "--no-browser", f"--port={port}", "--IdentityProvider.token="],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )
    try:
        deadline, listing = time.time() + 60, None
        while time.time() < deadline and listing is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks", timeout=2) as r:
                    listing = json.load(r)
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 60 s"
        assert {c["name"] for c in listing["content"]} >= set(nbs.assignments())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/formgrader", timeout=10) as r:
            assert r.status == 200  # nbgrader's server extension is enabled
    finally:
        server.terminate()
        server.wait(timeout=30)
