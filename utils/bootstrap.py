"""Install the course into this Python: PyTorch without needless gigabytes, then the course and its tools.

    python -m utils.bootstrap                 # what `make install` runs (learner, instructor and test tools)
    python -m utils.bootstrap --extras ""     # only what the notebooks need (as on Colab)

Run it with the Python of the environment to install into (a virtual environment's), from the course folder; it uses
nothing but the standard library, so it runs before anything is installed, on Linux, macOS and Windows alike.

PyTorch comes first, so that the course's own install finds it and adds nothing. On Linux without an NVIDIA GPU it
asks PyTorch's CPU index (about 200 MB) before PyPI, whose Linux build carries about 3 GB of CUDA libraries; where
that index cannot be reached it falls back to PyPI within seconds. macOS and Windows builds on PyPI are CPU builds
already. A PyTorch that is already installed and in the course's range is kept (Colab's, a conda one). At the end
it prints how much was downloaded.

Each step says what it does before it starts ("[2/4] PyTorch 2.13 (CPU build, about 200 MB) …"), pip's and uv's own
output comes through as they print it (their progress bars too where this runs in a terminal: they are given one), and
the last line says how long each step took and what comes next. With --venv DIR (what `make install` runs, with any
Python 3) it first makes that virtual environment if it is missing, then goes on in the environment's Python.

The course's own packages (about 170 with lab,dev) are installed by uv (https://docs.astral.sh/uv/), which pip installs first: it
fetches and unpacks in parallel, in about a third of pip's time. uv is given the settings of pip's that matter here
(indexes, find-links, constraints, trusted hosts, certificate and timeout: a mirror set for pip is used by uv too);
where pip is configured in any other way, where uv cannot be had, where it fails, or with ATTN_INSTALLER=pip, pip
installs the course as before.

In a virtual environment it also writes one line that Python runs as each of the environment's processes starts
(STARTUP_PTH, a .pth file): jsonschema, which nbformat, JupyterLab and nbgrader import, builds a parser for RFC 3987
IRIs out of 35 Earley grammars whenever the package rfc3987-syntax is installed (Jupyter's requirements install it),
about 1 s of CPU at every start of JupyterLab, an nbgrader command or a kernel
(https://github.com/jupyter-server/jupyter_server/issues/1559). No schema that Jupyter, nbgrader or the course
validates uses the formats it checks ("iri", "iri-reference"), so the line leaves that parser out; deleting the file
brings it back.
"""

from __future__ import annotations

import argparse
import ast
import codecs
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Sequence

#: The PyTorch versions the course supports (pyproject.toml says the same; tests/test_environment.py checks it).
TORCH_RANGE = ">=2.13,<2.16"
#: PyTorch's index of CPU-only builds (Linux and Windows).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Where PyPI is asked when the CPU index cannot be: the version the course is measured with most.
TORCH_FALLBACK = "torch==2.13.0"
_DOWNLOADING = re.compile(r"Downloading \S+ \(([\d.]+) ?([kMG]i?B)\)")
#: uv's bar for a download where it prints to a terminal (then it prints no "Downloading x (12.3MiB)" line):
#: "torch  ━━━━━━━━━━━━ 96.00 MiB/200.0 MiB", redrawn; each package's total counts once.
_BAR = re.compile(r"([\w.-]+) +[-━─╸╺]+ +[\d.]+ ?[kKMG]i?B/([\d.]+) ?([kKMG]i?B)")
_UNITS = {"kB": 1e-3, "KB": 1e-3, "MB": 1.0, "GB": 1e3, "kiB": 1.024e-3, "KiB": 1.024e-3, "MiB": 1.048576, "GiB": 1073.741824}
#: The uv that installs the course (measured with 0.13.9).
UV = "uv>=0.5,<1"
#: pip's settings that uv is given, as uv's options; `cert` and `timeout` go to uv as environment variables.
_PIP_TO_UV = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
              "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
#: pip's settings that change nothing about what is installed from where.
_PIP_NEUTRAL = {"cert", "timeout", "default-timeout", "disable-pip-version-check", "progress-bar", "retries",
                "no-input", "quiet", "verbose", "cache-dir", "no-cache-dir", "root-user-action", "no-color",
                "no-warn-script-location", "break-system-packages"}


