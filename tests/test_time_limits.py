"""Time limits of the tests that a loaded machine stretches scale with its load (issue 33: nbval of 08 hit a fixed
600 s beside other work): `utils.notebooks.load_factor` and `tests/conftest.py`'s `run_scaled`."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from utils import notebooks as nbs

from .conftest import run_scaled

SLEEP = [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1])); print('done')"]


def test_the_load_factor_is_the_load_per_core_from_one_to_its_cap(monkeypatch):
    monkeypatch.setattr(nbs.os, "cpu_count", lambda: 2)
    for load, factor in ((0.3, 1.0), (2.0, 1.0), (6.0, 3.0), (64.0, nbs.MAX_LOAD_FACTOR)):
        monkeypatch.setattr(nbs.os, "getloadavg", lambda load=load: (load, 0.0, 0.0), raising=False)  # Windows: none
        assert nbs.load_factor() == factor


def test_a_command_gets_as_much_longer_as_the_machine_is_loaded(monkeypatch):
    monkeypatch.setattr(nbs, "load_factor", lambda: 3.0)
    proc = run_scaled([*SLEEP, "1.5"], 1.0, poll_s=0.1)  # 1.5 s on the wall clock at 3x load: 0.5 s of a quiet one
    assert proc.returncode == 0 and proc.stdout == "done\n"


@pytest.mark.skipif(sys.platform == "win32", reason="no sleep command, no ps")
def test_a_command_past_its_limit_is_stopped_with_its_processes():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_scaled([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '4343.5'])"], 0.5, poll_s=0.1)
    assert time.monotonic() - started < 0.5 * nbs.MAX_LOAD_FACTOR + 2
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 4343.5" not in ps
