"""The hidden inputs cannot be computed by a learner (issue 32): the seed's key is a secret of the grading side.

Before, `submission_seed` hashed the answers' tokens, docstrings and comments left out, with a constant in utils/: a
learner with notebooks/ and utils/ computed the seed of their own answer, and so the inputs of every visible check,
then put a table of answers for exactly those inputs in a docstring, outside the hash. Now the seed hashes the whole
source with a random key made on the grading side (`grader/seed.key`, `utils/engine/seed.py`), which never reaches a
student and which the learner's code cannot read while it is graded; a regrade still gives the same score.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import stat
import subprocess
import sys
import tokenize

import nbformat
import pytest
import torch

from utils import notebooks as nbs
from utils.engine import seed as seeds
from utils.engine.checking import Engine, GradingContext
from utils.engine.sandbox import isolation
from utils.grading import CheckContext, Checker

from .conftest import by_id, plants

A = "01_attention_intuition"


# -- the key ------------------------------------------------------------------------------------------------------
_MAKE_KEY = "import sys; from pathlib import Path; from utils.engine.seed import seed_key; print(seed_key(Path(sys.argv[1])).hex())"


def test_the_key_is_made_once_private_and_agreed_on_by_processes_that_start_together(tmp_path):
    folder = tmp_path / "grader"
    folder.mkdir()
    starts = [subprocess.Popen([sys.executable, "-c", _MAKE_KEY, str(folder)], cwd=nbs.ROOT, stdout=subprocess.PIPE,
                               text=True) for _ in range(6)]
    keys = {p.communicate(timeout=120)[0].strip() for p in starts}
    assert len(keys) == 1 and len(bytes.fromhex(keys.pop())) == 32
    assert os.listdir(folder) == ["seed.key"], "no temporary file left behind"
    path = seeds.key_path(folder)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = seeds.seed_key(folder)
    assert path.read_text().strip() == key.hex()
    assert seeds.seed_key(folder) is key, "read once per process"


def test_grading_on_a_fresh_copy_leaves_alone_a_key_another_check_is_making(tmp_path, monkeypatch):
    """Without isolation, grading compares the course files before and after the learner's code runs. On a fresh copy a
    second `attn check` may be making the key at that instant: its temporary file comes and goes on its own. Putting it
    back (or calling the result void) was wrong; any other file that appears is still removed and voids the result."""
    from utils.engine import checking

    for folder in checking.PROTECTED:
        (tmp_path / folder).mkdir()
    (tmp_path / "grader" / "seed.key").write_text(os.urandom(32).hex() + "\n")
    (tmp_path / "utils" / "course.py").write_text("COURSE = 1\n")
    monkeypatch.setattr(nbs, "ROOT", tmp_path)
    making = tmp_path / "grader" / ".seed.key.4242.0a1b2c3d"
    making.write_text("half")
    snapshot = checking._snapshot()
    making.unlink()  # the other process linked it to seed.key and removed it
    (tmp_path / "grader" / ".seed.key.4343.0e0f1a2b").write_text("another")  # a third one starts
    checking._verify(snapshot)  # nothing changed that grading owns
    assert not making.exists(), "a vanished temporary key must not be put back"
    assert (tmp_path / "grader" / ".seed.key.4343.0e0f1a2b").exists(), "the other process's file is left to it"
    (tmp_path / "grader" / "seed.key.py").write_text("planted")  # not the temporary name: the learner's
    (tmp_path / "utils" / "course.py").write_text("COURSE = 2\n")
    with pytest.raises(nbs.CourseError, match="course files changed"):
        checking._verify(snapshot)
    assert not (tmp_path / "grader" / "seed.key.py").exists()
    assert (tmp_path / "utils" / "course.py").read_text() == "COURSE = 1\n"


def test_a_copied_key_is_made_private_and_a_damaged_or_linked_one_is_refused(tmp_path):
    key = os.urandom(32)
    copied = tmp_path / "copied"
    copied.mkdir()
    (copied / "seed.key").write_text(key.hex() + "\n")
    (copied / "seed.key").chmod(0o644)  # copied from the first grading machine without its mode
    assert seeds.seed_key(copied) == key
    assert stat.S_IMODE((copied / "seed.key").stat().st_mode) == 0o600
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "seed.key").write_text("not a key")
    with pytest.raises(nbs.CourseError, match="not a key of 32 bytes"):
        seeds.seed_key(damaged)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "seed.key").symlink_to(copied / "seed.key")  # planted to make every grading use a known key
    with pytest.raises(nbs.CourseError, match="not a link"):
        seeds.seed_key(linked)


def test_the_courses_key_is_ignored_by_git_and_lies_nowhere_students_get():
    key = seeds.seed_key()  # made here if no grading has made it yet
    path = seeds.key_path()
    assert path == nbs.grader_dir() / "seed.key"
    rel = str(path.relative_to(nbs.ROOT)) if path.is_relative_to(nbs.ROOT) else None
    if rel is not None:
        assert subprocess.run(["git", "check-ignore", "-q", rel], cwd=nbs.ROOT).returncode == 0, "git would track it"
        assert subprocess.run(["git", "ls-files", rel], cwd=nbs.ROOT, capture_output=True, text=True).stdout == ""
    # What students get: notebooks/ and utils/; nbgrader copies every other file of solutions/<assignment>/ into the
    # release and into feedback; release/ is nbgrader's release folder.
    for folder in ("notebooks", "utils", "solutions", "release"):
        assert not path.resolve().is_relative_to((nbs.ROOT / folder).resolve()), folder
        for file in (nbs.ROOT / folder).rglob("*"):
            if file.is_file() and not file.is_symlink() and file.stat().st_size < 50_000_000:
                data = file.read_bytes()
                assert key not in data and key.hex().encode() not in data, file


# -- the seed -----------------------------------------------------------------------------------------------------
def _old_seed(learner: nbformat.NotebookNode) -> int:
    """`submission_seed` as utils/engine/checking.py had it before issue 32 (what a student could run): the answers'
    tokens without comments and docstrings, hashed with a constant."""
    def program_text(source: str) -> str:
        try:
            tokens = [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
                      if t.type not in (tokenize.COMMENT, tokenize.NL)]
        except (tokenize.TokenError, SyntaxError):
            return source
        starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        kept = [tok for i, tok in enumerate(tokens)
                if not (tok[0] == tokenize.STRING and (i == 0 or tokens[i - 1][0] in starts)
                        and i + 1 < len(tokens) and tokens[i + 1][0] == tokenize.NEWLINE)]
        return "\x1f".join(f"{kind}:{text}" for kind, text in kept)

    digest = hashlib.blake2b(b"attention-course hidden inputs", digest_size=8)
    for cell in learner.cells:
        meta = nbs.nbgrader_meta(cell)
        if cell.cell_type != "code" or (meta.get("grade_id") and not meta.get("solution")):
            continue
        digest.update(program_text(cell.source).encode() + b"\0")
    return int.from_bytes(digest.digest(), "big") >> 4


def test_the_seed_is_the_keys_and_the_whole_answers():
    nb = nbs.read(nbs.solution_path(A))
    key = os.urandom(32)
    seed = seeds.submission_seed(nb, key)
    assert seeds.submission_seed(nbs.read(nbs.solution_path(A)), key) == seed
    assert seeds.submission_seed(nb, os.urandom(32)) != seed
    assert seeds.submission_seed(nb) == seeds.submission_seed(nb, seeds.seed_key()), "the grading side's key"
    answer = next(c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == "softmax")
    original = answer.source
    for changed in (original.replace('"""Softmax', '"""A docstring the learner changed. Softmax', 1),
                    original + "\n# a comment of the learner's\n", original + "\n", original + "\nx_learner = 1\n"):
        answer.source = changed
        assert seeds.submission_seed(nb, key) != seed, changed[-60:]
        answer.source = original
    assert seeds.submission_seed(nb, key) == seed


# -- regrading, the sandbox, and the attack -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def engine():
    with Engine() as warm:
        yield warm


def _with_answer(cell_id: str, source: str) -> nbformat.NotebookNode:
    nb = nbs.read(nbs.solution_path(A))
    next(c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == cell_id).source = source
    return nb


def _planted(plant: dict) -> nbformat.NotebookNode:
    nb = nbs.read(nbs.solution_path(A))
    cell = next(c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == plant["cell"])
    cell.source = cell.source.replace(plant["old"], plant["new"])
    return nb


def _results(grading) -> list[tuple]:
    return [(e.id, e.score, e.passed, e.feedback()) for e in grading.exercises]


@pytest.mark.slow
def test_a_regrade_meets_the_same_inputs_and_gives_the_same_score(engine):
    """A notebook with a catalogued mistake, graded twice with the grading side's key: the same seed, the same
    scores and the same feedback (which quotes values of the inputs); another key meets other inputs."""
    learner = _planted(plants(A).MISTAKES[0])
    first, again = engine.grade(learner, A), engine.grade(learner, A)
    assert _results(first) == _results(again)
    assert first.score < first.max_score
    assert seeds.submission_seed(learner) == seeds.submission_seed(nbformat.reads(nbformat.writes(learner), 4))


_READS_THE_KEY = '''
def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    try:
        found = open({path!r}).read().strip()
    except OSError as e:
        raise RuntimeError(f"no key here: {{type(e).__name__}}") from None
    raise RuntimeError(f"the key is {{found}}")
'''


@pytest.mark.slow
@pytest.mark.skipif(isolation() is not None, reason="without isolation the learner's code runs as the grading user")
def test_the_learners_code_cannot_read_the_key_while_it_is_graded(engine):
    path = seeds.key_path()
    key = seeds.seed_key()
    assert path.read_text().strip() == key.hex(), "the control: the grading side reads it"
    result = by_id(engine.grade(_with_answer("softmax", _READS_THE_KEY.format(path=str(path))), A).result(A))
    feedback = result["softmax"]["feedback"]
    assert "no key here" in feedback and "the key is" not in feedback, feedback
    assert key.hex() not in json.dumps(result)


# The learner's answer: a table of outputs for the inputs it expects, in its docstring; it implements nothing.
_TABLE_ANSWER = """def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    '''{table}'''
    import hashlib, json
    table = json.loads(softmax.__doc__)
    key = hashlib.sha256(x.detach().contiguous().numpy().tobytes()).hexdigest() + str(tuple(x.shape)) + str(dim)
    return torch.tensor(table[key]) if key in table else torch.zeros_like(x)
