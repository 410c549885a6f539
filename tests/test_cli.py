"""The `attn` command as people use it: clear refusals, a readable report, and `attn lab` serving the course."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest

from utils import notebooks as nbs
from utils.engine.checking import render

from .conftest import free_port


def attn(*args, **kw):
    return subprocess.run([sys.executable, "-m", "utils.cli", *args], capture_output=True, text=True, cwd=nbs.ROOT, **kw)


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: d / "missing.ipynb", "no notebook there"),
        (lambda d: (d / "mine.ipynb").write_text("{}") and d / "mine.ipynb", "not a readable notebook"),
        (lambda d: (d / "mine.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
         and d / "mine.ipynb", "not one of the course notebooks"),
        (
            lambda d: (d / "01_attention_intuition.ipynb").write_text("{not json") and d / "01_attention_intuition.ipynb",
            "not a readable notebook",
        ),
    ],
)
def test_check_refuses_what_it_cannot_grade_with_advice(tmp_path, make, fragment):
    proc = attn("check", str(make(tmp_path)), "--json")
    assert proc.returncode == 2
    assert proc.stdout == "" and fragment in proc.stderr


_REFUSALS = [  # (arguments, what stderr says): mistakes a user makes at the command line
    (["check", "{tmp}/missing.ipynb", "--json"], "no notebook there"),
    (["train", "--data", "{tmp}/missing.tsv", "--checkpoint", "{tmp}/c.safetensors"], "no file at"),
    (["train", "--data", "{tmp}/bad.tsv", "--checkpoint", "{tmp}/c.safetensors"], "fix or delete that line"),
    (["train", "--data", "{tmp}/good.tsv", "--notebook", "{tmp}/none.ipynb", "--checkpoint", "{tmp}/c.safetensors"],
     "not found (give your copy of"),
    (["translate", "--checkpoint", "{tmp}/c.safetensors"], "give a sentence to translate"),
]


def test_a_mistyped_command_is_answered_at_once_without_importing_pytorch(tmp_path):
    """A missing or malformed file is said in a tenth of a second, not after the second and a half that importing
    PyTorch takes (and a cold grader's start beside it)."""
    (tmp_path / "bad.tsv").write_text("one field only\n")
    (tmp_path / "good.tsv").write_text("".join(f"sentence {i}\tSatz {i}\n" for i in range(20)))
    script = (
        "import contextlib, io, json, sys\nfrom utils.cli import main\nout = []\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        code = main(argv)\n"
        "    out.append([code, err.getvalue(), 'torch' in sys.modules])\n"
        "print(json.dumps(out))\n")
    argvs = [[a.format(tmp=tmp_path) for a in argv] for argv, _ in _REFUSALS]
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(argvs)], capture_output=True, text=True,
                          cwd=nbs.ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for (argv, said), (code, err, torch_loaded) in zip(_REFUSALS, json.loads(proc.stdout), strict=True):
        assert code == 2 and said in err, (argv, code, err)
        assert not torch_loaded, f"attn {argv[0]} imported PyTorch before saying: {err.strip()}"


def test_report_lists_each_exercise_and_explains_failures():
    from utils.results import ExerciseResult, NotebookResult

    text = render(NotebookResult("nb", (ExerciseResult("softmax", 1.5, 2.0, summary="overflow", mistake="m"),
                                        ExerciseResult("pool", 2.0, 2.0, summary="fine"))))
    assert text.splitlines()[0] == "nb: 3.5 / 4 points"
    assert "FAIL  softmax" in text and "PASS  pool" in text and "overflow" in text and "fine" not in text


def test_maintenance_commands_report_an_up_to_date_course():
    assert attn("references", "--check").returncode == 0
    assert attn("release", "--check").returncode == 0


def test_lab_serves_the_course_with_nbgrader(tmp_path):
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "utils.cli", "lab", "--no-browser", f"--port={port}", "--IdentityProvider.token="],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )
    try:
        deadline, listing = time.time() + 60, None
        while time.time() < deadline and listing is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks", timeout=2) as r:
                    listing = json.load(r)
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()[-2000:]
                time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 60 s"
        assert {c["name"] for c in listing["content"]} >= set(nbs.assignments())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/formgrader", timeout=10) as r:
            assert r.status == 200  # nbgrader's server extension is enabled
    finally:
        server.terminate()
        server.wait(timeout=30)


# -- attn train / attn translate: what a user can get wrong ------------------------------------------------------

SOLUTION_08 = nbs.ROOT / "solutions" / "08_transformer_translator"


