"""notebooks/ is exactly what `attn release` makes from solutions/, and a learner's edits are backed up."""

from __future__ import annotations

import shutil

import pytest

from utils import notebooks as nbs
from utils import release

from .conftest import ASSIGNMENTS


def test_notebooks_folder_is_exactly_the_release_of_solutions():
    """notebooks/ holds the English copies and one folder per translated edition (notebooks/zh/), each current."""
    from utils import i18n

    assert release.stale() == [], "notebooks/ is out of date: run `attn release`"
    released = sorted(p.name for p in nbs.NOTEBOOKS.iterdir() if p.is_dir())
    assert released == sorted(ASSIGNMENTS + [lang for lang in i18n.LANGUAGES if lang != "en"])
    for lang in i18n.LANGUAGES[1:]:
        assert sorted(p.name for p in release.release_dir(lang).iterdir() if p.is_dir()) == ASSIGNMENTS


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_student_copies_have_no_outputs_solutions_or_hidden_tests(lang):
    for assignment in ASSIGNMENTS:
        path = nbs.release_path(assignment, release.release_dir(lang))
        nb = nbs.read(path)
        text = path.read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and "check.hidden(" not in text
        for cell in nbs.code_cells(nb):
            assert cell.outputs == [] and cell.execution_count is None
            if nbs.is_answer_cell(cell):
                assert "raise NotImplementedError()" in cell.source


def test_release_backs_up_a_learners_changed_copy(tmp_path, capsys):
    assignment = ASSIGNMENTS[0]
    target = tmp_path / "notebooks"
    shutil.copytree(nbs.NOTEBOOKS / assignment, target / assignment)
    mine = nbs.release_path(assignment, target)
    mine.write_text(mine.read_text().replace("raise NotImplementedError()", "return 42  # my answer", 1))
    changed = release.release([assignment], target_dir=target, backup_dir=tmp_path / "backups")
    assert changed == [assignment]
    backups = list((tmp_path / "backups").rglob("*.ipynb"))
    assert len(backups) == 1 and "return 42  # my answer" in backups[0].read_text()
    assert mine.read_bytes() == nbs.release_path(assignment).read_bytes()
    assert "saved it as" in capsys.readouterr().out