def torch_version(python: str = sys.executable) -> str | None:
    """The PyTorch installed in a Python, or None (asked from its metadata in a subprocess: importing torch is slow)."""
    proc = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('torch'))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def in_range(version: str) -> bool:
    """Whether a PyTorch version (e.g. "2.14.1+cu130") is within TORCH_RANGE."""
    def release(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:2])

    floor, ceiling = (release(bound) for bound in re.findall(r"[<>]=?\s*([\d.]+)", TORCH_RANGE))
    return floor <= release(version) < ceiling


def wants_cpu_index() -> bool:
    """Linux without an NVIDIA GPU: PyPI's build would bring CUDA libraries nobody uses here."""
    if platform.system() != "Linux" or os.environ.get("ATTN_TORCH_INDEX") == "pypi":
        return False
    return shutil.which("nvidia-smi") is None and not os.path.exists("/proc/driver/nvidia")


def _downloaded_mb(out: str) -> float:
    """The MB an installer says it downloaded ("Downloading x (12.3 MB)" from pip, "(12.3MiB)" from uv, or uv's bars
    in a terminal), from all it printed, colours left out and every redraw of a bar on a line of its own."""
    said = sum(float(n) * _UNITS[unit] for n, unit in _DOWNLOADING.findall(out))
    return said + sum({name: float(n) * _UNITS[unit] for name, n, unit in _BAR.findall(out)}.values())


def pip(*args: str, quiet_timeout: bool = False) -> tuple[int, float, str]:
    """Run pip in this Python, its output shown as it comes (run_shown); returns (exit code, MB downloaded, the last
    lines it printed)."""
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args]
    if quiet_timeout:
        cmd += ["--timeout", "5", "--retries", "0"]
    code, out, mb = run_shown(cmd)
    tail = "\n".join(line for line in out.splitlines() if not _NOISE.search(line))[-3000:]
    return code, mb, tail


def say(text: str) -> None:
    """Print a line at once: under make (or any pipe) Python holds its output back, and a learner watching a silent
    install for minutes takes it for hung."""
    print(text, flush=True)


