"""Colab, simulated: a fresh Python with another PyTorch already installed, the course fetched by a notebook's first cell.

    python tests/colab_simulation.py [--torch 2.14.1] [--notebooks 01_attention_intuition 08_transformer_translator]

Not part of `make test` (it builds a virtual environment of several GB). Step by step, each timed:
1. a fresh virtual environment with `torch==<version>` and Jupyter's kernel, as Colab ships them;
2. a clone of this repository standing in for the one on GitHub ($ATTN_COURSE_REPOSITORY points the first cell at it);
3. for each notebook: the student copy with the solutions filled in (as a learner would finish it), executed top to
   bottom in that environment with $ATTN_COLAB=1 standing in for Colab, in an empty folder as Colab's /content: the
   setup cell clones the course, installs it (keeping that PyTorch) and the notebook runs;
4. `attn check` (the command the first cell installed) on the executed notebook: full marks expected;
5. the first notebook again in the same environment: the first cell now installs nothing.
It prints a table of the steps with their seconds and what PyTorch ended up installed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import fill_answers  # noqa: E402
from utils import course  # noqa: E402
from utils import notebooks as nbs  # noqa: E402

RUN = """
import json, sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=1200, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(nb, sys.argv[1])
setup = next(c for c in nb.cells if c.cell_type == "code")
print(json.dumps({"setup_output": "".join(o.get("text", "") for o in setup.get("outputs", []))}))
"""


def step(rows: list, name: str, cmd: list[str], **kw) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    rows.append((name, time.monotonic() - started, proc.returncode))
    print(f"{time.monotonic() - started:7.1f} s  {'ok ' if proc.returncode == 0 else 'FAILED'}  {name}", flush=True)
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.14.1", help="the PyTorch Colab has (default 2.14.1, on this disk)")
    parser.add_argument("--notebooks", nargs="*", default=["01_attention_intuition", "08_transformer_translator"])
    parser.add_argument("--keep", action="store_true", help="keep the environment (it is several GB)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    venv, repo = work / "venv", work / "repo"
    py = venv / "bin" / "python"
    rows: list = []
    ok = True
    try:
        step(rows, "fresh virtual environment", [sys.executable, "-m", "venv", str(venv)])
        step(rows, f"Colab's PyTorch: pip install torch=={args.torch}",
             [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"torch=={args.torch}"])
        step(rows, "Colab's Jupyter: pip install ipykernel nbclient",
             [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "ipykernel", "nbclient"])
        step(rows, "the repository standing in for GitHub: git clone", ["git", "clone", "-q", str(ROOT), str(repo)])
        # The first cell clones the branch utils/course.py names (REF); here it holds what is checked out now.
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-B", course.REF], check=True)
        for assignment in args.notebooks:
            content = work / f"content-{assignment[:2]}"  # Colab's /content: a fresh runtime for each notebook
            content.mkdir()
            path = content / f"{assignment}.ipynb"
            nbs.write(fill_answers(nbs.read(nbs.release_path(assignment)), assignment), path)
            env = {**os.environ, "ATTN_COLAB": "1", "ATTN_COURSE_REPOSITORY": str(repo), "PYTHONPATH": ""}
            env.pop("VIRTUAL_ENV", None)
            env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
            proc = step(rows, f"{assignment}: Run All (the first cell installs the course)",
                        [str(py), "-c", RUN, str(path), str(content)], env=env, cwd=content)
            ok &= proc.returncode == 0
            attn = venv / "bin" / "attn"
            if not attn.exists():  # the first cell failed to install the course
                ok = False
                continue
            proc = step(rows, f"{assignment}: attn check (hidden tests)", [str(attn), "check", str(path), "--json"],
                        env=env, cwd=content)
            if proc.returncode == 0:
                result = json.loads(proc.stdout)
                print(f"          {result['score']:g} / {result['max_score']:g} points")
                ok &= result["score"] == result["max_score"] > 0
            else:
                ok = False
            if assignment == args.notebooks[0]:  # once is enough to show the first cell then installs nothing
                proc = step(rows, f"{assignment}: Run All again (the course is installed: nothing to do)",
                            [str(py), "-c", RUN, str(path), str(content)], env=env, cwd=content)
                ok &= proc.returncode == 0
        version = subprocess.run([str(py), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                 text=True).stdout.strip()
        print(f"PyTorch in the environment at the end: {version} (Colab's was {args.torch})")
        ok &= version.split("+")[0] == args.torch
        size = subprocess.run(["du", "-sh", str(venv)], capture_output=True, text=True).stdout.split()[0]
        print(f"environment: {size}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| step | seconds | ok |\n|---|---|---|")
    for name, seconds, code in rows:
        print(f"| {name} | {seconds:.1f} | {'yes' if code == 0 else 'no'} |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
