"""What a learner sees while `make lab` installs the course (utils/bootstrap.py): each step said, with its number,
before it starts; pip's and uv's output as it comes (their bars in a terminal); a last line with each step's time and
what comes next; and little on a second run. pip and uv are stood in for by fakes (written into tmp_path and put
first on PYTHONPATH, so that `python -m pip` and `python -m uv` run them), which print what the real ones print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from utils import bootstrap

ROOT = Path(__file__).resolve().parent.parent

#: `python -m pip`: `config list` says nothing after a pause (so a step line not flushed at once shows late); `install`
#: says what pip says installing uv (with a warning about a machine's pip settings), or finding it installed.
FAKE_PIP = '''
import os, sys, time
if sys.argv[1] == "config":
    time.sleep(1.5)
elif os.environ["FAKE_RUN"] == "second":
    print("Requirement already satisfied: uv<1,>=0.5 in /x/site-packages (0.13.9)")
else:
    print("WARNING: Location 'file:///opt/pypi/simple/uv/' is ignored: it is neither a file nor a directory.")
    print("Collecting uv<1,>=0.5")
    print("  Downloading uv-0.13.9-py3-none-manylinux_2_17_x86_64.whl (18.0 MB)")
    print("Successfully installed uv-0.13.9")
'''
#: `python -m uv pip install …`: a first run (a pause between two lines, its download said, or in a terminal drawn as a
#: bar redrawn after \\r; the list of what it added), or a second one; each says whether it was given a terminal.
FAKE_UV = '''
import os, sys, time
tty = sys.stdout.isatty()
if os.environ["FAKE_RUN"] == "second":
    print(" ~ attention-course==0.1.0 (from file:///course)")
    print(f"Audited 157 packages in 20ms (a terminal: {tty})")
    sys.exit()
print("Resolved 157 packages in 1.02s", flush=True)
time.sleep(1.5)
if tty:  # a bar, redrawn
    for got in (0.0, 6.0, 12.5):
        print(f"\\rtorch      ━━━━━━━━━━━━━━━━━━━━ {got:.2f} MiB/12.50 MiB", end="", flush=True)
    print()
else:
    print("Downloading torch (12.5MiB)")
print(f"Prepared 3 packages in 1.50s (a terminal: {tty})")
print(" + numpy==2.4.6")
print(" + torch==2.13.0+cpu")
'''


@pytest.fixture
def fakes(tmp_path):
    """The environment that makes `python -m pip` and `python -m uv` the fakes; PYTHONUNBUFFERED left out, as a
    learner's shell has it (with it, Python would flush every line, and an unflushed step line would go unseen)."""
    for name, text in (("pip", FAKE_PIP), ("uv", FAKE_UV)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").touch()  # a package, not a namespace one: ahead of the real one, then
        (tmp_path / name / "__main__.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "ATTN_INSTALLER")}
    return {**env, "PYTHONPATH": str(tmp_path)}


def timed_lines(cmd: list[str], env: dict[str, str]) -> list[tuple[float, str]]:
    """Run a command with its output piped (as make's is, to a log); each line with the second it arrived."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started, lines = time.monotonic(), []
    for line in proc.stdout:
        lines.append((time.monotonic() - started, line.rstrip("\n")))
    assert proc.wait(timeout=60) == 0, "\n".join(text for _, text in lines)
    return lines


BOOTSTRAP = [sys.executable, "-m", "utils.bootstrap", "--extras", "lab,dev", "--then", "starting JupyterLab"]


def test_each_step_is_said_before_it_starts_and_the_installers_output_comes_as_printed(fakes):
    """A first install, its output sent to a pipe: the step lines in order, each arriving while its step still runs
    (the fakes pause; Python would hold unflushed lines back till it exits), uv's lines as uv prints them, uv's list
    of packages left out, and a last line with each step's time, the MB downloaded and what comes next."""
    lines = timed_lines(BOOTSTRAP, {**fakes, "FAKE_RUN": "first"})
    texts = [text for _, text in lines]
    steps = [text for text in texts if re.match(r"\[\d/\d\] ", text)]
    assert steps == [
        f"[1/2] PyTorch {bootstrap.torch_version()} is installed and supported: kept",
        "[2/2] Installing the course with JupyterLab, nbgrader and the test tools (lab,dev), by uv, which pip installs "
        "first …",
    ], texts
    assert texts.index(steps[1]) < texts.index("Collecting uv<1,>=0.5") < texts.index("Resolved 157 packages in 1.02s")

    def gap_after(text: str) -> float:
        at = texts.index(text)
        return lines[at + 1][0] - lines[at][0]

    assert gap_after(steps[1]) > 0.75, "the course's step line came only with what followed it: not flushed"
    assert gap_after("Resolved 157 packages in 1.02s") > 0.75, "uv's line came only with what followed it"
    assert "Prepared 3 packages in 1.50s (a terminal: False)" in texts, texts
    assert not [text for text in texts if text.startswith(" + ") or "is ignored" in text], "noise left out"
    assert "the course and its tools (lab,dev), installed by uv: 31 MB downloaded" in texts, texts  # 18 MB + 12.5 MiB
    assert re.fullmatch(r"Installed into \S+ in \d+ s \(PyTorch \d+ s, the course ([3-9]|\d\d+) s\); "
                        r"downloaded in all: 31 MB\. Next: starting JupyterLab …", texts[-1]), texts[-1]


def test_a_second_run_is_short(fakes):
    """Everything installed: the two step lines, uv's one line, the result and the last line; none of pip's
    "Requirement already satisfied" lines, nor uv's line for the course it reinstalls."""
    texts = [text for _, text in timed_lines(BOOTSTRAP, {**fakes, "FAKE_RUN": "second"})]
    assert len(texts) == 6, texts
    assert texts[2] == "Audited 157 packages in 20ms (a terminal: False)", texts
    assert not [text for text in texts if "already satisfied" in text or "attention-course==" in text], texts


def in_a_terminal(cmd: list[str], env: dict[str, str]) -> str:
    """Run a command with a pseudo-terminal for its output, as a learner's shell runs it; what it printed."""
    import pty

    source, terminal = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:  # Linux, once the command has closed it
            break
        if not chunk:
            break
        seen += chunk
    os.close(source)
    assert proc.wait(timeout=60) == 0, seen
    return seen.decode()


@pytest.mark.skipif(os.name != "posix", reason="a pseudo-terminal: Linux and macOS")
def test_in_a_terminal_the_installers_get_one_and_their_noise_still_goes(fakes):
    """Where the bootstrap prints to a terminal, pip and uv are given one (so they draw their progress bars), uv's
    downloads are counted from its bars, and their lines, which a terminal ends with \\r\\n, are still sifted."""
    first = in_a_terminal(BOOTSTRAP, {**fakes, "FAKE_RUN": "first"})
    assert "Prepared 3 packages in 1.50s (a terminal: True)" in first, first
    assert "\rtorch      ━━━━━━━━━━━━━━━━━━━━ 6.00 MiB/12.50 MiB" in first, "uv's bar, shown as drawn"
    assert "installed by uv: 31 MB downloaded" in first and " + numpy" not in first, first
    second = in_a_terminal(BOOTSTRAP, {**fakes, "FAKE_RUN": "second"})
    assert "Audited 157 packages in 20ms (a terminal: True)" in second, second
    assert "already satisfied" not in second and "attention-course==" not in second, second


def test_the_relay_shows_a_redrawn_bar_at_once_and_keeps_what_a_terminal_shows(capsys):
    """A line's start that waits 0.1 s for its end (a bar redrawn after \\r) is shown then, not once the bar is done;
    one written in pieces within 0.1 s (uv colours a line piece by piece) is judged whole, its noise left out; and what
    is kept for the MB count reads as the terminal shows it: colours out, each line as last redrawn."""
    relay = bootstrap._Relay()
    relay.feed("Requirement already satisfied: uv\r\n\x1b[1mDownloading\x1b[0m x (2.0 MB)\r\n \x1b[32m+\x1b[39m ")
    relay.feed("numpy==2.4.6\r\n\r[#  ] 1/3")
    relay.tick()
    assert capsys.readouterr().out == "\x1b[1mDownloading\x1b[0m x (2.0 MB)\n", "the bar waits 0.1 s for more"
    relay.pending_since -= 0.1
    relay.tick()
    assert capsys.readouterr().out == "\r[#  ] 1/3"
    relay.feed("\r[###] 3/3\r\n")
    assert capsys.readouterr().out == "\r[###] 3/3\n"
    assert relay.text().splitlines()[1:] == ["Downloading x (2.0 MB)", " + numpy==2.4.6", "[###] 3/3"]


def test_what_was_downloaded_is_counted_from_lines_or_from_uvs_bars():
    """pip says "Downloading x (17.6 MB)" (terminal or not), uv "Downloading torch (12.5MiB)" where it prints to no
    terminal; in one it draws bars, redrawn, whose totals count, each package's once."""
    assert bootstrap._downloaded_mb("  Downloading uv-0.13.9-py3-none-any.whl (17.6 MB)\nDownloading torch (12.5MiB)\n") \
        == pytest.approx(17.6 + 12.5 * 1.048576)
    bars = ("jupyterlab           ------------------------------ 16.00 KiB/16.53 MiB\n"
            "torch      ━━━━━━━━━━━━━━━━━━━━━━━ 96.00 MiB/200.0 MiB\n"
            "jupyterlab           ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 16.53 MiB/16.53 MiB\n"
            "   ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 17.6/17.6 MB 45.2 MB/s eta 0:00:00\n")  # pip's: said above
    assert bootstrap._downloaded_mb(bars) == pytest.approx((16.53 + 200.0) * 1.048576)


def test_a_silent_installer_is_said_to_be_still_at_work(monkeypatch, capsys):
    """pip unpacking PyTorch and uv compiling bytecode print nothing for half a minute on a busy machine: after
    QUIET_S seconds of silence, and every QUIET_S seconds after, a line says the installer is still at work, and at
    what where its last line tells."""
    monkeypatch.setattr(bootstrap, "QUIET_S", 0.5)
    script = ("import time; print('Installed 147 packages in 5.66s', flush=True); time.sleep(1.7); "
              "print('Bytecode compiled')")
    code, text, _ = bootstrap.run_shown([sys.executable, "-c", script])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0] == "Installed 147 packages in 5.66s" and lines[-1] == "Bytecode compiled", lines
    nudges = lines[1:-1]
    assert 2 <= len(nudges) <= 4, lines
    for nudge in nudges:
        assert re.fullmatch(r"  … still at work \(\d s since its last line\): uv is compiling their Python files, so "
                            r"that they start faster", nudge), lines
    assert text.splitlines() == ["Installed 147 packages in 5.66s", "Bytecode compiled"], "the nudges are not kept"

    relay = bootstrap._Relay()  # mid-bar, a nudge starts a line of its own; with no telling last line, says no more
    relay.feed("\r[#  ] 1/3")
    relay.quiet_since = relay.nudged = relay.pending_since = time.monotonic() - 0.6
    relay.tick()
    assert capsys.readouterr().out == "\r[#  ] 1/3\n  … still at work (1 s since its last line)\n"


def test_the_steps_count_on_from_the_environments_and_time_each(monkeypatch, capsys):
    """make runs the bootstrap with the Python it finds; that one makes .venv (step 1), and the venv's Python goes on
    from step 2 with step 1's time, for the last line."""
    steps = bootstrap.Steps(3, done=[("environment", 3.2)])
    steps.start("PyTorch", "Installing PyTorch")
    steps.start("the course", "PyTorch 2.13.0 is installed and supported: kept")
    assert capsys.readouterr().out == ("[2/3] Installing PyTorch …\n"
                                       "[3/3] PyTorch 2.13.0 is installed and supported: kept\n")
    assert re.fullmatch(r"3 s \(environment 3 s, PyTorch 0 s, the course 0 s\)", steps.took()), steps.took()


def test_make_venv_then_hands_over_to_its_python(monkeypatch, tmp_path, capsys):
    """--venv DIR: the environment is made (step 1 of 3, said first), then its Python installs the rest, told what
    comes next and how long step 1 took."""
    runs = []

    def run(cmd, **kw):
        runs.append(list(cmd))
        if cmd[1:3] == ["-m", "venv"]:
            python = Path(bootstrap.venv_python(cmd[3]))
            python.parent.mkdir(parents=True)
            python.touch()
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(bootstrap.subprocess, "run", run)
    venv = str(tmp_path / "venv")
    assert bootstrap.main(["--venv", venv, "--then", "starting JupyterLab"]) == 0
    assert capsys.readouterr().out == f"[1/3] Making a Python environment in {venv}/ (a few seconds) …\n"
    assert runs[0] == [sys.executable, "-m", "venv", venv]
    handover = runs[1]
    assert handover[:3] == [bootstrap.venv_python(venv), "-m", "utils.bootstrap"], handover
    assert handover[handover.index("--then") + 1] == "starting JupyterLab"
    assert [arg for arg in handover if re.fullmatch(r"--done=environment=\d+\.\d\d", arg)], handover

    assert bootstrap.main(["--venv", venv]) == 0  # made already: said, and kept
    assert capsys.readouterr().out == f"[1/3] The Python environment {venv}/ is there: kept\n"


def test_attn_lab_says_where_it_opens_and_how_to_stop_it():
    from utils.cli import lab_banner

    assert lab_banner([]).startswith("Starting JupyterLab at http://localhost:8888/lab (or the next free port); your "
                                     "browser opens it")
    banner = lab_banner(["--no-browser", "--port", "8899"])
    assert "http://localhost:8899/lab" in banner and "open the link with its token" in banner
    assert "http://localhost:9000/lab" in lab_banner(["--ServerApp.port=9000"])
    assert banner.endswith("Stop it with Ctrl+C, twice.")


def test_make_lab_once_installed_says_one_line_before_jupyterlab():
    """A second `make lab`: no install, no command echoed by make: attn lab's one line, then JupyterLab's (here
    `jupyter lab --version`, which prints its version and exits)."""
    if subprocess.run(["make", "-q", "install"], cwd=ROOT).returncode != 0:
        pytest.skip("the environment is older than pyproject.toml: `make lab` would install first")
    proc = subprocess.run(["make", "--no-print-directory", "lab", "LAB_ARGS=--version"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("Starting JupyterLab at http://localhost:8888/lab"), lines
    assert re.fullmatch(r"\d+\.\d+\.\d+", lines[1]), lines