#: Lines of an installer's that tell a learner nothing: pip's warnings about a machine's find-links ("Location … is
#: ignored"), its "already satisfied" lines (one a package on a second run) and uv's list of every package it added,
#: replaced or removed (it says how many).
_NOISE = re.compile(r"^WARNING: Location .* is ignored|^Requirement already satisfied|^ [+~-] [\w.-]+==")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: After this many seconds without a line from an installer, a line says it is still at work (pip unpacking PyTorch,
#: uv compiling 7,000 files to bytecode: 35 s each on a busy 2-core machine, with no bar of their own).
QUIET_S = 10.0
#: What an installer is doing while silent, by its last line.
_BUSY = [(re.compile(r"^Installing collected packages|^ *Successfully uninstalled"),
          "pip is unpacking and installing them"),
         (re.compile(r"^Installed \d+ packages?"), "uv is compiling their Python files, so that they start faster")]


def _plain(raw: str) -> str:
    """What a terminal shows of a stretch of output: its colours left out, a line redrawn after \\r as redrawn."""
    lines = _ANSI.sub("", raw).replace("\r\n", "\n").split("\n")
    return "\n".join(line.split("\r")[-1].rstrip() for line in lines)


class _Relay:
    """Pass an installer's output on as it comes, less its _NOISE lines; keep all of it, as text, for what it says.
    Called every 50 ms (tick), it shows a line's start that has waited 0.1 s for its end (a progress bar being redrawn
    after \\r: shown as it is drawn, not once finished), and says when the installer has been silent for QUIET_S s.
    A line's parts written within 0.1 s (uv writes a coloured line in several pieces) are judged as one line."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.pending = ""
        self.lock = threading.Lock()
        self.quiet_since = self.nudged = self.pending_since = time.monotonic()
        self.last_line, self.mid_line = "", False

    def feed(self, text: str) -> None:
        with self.lock:
            self.seen.append(text)
            self.quiet_since = self.nudged = time.monotonic()
            if not self.pending:
                self.pending_since = self.quiet_since
            text = (self.pending + text).replace("\r\n", "\n")  # a terminal's line ends
            *lines, self.pending = text.split("\n")
            if lines:
                self.pending_since = self.quiet_since
            self.last_line = next((_plain(line) for line in reversed(lines) if _plain(line)), self.last_line)
            self._write("".join(line + "\n" for line in lines if not _NOISE.search(_plain(line))))

    def tick(self) -> None:
        with self.lock:
            now = time.monotonic()
            if self.pending and now - self.pending_since >= 0.1:
                self._write(self.pending)
                self.pending = ""
            if now - self.nudged >= QUIET_S:
                self.nudged = now
                self._nudge(now)

    def _nudge(self, now: float) -> None:
        """Say "… still at work (20 s since its last line): uv is compiling …": a silent installer is not hung."""
        doing = next((f": {what}" for pattern, what in _BUSY if pattern.search(self.last_line)), "")
        fresh_line = "\n" if self.mid_line else ""
        self._write(f"{fresh_line}  … still at work ({now - self.quiet_since:.0f} s since its last line){doing}\n")

    def _write(self, text: str) -> None:
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
            self.mid_line = not text.endswith("\n")

    def text(self) -> str:
        self.feed("\n" if self.pending else "")
        return _plain("".join(self.seen))


def run_shown(cmd: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str, float]:
    """Run an installer, its output passed on as it comes; returns (exit code, what it printed as a terminal shows it,
    the MB it downloaded). Where this
    prints to a terminal on Linux or macOS the installer gets a terminal of its own, as wide as ours, so that pip and uv
    draw their progress bars; elsewhere (make's output sent to a file, a test, Windows) they print plain lines."""
    relay, decode = _Relay(), codecs.getincrementaldecoder("utf-8")(errors="replace").decode
    if os.name == "posix" and sys.stdout.isatty():
        import pty

        source, terminal = pty.openpty()
        _same_size(terminal)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=env)
        os.close(terminal)
    else:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env=env)
        source = proc.stdout.fileno()
    done = threading.Event()
    watch = threading.Thread(target=_watch, args=(relay, done), daemon=True)
    watch.start()
    while True:
        try:
            chunk = os.read(source, 65536)
        except OSError:  # the pseudo-terminal, once the installer has closed it (Linux)
            chunk = b""
        if not chunk:
            break
        relay.feed(decode(chunk))
    proc.wait()
    done.set()
    watch.join()
    if proc.stdout is None:
        os.close(source)
    return proc.returncode, relay.text(), _downloaded_mb(_ANSI.sub("", "".join(relay.seen)).replace("\r", "\n"))


def _watch(relay: _Relay, done: threading.Event) -> None:
    """Tick the relay every 50 ms until the installer is done."""
    while not done.wait(0.05):
        relay.tick()


def _same_size(terminal: int) -> None:
    """Give a pseudo-terminal our terminal's size (a progress bar fits its width)."""
    import fcntl
    import struct
    import termios

    columns, rows = shutil.get_terminal_size()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


#: The file (in the environment's site-packages) and the line of STARTUP (see the module's docstring).
STARTUP_PTH = "attention-course-startup.pth"
STARTUP_LINE = 'import sys; sys.modules.setdefault("rfc3987_syntax", None)  # None: "import rfc3987_syntax" fails\n'


def write_startup() -> str | None:
    """Write STARTUP_PTH into this virtual environment's site-packages; returns its path, or None outside a virtual
    environment (a system Python, conda's base, Colab), where the course changes nothing for other programs."""
    if sys.prefix == sys.base_prefix:
        return None
    path = os.path.join(sysconfig.get_paths()["purelib"], STARTUP_PTH)
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Written by the attention course (utils/bootstrap.py): jsonschema goes without its 1 s IRI parser.\n")
        f.write(STARTUP_LINE)
    return path


def pip_settings(listing: str) -> dict[str, str]:
    """The settings pip applies to `pip install`, from what `pip config list` prints (lines `section.key='value'`):
    the sections global, install and :env: (PIP_* variables), later ones overriding earlier ones."""
    found: dict[str, dict[str, str]] = {}
    for line in listing.splitlines():
        match = re.match(r"^(global|install|:env:)\.([\w-]+)=(.*)$", line.strip())
        if match:
            section, key, value = match.groups()
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                value = value.strip("'\"")
            found.setdefault(key.replace("_", "-"), {})[section] = str(value)
    return {key: by[next(s for s in (":env:", "install", "global") if s in by)] for key, by in found.items()}


