"""Every solution notebook reruns in a fresh kernel and reproduces its committed outputs (strict nbval)."""

from __future__ import annotations

import sys

import pytest

from utils import notebooks as nbs

from .conftest import ASSIGNMENTS, run_scaled

#: Seconds one notebook's nbval run may take on a quiet machine; on a loaded one, as many more as the load asks for
#: (conftest.run_scaled: at three times a two-core machine's load, three times as long). Measured on 2 cores beside
#: the rest of `make test`: 08, which trains its translator for about 3 minutes on one thread, 226 s; the others
#: 10-50 s. A fixed 600 s stopped 08 on a machine busy with other work (issue 33).
QUIET_LIMIT_S = 600


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_notebook_passes_nbval(assignment):
    proc = run_scaled(
        [
            sys.executable, "-m", "pytest", "--nbval", "-p", "no:xdist", "-p", "no:cacheprovider", "-p", "tests.nbval_patience", "-q",
            "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
            str(nbs.solution_path(assignment).relative_to(nbs.ROOT)),
        ],
        QUIET_LIMIT_S, cwd=nbs.ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
