"""`attn release`: regenerate the student notebooks in notebooks/ from solutions/ with nbgrader."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import notebooks as nbs

BACKUPS = nbs.ROOT / ".backups"


def generate(dest: Path, assignments: list[str] | None = None) -> list[Path]:
    """Run `nbgrader generate_assignment` for each assignment with `dest` as the release folder."""
    written = []
    for assignment in assignments or nbs.assignments():
        cmd = [
            sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
            "--force", "--no-db", "--log-level=WARN",
            f"--CourseDirectory.root={nbs.ROOT}",
            f"--CourseDirectory.release_directory={dest}",
        ]
        proc = subprocess.run(cmd, cwd=nbs.ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise nbs.CourseError(f"nbgrader could not release {assignment}:\n{proc.stdout}{proc.stderr}")
        written.append(nbs.release_path(assignment, dest))
    return written


def stale(assignments: list[str] | None = None) -> list[str]:
    """Assignments whose notebooks/ copy differs from what `attn release` would write now."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp), assignments)
        return [
            p.parent.name for p in fresh
            if not (nbs.release_path(p.parent.name).is_file()
                    and filecmp.cmp(p, nbs.release_path(p.parent.name), shallow=False))
        ]


def release(
    assignments: list[str] | None = None, target_dir: Path = nbs.NOTEBOOKS, backup_dir: Path = BACKUPS
) -> list[str]:
    """Write fresh student copies into `target_dir`, backing up any copy that differs (a learner's work)."""
    changed = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory() as tmp:
        for fresh in generate(Path(tmp), assignments):
            assignment = fresh.parent.name
            target = nbs.release_path(assignment, target_dir)
            if target.is_file() and filecmp.cmp(fresh, target, shallow=False):
                continue
            if target.is_file():
                backup = backup_dir / stamp / assignment / target.name
                backup.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, backup)
                print(f"your copy of {assignment} differed from the new release; saved it as {backup}")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fresh, target)
            changed.append(assignment)
    return changed