def uv_options(settings: dict[str, str]) -> tuple[list[str], dict[str, str]] | None:
    """uv's options and environment that mean what pip's `settings` mean, or None if some setting has no such
    translation here (a proxy, a client certificate, --no-index, ...): then pip installs the course."""
    if set(settings) - set(_PIP_TO_UV) - _PIP_NEUTRAL:
        return None
    options = ["--index-strategy", "unsafe-best-match"]  # like pip: the best version over every index
    for key, option in _PIP_TO_UV.items():
        for value in settings.get(key, "").split():
            options += [option, value]
    env = {}
    if "cert" in settings:
        env["SSL_CERT_FILE"] = settings["cert"]
    timeout = settings.get("timeout") or settings.get("default-timeout")
    if timeout:
        env["UV_HTTP_TIMEOUT"] = str(int(float(timeout)))
    return options, env


def uv(*args: str) -> tuple[int, float, str] | None:
    """`uv pip install ARGS` into this Python, with pip's settings (see the module's docstring); returns what pip()
    does, or None where uv is not used (then nothing was installed but, perhaps, uv itself)."""
    if os.environ.get("ATTN_INSTALLER") == "pip":
        return None
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    translated = uv_options(pip_settings(listing.stdout)) if listing.returncode == 0 else None
    if translated is None:
        say("pip is configured in a way uv is not told about: pip installs the course")
        return None
    options, env = translated
    code, got, _ = pip(UV)
    if code != 0:
        say("uv could not be installed: pip installs the course")
        return None
    cmd = [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable, "--compile-bytecode", *options,
           *args]
    code, out, mb = run_shown(cmd, env={**os.environ, **env})
    return code, got + mb, out[-3000:]


def torch_plan() -> str:
    """What the PyTorch step does, said before it starts."""
    have = torch_version()
    if have and in_range(have):
        return f"PyTorch {have} is installed and supported: kept"
    floor = re.search(r"[\d.]+", TORCH_RANGE).group()
    if wants_cpu_index():
        return f"Installing PyTorch {floor} or later (CPU build, about 200 MB, from download.pytorch.org)"
    if platform.system() == "Linux":
        return f"Installing PyTorch {floor} or later with CUDA (about 3 GB, from PyPI)"
    return f"Installing PyTorch {floor} or later (from PyPI)"


def install_torch() -> float:
    """Install PyTorch (see the module's docstring) unless it is there; returns the MB downloaded."""
    have = torch_version()
    if have and in_range(have):
        return 0.0
    if wants_cpu_index():
        started = time.monotonic()
        code, mb, _ = pip(f"torch{TORCH_RANGE}", "--index-url", CPU_INDEX, quiet_timeout=True)
        if code == 0:
            say(f"PyTorch {torch_version()} (CPU build) from {CPU_INDEX}: {mb:.0f} MB downloaded")
            return mb
        say(f"{CPU_INDEX} could not be reached ({time.monotonic() - started:.0f} s): PyTorch from PyPI instead")
    code, mb, tail = pip(TORCH_FALLBACK if wants_cpu_index() else f"torch{TORCH_RANGE}")
    if code != 0:
        sys.exit(f"PyTorch could not be installed:\n{tail}")
    say(f"PyTorch {torch_version()} from PyPI: {mb:.0f} MB downloaded")
    return mb


#: What the course's optional parts bring, for the course's step line.
_EXTRAS = {"lab": ["JupyterLab", "nbgrader"], "dev": ["the test tools"]}


