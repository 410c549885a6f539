"""The course's measured figures, kept in one place: `docs/figures.json`, shown as the table of docs/maintainers.md.

A figure is written by what measures it, never retyped: a whole `make test` that passes records its length and test
count (tests/conftest.py), `attn bench` its budgets' timings. Each goes first to `build/figures/NAME.json` (not
committed: a run on a laptop under load should not rewrite the course's numbers by itself); `attn docs` takes those
records into `docs/figures.json` and rewrites the table from it, and a maintainer commits the two when the run was
one worth quoting. README and the pages cite the table instead of repeating its numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any

from . import notebooks as nbs

FILE = nbs.ROOT / "docs" / "figures.json"
PENDING = nbs.ROOT / "build" / "figures"
FIELDS = ("what", "value", "measured", "on", "by")


def machine() -> str:
    """What a figure was measured on, in the words the table uses: cores, system, PyTorch."""
    try:
        import torch

        version = f"PyTorch {torch.__version__}"
    except ImportError:  # pragma: no cover - torch is a dependency of the course
        version = "no PyTorch"
    return f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, {version}"


def record(key: str, *, what: str, value: str, by: str, folder: Path | None = None) -> Path:
    """Write one measured figure to build/figures/KEY.json, dated and with the machine it was measured on."""
    if not (key and what and value and by):
        raise ValueError("a figure needs a key, what was measured, its value and what measured it")
    folder = PENDING if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"what": what, "value": value, "measured": dt.date.today().isoformat(), "on": machine(), "by": by}
    path = folder / f"{key}.json"
    path.write_text(json.dumps({key: entry}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def load(path: Path = FILE) -> dict[str, dict[str, str]]:
    """The committed figures, in their table's order; each has exactly FIELDS."""
    figures = json.loads(path.read_text(encoding="utf-8"))
    for key, entry in figures.items():
        if tuple(entry) != FIELDS:
            raise ValueError(f"{path.name}: figure {key!r} must have the fields {FIELDS}, in that order")
    return figures


def take_pending(*, path: Path = FILE, pending: Path = PENDING) -> list[str]:
    """Merge build/figures/*.json into docs/figures.json (a new measurement replaces the old one in its place;
    a new figure goes last) and delete them. Returns the keys taken."""
    files = sorted(pending.glob("*.json")) if pending.is_dir() else []
    if not files:
        return []
    figures = load(path)
    taken = []
    for file in files:
        for key, entry in json.loads(file.read_text(encoding="utf-8")).items():
            figures[key] = {field: entry[field] for field in FIELDS}
            taken.append(key)
        file.unlink()
    path.write_text(json.dumps(figures, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return taken


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows(figures: dict[str, Any] | None = None) -> list[str]:
    """The table of docs/maintainers.md, one row per figure (`attn docs` writes them)."""
    figures = load() if figures is None else figures
    return [f"| {_cell(e['what'])} | {_cell(e['value'])} | {e['measured']}, {_cell(e['on'])} | {_cell(e['by'])} |"
            for e in figures.values()]


def minutes(seconds: float) -> str:
    """1 min 5 s, as the table writes a duration."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"
