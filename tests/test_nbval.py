"""Every solution notebook reruns in a fresh kernel and reproduces its committed outputs (strict nbval)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from utils import notebooks as nbs

from .conftest import ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_notebook_passes_nbval(assignment):
    proc = subprocess.run(
        [
            sys.executable, "-m", "pytest", "--nbval", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "tests.nbval_patience", "-q",
            "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
            str(nbs.solution_path(assignment).relative_to(nbs.ROOT)),
        ],
        cwd=nbs.ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