class Steps:
    """The install's steps, each said with its number before it starts ("[2/3] Installing PyTorch …") and timed, for
    the last line; `done` are steps another Python did before this one (the environment, made by the Python make
    found), as (name, seconds)."""

    def __init__(self, total: int, done: Sequence[tuple[str, float]] = ()) -> None:
        self.total, self.times = total, list(done)
        self.current: tuple[str, float] | None = None

    def start(self, name: str, what: str) -> None:
        self.finish()
        say(f"[{len(self.times) + 1}/{self.total}] {what}{'' if what.endswith(': kept') else ' …'}")
        self.current = (name, time.monotonic())

    def finish(self) -> None:
        if self.current:
            name, started = self.current
            self.times.append((name, time.monotonic() - started))
            self.current = None

    def took(self) -> str:
        """'52 s (environment 3 s, PyTorch 28 s, the course 21 s)'."""
        self.finish()
        parts = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.times)
        return f"{sum(s for _, s in self.times):.0f} s ({parts})"


def venv_python(venv: str) -> str:
    """The Python of a virtual environment."""
    return os.path.join(venv, "Scripts" if os.name == "nt" else "bin", "python")


def make_venv(venv: str, steps: Steps) -> None:
    """Make the virtual environment `venv` unless it is there (venv's own messages say what a Python lacks, e.g.
    Debian's python3-venv)."""
    if os.path.exists(venv_python(venv)):
        steps.start("environment", f"The Python environment {venv}/ is there: kept")
        return
    steps.start("environment", f"Making a Python environment in {venv}/ (a few seconds)")
    if subprocess.run([sys.executable, "-m", "venv", venv]).returncode != 0:
        sys.exit(f"{sys.executable} could not make a virtual environment in {venv}/ (see above)")


HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _short(path: str) -> str:
    """A path as the learner knows it: within the course folder, from there (.venv/…)."""
    return os.path.relpath(path, HERE) if os.path.abspath(path).startswith(HERE + os.sep) else path


def _done(text: str) -> tuple[str, float]:
    name, _, seconds = text.rpartition("=")
    return name, float(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install PyTorch (CPU build where it fits), then the course.")
    parser.add_argument("--extras", default="lab,dev",
                        help="the course's optional parts: lab (JupyterLab, nbgrader), dev (the tests); '' for none")
    parser.add_argument("--no-course", action="store_true", help="install PyTorch only")
    parser.add_argument("--venv", help="make this virtual environment if it is missing, and install into it")
    parser.add_argument("--then", default="", help="what comes after the install, for its last line")
    parser.add_argument("--done", action="append", type=_done, default=[], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    steps = Steps(len(args.done) + bool(args.venv) + 1 + (not args.no_course), args.done)
    if args.venv:
        make_venv(args.venv, steps)
        if os.path.realpath(sys.prefix) != os.path.realpath(args.venv):  # the rest is done by the venv's Python
            steps.finish()
            rest = ["--extras", args.extras, "--then", args.then, *(["--no-course"] if args.no_course else []),
                    *(f"--done={name}={seconds:.2f}" for name, seconds in steps.times)]
            return subprocess.run([venv_python(args.venv), "-m", "utils.bootstrap", *rest], cwd=HERE).returncode
    steps.start("PyTorch", torch_plan())
    total = install_torch()
    if not args.no_course:
        extras = args.extras or "notebooks only"
        names = [name for extra in args.extras.split(",") if extra for name in _EXTRAS.get(extra, [extra])]
        tools = " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))
        steps.start("the course", f"Installing the course{' with ' + tools if tools else ''} ({extras}), "
                    + ("by pip" if os.environ.get("ATTN_INSTALLER") == "pip" else "by uv, which pip installs first"))
        target = HERE + (f"[{args.extras}]" if args.extras else "")
        installer = "uv"
        code, mb, tail = uv("-e", target) or (1, 0.0, "")
        if code != 0:
            if tail:
                say(f"uv could not install the course; pip installs it instead. uv said:\n{tail[-1000:]}")
            installer = "pip"
            code, more, tail = pip("-e", target)
            mb += more
        if code != 0:
            sys.exit(f"the course could not be installed:\n{tail}")
        total += mb
        say(f"the course and its tools ({extras}), installed by {installer}: {mb:.0f} MB downloaded")
        startup = write_startup()
        if startup:
            say(f"Jupyter's processes start 1 s sooner here: {_short(startup)} leaves out "
                "jsonschema's IRI parser")
    say(f"Installed into {_short(sys.prefix)} in {steps.took()}; downloaded in all: {total:.0f} MB."
        + (f" Next: {args.then} …" if args.then else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
