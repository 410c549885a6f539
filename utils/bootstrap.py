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
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import time

#: The PyTorch versions the course supports (pyproject.toml says the same; tests/test_environment.py checks it).
TORCH_RANGE = ">=2.13,<2.16"
#: PyTorch's index of CPU-only builds (Linux and Windows).
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: Where PyPI is asked when the CPU index cannot be: the version the course is measured with most.
TORCH_FALLBACK = "torch==2.13.0"
_DOWNLOADING = re.compile(r"Downloading \S+ \(([\d.]+) ([kMG]B)\)")
_UNITS = {"kB": 1e-3, "MB": 1.0, "GB": 1e3}


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


def pip(*args: str, quiet_timeout: bool = False) -> tuple[int, float, str]:
    """Run pip in this Python; returns (exit code, MB downloaded, the last lines it printed)."""
    cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off", *args]
    if quiet_timeout:
        cmd += ["--timeout", "5", "--retries", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    downloaded = sum(float(n) * _UNITS[unit] for n, unit in _DOWNLOADING.findall(out))
    tail = "\n".join(line for line in out.splitlines() if "is ignored" not in line)[-3000:]
    return proc.returncode, downloaded, tail


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
        code, mb, tail = pip("-e", target)
        if code != 0:
            sys.exit(f"the course could not be installed:\n{tail}")
        total += mb
        print(f"the course and its tools ({args.extras or 'notebooks only'}): {mb:.0f} MB downloaded")
    print(f"downloaded in all: {total:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