def _one_sentence_refusal(proc, *fragments):
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("make, fragments", [
    (lambda d: _write(d / "empty.tsv", b""), ["empty.tsv has no sentence pairs"]),
    (lambda d: _write(d / "blank.tsv", b"\n  \n\n"), ["blank.tsv has no sentence pairs"]),
    (lambda d: _write(d / "same.tsv", b"the dog sleeps\tder Hund schl\xc3\xa4ft\n" * 50),
     ["same.tsv has 1 distinct source sentence (50 lines)", "at least 10"]),
    (lambda d: _write(d / "few.tsv", "".join(f"the dog {i}\tder Hund {i}\n" for i in range(9)).encode()),
     ["few.tsv has 9 distinct source sentences", "at least 10"]),
    (lambda d: _write(d / "tabless.tsv", b"the dog\tder Hund\nthe cat  die Katze\n"),
     ["tabless.tsv, line 2: expected 'source<TAB>target'", "fix or delete that line"]),
    (lambda d: _write(d / "three.tsv", b"the dog\tder Hund\tzero one\n"), ["three.tsv, line 1: the alignment"]),
    (lambda d: _write(d / "latin1.tsv", "the café\tdas Café\n".encode("latin-1")), ["latin1.tsv is not UTF-8"]),
    (lambda d: d / "missing.tsv", ["no file at"]),
    (lambda d: d, ["no file at"]),
])
def test_train_refuses_bad_data_in_one_sentence(tmp_path, make, fragments):
    """Every --data the trainer cannot use ends in one sentence and exit status 2, before any model is built."""
    _one_sentence_refusal(attn("train", "--data", str(make(tmp_path)), "--checkpoint", str(tmp_path / "c")), *fragments)


