"""tests/cpu_profile.py --sample counts the CPU of processes that no test waits for (kernels, zygotes, browsers)."""

from __future__ import annotations

import sys
import uuid

import pytest

from . import cpu_profile
from .cpu_profile import kind, sample


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_sampler_sees_a_commands_cpu_by_its_kind(monkeypatch):
    marker = f"spin-{uuid.uuid4().hex}"  # this command's kind alone: the sampler counts every process on the machine
    monkeypatch.setattr(cpu_profile, "KINDS", [("this test's command", marker), *cpu_profile.KINDS])
    spin = f"import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass  # {marker}"
    spent, wall = sample([sys.executable, "-c", spin], every_s=0.1)
    assert wall >= 1.5
    assert 1.0 <= spent["this test's command"] <= 1.7, spent  # 1.5 CPU-seconds, less its last tenth of a second


def test_kinds_are_told_apart_by_command_line():
    assert kind("/v/bin/python -m ipykernel_launcher -f k.json") == "notebook kernels"
    assert kind("/usr/lib/chromium/chromium --type=renderer") == "browsers"
    assert kind("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))") == "test processes"
    assert kind("/v/bin/python -m utils.cli train --data /tmp/pytest-of-root/x.tsv") == "attn commands"
    assert kind("/usr/bin/make test") == "other: make"
