"""On Colab: grade the notebook open in the editor with the hidden tests, from a cell (`attn check` needs a file).

    from utils.colab import check
    check()              # the report of `attn check`, for the notebook as the editor holds it now

Colab keeps the notebook in the browser and in Drive, not on the runtime's disk: this asks Colab's frontend for it
(what File → Download would give), writes it to a temporary file and runs `attn check` on it, in another process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def _notebook_json() -> dict:
    try:
        from google.colab import _message  # type: ignore[import-not-found]
    except ImportError:
        raise RuntimeError("utils.colab.check works on Colab only: elsewhere, run `attn check PATH` on your "
                           "notebook file") from None
    reply = _message.blocking_request("get_ipynb", request="", timeout_sec=60)
    if not isinstance(reply, dict) or "ipynb" not in reply:
        raise RuntimeError("Colab did not hand over the notebook: save it (Ctrl+S) and try again")
    return reply["ipynb"]


def check(verbose: bool = False, exercise: str | None = None) -> int:
    """Grade this notebook with the hidden tests and print the report; returns `attn check`'s exit code."""
    folder = Path(tempfile.mkdtemp(prefix="attn-colab-"))
    path = folder / "notebook.ipynb"  # any name: `attn check` recognises the notebook by its exercise cells
    path.write_text(json.dumps(_notebook_json()), encoding="utf-8")
    cmd = [sys.executable, "-m", "utils.cli", "check", str(path)]
    cmd += ["--verbose"] if verbose else []
    cmd += ["--exercise", exercise] if exercise else []
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout.replace(str(path), "this notebook") + proc.stderr, end="")
    return proc.returncode
