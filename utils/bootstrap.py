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

The course's own ~150 packages are installed by uv (https://docs.astral.sh/uv/), which pip installs first: it
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
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import time

#: The PyTorch versions the course supports (pyproject.toml says the same; tests/test_environment.py checks it).
TORCH_RANGE = ">=2.13,<2.16"
#: PyTorch's index of CPU-only builds (Linux and Windows).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Where PyPI is asked when the CPU index cannot be: the version the course is measured with most.
TORCH_FALLBACK = "torch==2.13.0"
_DOWNLOADING = re.compile(r"Downloading \S+ \(([\d.]+) ?([kMG]i?B)\)")
_UNITS = {"kB": 1e-3, "MB": 1.0, "GB": 1e3, "KiB": 1.024e-3, "MiB": 1.048576, "GiB": 1073.741824}
#: The uv that installs the course (measured with 0.13.9).
UV = "uv>=0.5,<1"
#: pip's settings that uv is given, as uv's options; `cert` and `timeout` go to uv as environment variables.
_PIP_TO_UV = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
              "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
#: pip's settings that change nothing about what is installed from where.
_PIP_NEUTRAL = {"cert", "timeout", "default-timeout", "disable-pip-version-check", "progress-bar", "retries",
                "no-input", "quiet", "verbose", "cache-dir", "no-cache-dir", "root-user-action", "no-color",
                "no-warn-script-location", "break-system-packages"}


def torch_version() -> str | None:
    """The PyTorch installed in this Python, or None (asked in a subprocess: importing torch here is slow)."""
    proc = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True)
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
    """The MB an installer says it downloaded ("Downloading x (12.3 MB)" from pip, "(12.3MiB)" from uv)."""
    return sum(float(n) * _UNITS[unit] for n, unit in _DOWNLOADING.findall(out))


def pip(*args: str, quiet_timeout: bool = False) -> tuple[int, float, str]:
    """Run pip in this Python; returns (exit code, MB downloaded, the last lines it printed)."""
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", *args]
    if quiet_timeout:
        cmd += ["--timeout", "5", "--retries", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    downloaded = _downloaded_mb(out)
    tail = "\n".join(line for line in out.splitlines() if "is ignored" not in line)[-3000:]
    return proc.returncode, downloaded, tail


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
        print("pip is configured in a way uv is not told about: pip installs the course")
        return None
    options, env = translated
    code, got, _ = pip(UV)
    if code != 0:
        print("uv could not be installed: pip installs the course")
        return None
    cmd = [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable, "--compile-bytecode", *options,
           *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    out = proc.stdout + proc.stderr
    downloaded = got + _downloaded_mb(out)
    return proc.returncode, downloaded, out[-3000:]


def install_torch() -> float:
    """Install PyTorch (see the module's docstring); returns the MB downloaded."""
    have = torch_version()
    if have and in_range(have):
        print(f"PyTorch {have} is installed and supported: kept")
        return 0.0
    if wants_cpu_index():
        started = time.monotonic()
        code, mb, _ = pip(f"torch{TORCH_RANGE}", "--index-url", CPU_INDEX, quiet_timeout=True)
        if code == 0:
            print(f"PyTorch {torch_version()} (CPU build) from {CPU_INDEX}: {mb:.0f} MB downloaded")
            return mb
        print(f"{CPU_INDEX} could not be reached ({time.monotonic() - started:.0f} s): PyTorch from PyPI instead")
    code, mb, tail = pip(TORCH_FALLBACK if wants_cpu_index() else f"torch{TORCH_RANGE}")
    if code != 0:
        sys.exit(f"PyTorch could not be installed:\n{tail}")
    print(f"PyTorch {torch_version()} from PyPI: {mb:.0f} MB downloaded")
    return mb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install PyTorch (CPU build where it fits), then the course.")
    parser.add_argument("--extras", default="lab,dev",
                        help="the course's optional parts: lab (JupyterLab, nbgrader), dev (the tests); '' for none")
    parser.add_argument("--no-course", action="store_true", help="install PyTorch only")
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    total = install_torch()
    if not args.no_course:
        target = here + (f"[{args.extras}]" if args.extras else "")
        installer = "uv"
        code, mb, tail = uv("-e", target) or (1, 0.0, "")
        if code != 0:
            if tail:
                print(f"uv could not install the course; pip installs it instead. uv said:\n{tail[-1000:]}")
            installer = "pip"
            code, more, tail = pip("-e", target)
            mb += more
        if code != 0:
            sys.exit(f"the course could not be installed:\n{tail}")
        total += mb
        print(f"the course and its tools ({args.extras or 'notebooks only'}), installed by {installer}: {mb:.0f} MB "
              "downloaded")
        startup = write_startup()
        if startup:
            print(f"Jupyter's processes start 1 s sooner here: {startup} leaves out jsonschema's IRI parser")
    print(f"downloaded in all: {total:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
