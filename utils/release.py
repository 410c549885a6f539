"""`attn release`: regenerate the student notebooks in notebooks/ from solutions/ with nbgrader, in each language.

English copies go to notebooks/<id>/, a translated edition's to notebooks/<lang>/<id>/ (`utils.i18n` builds its
solution notebooks from the English ones and i18n/<lang>/*.yml; nbgrader then strips them as it strips the English).
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import i18n
from . import notebooks as nbs

BACKUPS = nbs.ROOT / ".backups"
#: What a student copy says where an answer goes (nbgrader's ClearSolutions.code_stub), per language.
CODE_STUB = {"en": "# YOUR CODE HERE", "zh": "# 在这里写你的代码"}


def release_dir(lang: str = "en") -> Path:
    """Where the student copies of `lang` live: notebooks/, or notebooks/<lang>/ for a translation."""
    return nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang


def generate(dest: Path, assignments: list[str] | None = None, lang: str = "en") -> list[Path]:
    """Run `nbgrader generate_assignment` with `dest` as the release folder, for the assignments in `lang`."""
    chosen = assignments or nbs.assignments()
    with tempfile.TemporaryDirectory(prefix="attn-release-") as tmp:
        root = nbs.ROOT
        if lang != "en":  # the translated solutions, in a course folder of their own
            root = Path(tmp)
            for assignment in chosen:
                source = nbs.read(nbs.solution_path(assignment))
                nbs.write(i18n.translate(source, lang, assignment), root / "solutions" / assignment / f"{assignment}.ipynb")
        # One nbgrader run for all of them ("*" or one id): its start-up is most of the time.
        target = "*" if assignments is None else None
        for assignment in [target] if target else chosen:
            cmd = [
                sys.executable, "-m", "nbgrader", "generate_assignment", assignment,
                "--force", "--no-db", "--log-level=WARN",
                f"--CourseDirectory.root={root}",
                f"--CourseDirectory.release_directory={dest}",
            ]
            proc = subprocess.run(cmd, cwd=nbs.ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                raise nbs.CourseError(f"nbgrader could not release {assignment}:\n{proc.stdout}{proc.stderr}")
    written = [nbs.release_path(assignment, dest) for assignment in chosen]
    if lang != "en":
        for path in written:
            path.write_text(path.read_text(encoding="utf-8").replace(CODE_STUB["en"], CODE_STUB[lang]), encoding="utf-8")
    return written


def write_solutions(lang: str, dest: Path | None = None, assignments: list[str] | None = None) -> Path:
    """The solution notebooks of `lang`'s edition, as nbgrader's source folder for a class taught in that language:
    `nbgrader generate_assignment ID --CourseDirectory.source_directory=solutions-<lang>` (README, "A class in
    Chinese"). Returns the folder (default: solutions-<lang>/ in the course folder, not in git)."""
    dest = dest or nbs.ROOT / f"solutions-{lang}"
    for assignment in assignments or nbs.assignments():
        source = nbs.read(nbs.solution_path(assignment))
        nbs.write(i18n.translate(source, lang, assignment), dest / assignment / f"{assignment}.ipynb")
    return dest


def stale(assignments: list[str] | None = None, lang: str = "en") -> list[str]:
    """Assignments whose student copy in `lang` differs from what `attn release` would write now."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp), assignments, lang)
        return [
            p.parent.name for p in fresh
            if not (nbs.release_path(p.parent.name, release_dir(lang)).is_file()
                    and filecmp.cmp(p, nbs.release_path(p.parent.name, release_dir(lang)), shallow=False))
        ]


def release(
    assignments: list[str] | None = None, target_dir: Path | None = None, backup_dir: Path = BACKUPS,
    lang: str = "en",
) -> list[str]:
    """Write fresh student copies into `target_dir` (default: `release_dir(lang)`), backing up any copy that
    differs (a learner's work)."""
    target_dir = target_dir or release_dir(lang)
    changed = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory() as tmp:
        for fresh in generate(Path(tmp), assignments, lang):
            assignment = fresh.parent.name
            target = nbs.release_path(assignment, target_dir)
            if target.is_file() and filecmp.cmp(fresh, target, shallow=False):
                continue
            if target.is_file():
                backup = backup_dir / stamp / (lang if lang != "en" else "") / assignment / target.name
                backup.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, backup)
                print(f"your copy of {assignment} differed from the new release; saved it as {backup}")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fresh, target)
            changed.append(assignment)
    return changed