def test_train_accepts_ten_distinct_pairs_and_reports_duplicates(tmp_path):
    """... and, told to --force over a trained model, keeps that model as a backup first."""
    lines = "".join(f"the dog {i}\tder Hund {i}\n" for i in range(10)) + "the dog 0\tder Hund 0\n"
    data = _write(tmp_path / "ten.tsv", lines.encode())
    earlier = _write(tmp_path / "c.safetensors", b"twelve minutes of someone's training")
    _write(tmp_path / "c.previous.safetensors", b"an older backup")
    proc = attn("train", "--data", str(data), "--checkpoint", str(earlier), "--force",
                "--notebook", str(SOLUTION_08), env={**os.environ, "ATTN_TRAIN_STEPS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "data: ten.tsv (10 pairs, 11 lines); 9 to train on, 1 held out" in proc.stdout, proc.stdout
    assert "ATTN_TRAIN_STEPS=1: training 1 step only" in proc.stdout and "trained to step 1 (" in proc.stdout
    backup = tmp_path / "c.previous-2.safetensors"  # the older backup is not overwritten either
    assert f"is kept as {backup}" in proc.stdout, proc.stdout
    assert backup.read_bytes() == b"twelve minutes of someone's training"
    assert (tmp_path / "c.previous.safetensors").read_bytes() == b"an older backup"
    assert earlier.read_bytes()[:8] != b"twelve m" and earlier.stat().st_size > 10_000
    assert f"translate with it: attn translate --checkpoint {earlier}" in proc.stdout


@pytest.mark.parametrize("lang, fragments", [
    ("en", ["already holds a trained model", "--resume", "--force (it is kept as c.previous.safetensors)"]),
    ("zh", ["已经存有一个训练好的模型", "--force"]),
])
def test_train_never_overwrites_a_trained_model_unasked(tmp_path, lang, fragments):
    """A trained model at the checkpoint stops `attn train` in one sentence (in the user's language), before any
    data or notebook is loaded, and the model is untouched."""
    model = _write(tmp_path / "c.safetensors", b"trained")
    _one_sentence_refusal(attn("train", "--checkpoint", str(model), "--lang", lang), *fragments)
    assert model.read_bytes() == b"trained"


def test_own_data_trains_into_a_checkpoint_of_its_own():
    """README's `attn train --data my_pairs.tsv` saves beside the course translator, never over it."""
    import argparse

    from utils.translator import checkpoint_path
    from utils.translator.cli import _train_checkpoint

    def where(**given):
        return _train_checkpoint(argparse.Namespace(**{"checkpoint": None, "data": None, **given}))

    assert where() == checkpoint_path()
    assert where(data="some/folder/my_pairs.tsv") == checkpoint_path("my_pairs.safetensors")
    assert where(data="translator.tsv") == checkpoint_path("translator-data.safetensors")
    assert where(data="my_pairs.tsv", checkpoint="mine.safetensors").name == "mine.safetensors"


@pytest.mark.parametrize("value", ["0", "many", "-3"])
def test_train_steps_variable_must_be_a_positive_count(tmp_path, value):
    proc = attn("train", "--notebook", str(SOLUTION_08), "--checkpoint", str(tmp_path / "c"),
                env={**os.environ, "ATTN_TRAIN_STEPS": value})
    _one_sentence_refusal(proc, f"ATTN_TRAIN_STEPS='{value}'", "at least 1")


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """A 2-step translator on 40 short pairs: the vocabulary is what these tests need, not the translations."""
    from utils.translator.corpus import make_corpus, write_pairs

    folder = tmp_path_factory.mktemp("small")
    pairs = make_corpus(40, seed=2, max_words=6)
    write_pairs(folder / "pairs.tsv", pairs)
    path = folder / "small.safetensors"
    proc = attn("train", "--data", str(folder / "pairs.tsv"), "--steps", "2", "--checkpoint", str(path),
                "--notebook", str(SOLUTION_08))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path, pairs


@pytest.mark.parametrize("form", ["file", "folder", "relative folder"])
def test_translate_takes_the_notebook_in_the_forms_check_takes(small_checkpoint, form):
    path, pairs = small_checkpoint
    notebook = {"file": SOLUTION_08 / "08_transformer_translator.ipynb", "folder": SOLUTION_08,
                "relative folder": "solutions/08_transformer_translator"}[form]
    proc = attn("translate", "--checkpoint", str(path), "--notebook", str(notebook), pairs[0].src)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.strip().splitlines()) == 1


def test_translate_notebook_by_id_is_the_learners_copy(small_checkpoint):
    """The id means notebooks/08_... (the blank copy here), as for `attn check`: refused for what it lacks."""
    path, pairs = small_checkpoint
    proc = attn("translate", "--checkpoint", str(path), "--notebook", "08_transformer_translator", pairs[0].src)
    _one_sentence_refusal(proc, "your decoder_mask in 08_transformer_translator.ipynb is not implemented yet")
    _one_sentence_refusal(attn("translate", "--checkpoint", str(path), "--notebook", "no_such_place", "a"),
                          "--notebook no_such_place: not found", "its folder, or the id")


def test_translate_names_unknown_words_and_suggests_known_ones(small_checkpoint):
    from utils.translator import read_checkpoint
    from utils.translator.corpus import Vocab

    path, pairs = small_checkpoint
    known = Vocab(read_checkpoint(path)[1]["src_vocab"])
    first, *rest = pairs[0].src.split()
    unknown = ["zebra", "quickly", "reads", "!"]
    assert not any(w in known for w in unknown)
    sentence = " ".join([first.capitalize(), "zebra", "quickly", "reads", *rest, "!"])  # a known word capitalised
    proc = attn("translate", "--checkpoint", str(path), "--notebook", str(SOLUTION_08), sentence)
    _one_sentence_refusal(proc, "and 1 more", "`attn translate --vocabulary` lists them")
    for word in unknown[:3]:
        assert re.search(rf"'{word}' \((try|did you mean) '", proc.stderr), proc.stderr
    assert f"'{first.capitalize()}'" not in proc.stderr
    named = proc.stderr.split("never seen", 1)[1].split(": it translates", 1)[0]
    offered = [w for w in re.findall(r"'([^']+)'", named) if w not in unknown]
    assert offered and all(w in known for w in offered), named


def test_translate_vocabulary_lists_the_known_words(small_checkpoint):
    from utils.translator import read_checkpoint
    from utils.translator.corpus import Vocab

    path, _ = small_checkpoint
    known = Vocab(read_checkpoint(path)[1]["src_vocab"])
    proc = attn("translate", "--checkpoint", str(path), "--vocabulary")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{len(known) - 4} words:"
    listed = [w for line in lines[1:] for w in line.split(":", 1)[1].split()]
    assert sorted(listed) == sorted(known.itos[4:])


def test_colab_check_grades_the_notebook_the_editor_holds(monkeypatch, capsys):
    """utils.colab.check asks Colab's frontend for the notebook (here a stand-in for google.colab) and grades it."""
    import json
    import sys
    import types

    from utils import colab

    solved = json.loads(nbs.solution_path("01_attention_intuition").read_text())
    message = types.SimpleNamespace(blocking_request=lambda *a, **k: {"ipynb": solved})
    google = types.ModuleType("google")
    google.colab = types.ModuleType("google.colab")
    google.colab._message = message
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", google.colab)
    assert colab.check(exercise="softmax") == 0
    out = capsys.readouterr().out
    assert out.startswith("this notebook: 3 / 3 points"), out
    monkeypatch.delitem(sys.modules, "google.colab")
    import pytest

    with pytest.raises(RuntimeError, match="Colab only"):
        colab.check()