"""


def _key(x: torch.Tensor, dim: int) -> str:
    return hashlib.sha256(x.detach().contiguous().numpy().tobytes()).hexdigest() + str(tuple(x.shape)) + str(dim)


class _Predicting(CheckContext):
    """The learner's kernel, with the grader's seed of each check (`GradingContext.seed`) from a seed they computed."""

    seed = GradingContext.seed

    def __init__(self, seed_base: int) -> None:
        self.seed_base = seed_base


def _predicted_table(seed: int) -> dict[str, list]:
    """What the student computes at home with notebooks/ and utils/: the visible test cell of softmax run with the
    grader's per-check seeds (`GradingContext.seed`) derived from `seed`, every call's input and output recorded."""
    release = nbs.read(nbs.release_path(A))
    test = next(c for c in release.cells if nbs.nbgrader_meta(c).get("grade_id") == "test_softmax").source

    def run(base: int) -> dict[str, list]:
        table = {}

        def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
            out = torch.softmax(x, dim=dim)
            table[_key(x, dim)] = out.tolist()
            return out

        context = _Predicting(base)
        ns = {"torch": torch, "softmax": softmax,
              "Checker": lambda exercise, *a, **k: Checker(exercise, 3, context=context)}
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            exec(compile(test, "<visible test cell>", "exec"), ns)  # noqa: S102
        return table

    predicted, control = run(seed), run(seed + 1)
    return {k: v for k, v in predicted.items() if k not in control}  # only the inputs that come from the seed


@pytest.mark.slow
def test_an_answer_that_predicts_its_inputs_gains_nothing_now(engine):
    """Issue 32's attack on softmax: the seed computed the old way (the docstring outside the hash), the visible
    checks' random inputs computed from it, and their outputs put in the docstring. Graded as before issue 32 (the
    old seed) it gains points without implementing anything; graded now (the grading side's key, the whole source)
    it gains none."""
    empty = _with_answer("softmax", _TABLE_ANSWER.format(table="{}"))
    seed = _old_seed(empty)
    table = _predicted_table(seed)
    assert len(table) >= 2, "the visible checks of softmax draw random inputs"
    learner = _with_answer("softmax", _TABLE_ANSWER.format(table=json.dumps(table)))
    assert _old_seed(learner) == seed, "before: the table did not change the seed it was made for"
    assert seeds.submission_seed(learner) != seeds.submission_seed(empty), "now: the docstring is hashed"

    before = by_id(engine.grade(learner, A, seed=_old_seed(learner)).result(A))["softmax"]
    now = by_id(engine.grade(learner, A).result(A))["softmax"]
    assert before["score"] > 0, ("the attack was real: it earned points before", before)
    assert now["score"] == 0, ("it earns nothing now", now)
