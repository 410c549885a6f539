"""Notebook 08's plumbing (utils.translator) and the `attn train` / `attn translate` commands."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sacrebleu
import torch
from safetensors.torch import save_file

from utils import notebooks as nbs
from utils.translator import (
    Batches,
    BufferKVCache,
    BuiltinMultiHeadAttention,
    LayerCache,
    LearnedPositions,
    TrainConfig,
    Trainer,
    Translator,
    _check_kv_cache,
    _check_mha,
    _check_positional,
    alignment_accuracy,
    bleu,
    builtin_causal_mask,
    builtin_decoder_mask,
    load_checkpoint,
    load_parts,
    read_checkpoint,
    save_checkpoint,
)
from utils.translator.corpus import Pair, Vocab, make_corpus, write_pairs

SOLUTION_08 = nbs.solution_path("08_transformer_translator")
BLANK_08 = nbs.release_path("08_transformer_translator")


# -- the learner's parts ---------------------------------------------------------------------------------------
def test_parts_come_from_the_learners_notebooks_when_they_pass_their_checks():
    parts = load_parts(nbs.SOLUTIONS)
    assert [(n, who) for n, who, _ in parts.table()] == [
        ("causal_mask", "yours"), ("MultiHeadAttention", "yours"), ("PositionalEncoding", "yours"), ("KVCache", "yours")]
    assert not parts.MultiHeadAttention.__module__.startswith("utils.translator")


def test_unfinished_or_missing_parts_fall_back_to_builtins_and_say_why(tmp_path):
    blank = load_parts(nbs.NOTEBOOKS)  # the released copies: every answer raises NotImplementedError
    assert all(who == "built-in" and "not implemented yet" in note for _, who, note in blank.table()), blank.table()
    missing = load_parts(tmp_path)
    assert all("notebook not found" in note for _, _, note in missing.table())
    assert missing.MultiHeadAttention is BuiltinMultiHeadAttention and missing.PositionalEncoding is LearnedPositions
    assert missing.KVCache is BufferKVCache
    assert "<table>" in missing._repr_html_()


def test_a_part_that_fails_its_check_is_replaced(tmp_path):
    nb = nbs.read(nbs.solution_path("03_masking"))
    for cell in nb.cells:
        if nbs.nbgrader_meta(cell).get("grade_id") == "causal_mask":
            cell.source = cell.source.replace(".tril()", ".triu()")
    nbs.write(nb, tmp_path / "03_masking" / "03_masking.ipynb")
    parts = load_parts(tmp_path)
    (name, who, note), *_ = parts.table()
    assert name == "causal_mask" and who == "built-in" and "lower triangle" in note


def test_builtin_stand_ins_keep_the_course_interfaces():
    _check_mha(BuiltinMultiHeadAttention)
    assert torch.equal(builtin_causal_mask(4), torch.ones(4, 4, dtype=torch.bool).tril())
    pe = LearnedPositions(8, 10, 0.0).eval()
    x = torch.randn(2, 5, 8)
    torch.testing.assert_close(pe(x) - pe(torch.zeros(1, 5, 8)), x)
    with pytest.raises(ValueError, match="max_len"):
        pe(torch.zeros(1, 11, 8))
    with pytest.raises(AssertionError):
        _check_positional(LearnedPositions)  # not a sinusoid: a learner's PositionalEncoding must be one
    _check_kv_cache(BufferKVCache)
    cache = BufferKVCache()
    for _ in range(40):  # past the first buffer (16 positions): it grows and keeps what it held
        k, v = cache.update(torch.full((1, 2, 1, 3), float(len(cache))), torch.zeros(1, 2, 1, 3))
    assert len(cache) == 40 and torch.equal(k[0, 0, :, 0], torch.arange(40.0))


def test_builtin_decoder_mask_is_causal_and_padding():
    tgt = torch.tensor([[1, 5, 6, 2, 0], [1, 5, 0, 0, 0]])
    want = torch.ones(5, 5, dtype=torch.bool).tril()[None, None] & (tgt != 0)[:, None, None, :]
    assert torch.equal(builtin_decoder_mask(tgt, 0), want)


# -- the model ------------------------------------------------------------------------------------------------
def _model(**kw):
    torch.manual_seed(0)
    return Translator(9, 11, d_model=16, num_heads=2, d_ff=24, num_layers=2, max_len=20, **kw).eval()


def test_cached_decoding_gives_the_logits_of_the_full_pass():
    model = _model()
    src = torch.tensor([[1, 4, 5, 6, 2], [1, 7, 2, 0, 0]])
    tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 4, 4, 5, 6]])
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        full = model.decode(tgt, memory, src_mask)
        cache = model.new_cache()
        steps = torch.cat([model.decode(tgt[:, t:t + 1], memory, src_mask, cache) for t in range(5)], dim=1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-4)
    assert len(cache[0]) == 5 and isinstance(cache[0], LayerCache)
    # the cache holds projected keys and values (B, h, t, d_k), and the source's once: (B, h, Ls, d_k)
    assert tuple(cache[0].self_attn.update(torch.zeros(2, 2, 0, 8), torch.zeros(2, 2, 0, 8))[0].shape) == (2, 2, 5, 8)
    assert tuple(cache[0].memory[0].shape) == (2, 2, 5, 8)
    with pytest.raises(ValueError, match="new_cache"):
        model.decode(tgt[:, :1], memory, src_mask, cache[:1])
    with pytest.raises(ValueError, match="max_len"):
        model.encode(torch.ones(1, 21, dtype=torch.long))


def test_batches_visit_every_pair_once_per_pass_and_resume_exactly():
    src = [[1, 4 + i % 5, 2] + [3] * (i % 7) for i in range(200)]
    tgt = [[1, 5, 2] + [4] * (i % 3) for i in range(200)]
    batches = Batches(src, tgt, batch_size=16, seed=3, bucket=4)
    seen = []
    for _ in range(13):  # ceil(200 / 16) batches make one pass
        s, _ = next(batches)
        seen += [tuple(row[row != 0].tolist()) for row in s]
    assert sorted(seen) == sorted(tuple(x) for x in src)
    state = batches.state()
    ahead = [next(batches)[0] for _ in range(5)]
    again = Batches(src, tgt, batch_size=16, seed=99, bucket=4)
    again.load_state(state)
    assert all(torch.equal(a, next(again)[0]) for a in ahead)


def test_training_resumes_exactly_from_a_checkpoint(tmp_path):
    pairs = make_corpus(300, seed=1, max_words=6)
    sv, tv = Vocab.build(p.src for p in pairs), Vocab.build(p.tgt for p in pairs)
    enc = [sv.encode(p.src) for p in pairs], [tv.encode(p.tgt) for p in pairs]
    cfg = TrainConfig(steps=8, batch_size=8, warmup=3, eval_every=100)

    def trainer():
        torch.manual_seed(0)
        model = Translator(len(sv), len(tv), d_model=16, num_heads=2, d_ff=16, num_layers=1)
        return Trainer(model, Batches(*enc, batch_size=8, seed=0), cfg, vocabs=(sv, tv))

    straight = trainer()
    straight.run(progress=False)
    first = trainer()
    first.run(until=4, progress=False, checkpoint=tmp_path / "ck.safetensors")
    resumed = trainer()
    meta = load_checkpoint(tmp_path / "ck.safetensors", resumed.model, resumed)
    assert resumed.step == 4 and meta["src_vocab"] == sv.to_list()
    resumed.run(progress=False)
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), f"{name} differs after resuming"


def test_checkpoint_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="train one first"):
        read_checkpoint(tmp_path / "none.safetensors")
    save_file({"x": torch.zeros(1)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not a translator checkpoint"):
        read_checkpoint(tmp_path / "other.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        read_checkpoint(tmp_path / "junk.safetensors")
    model = _model()
    save_checkpoint(tmp_path / "ok.safetensors", model)
    tensors, meta = read_checkpoint(tmp_path / "ok.safetensors")
    assert meta["config"]["d_model"] == 16 and not any(k.startswith("adam.") for k in tensors)


def test_bleu_is_sacrebleus_corpus_bleu_on_tokenized_text():
    hyps, refs = ["der Hund schläft .", "die Frau liest das Buch"], ["der Hund schläft .", "die Frau liest ein Buch"]
    assert bleu(refs, refs) == pytest.approx(100.0)
    want = sacrebleu.corpus_bleu(hyps, [refs], tokenize="none", force=True).score
    assert bleu(hyps, refs) == pytest.approx(want) and 0 < want < 100
    with pytest.raises(ValueError, match="references"):
        bleu(hyps, refs[:1])


def test_alignment_accuracy_counts_the_most_attended_gold_word_per_head():
    pair = Pair("a b c", "x y z", (2, None, 0))
    weights = torch.zeros(1, 2, 3, 5)  # (B, h, Lt, Ls with <bos> ... <eos>)
    weights[0, 0, 0, 3] = weights[0, 0, 2, 1] = 1.0  # head 0: both gold words (source 2 and 0, keys 3 and 1)
    weights[0, 1, :, 1] = 1.0  # head 1: always the first word: right once
    assert alignment_accuracy(weights, [pair]).tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="no gold alignment"):
        alignment_accuracy(weights, [Pair("a b c", "x y z", None)])


# -- the commands -------------------------------------------------------------------------------------------
def attn(*args):
    return subprocess.run([sys.executable, "-m", "utils.cli", *args], capture_output=True, text=True, cwd=nbs.ROOT,
                          timeout=300)


def _refused(proc, fragment):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and fragment in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("translator") / "ck.safetensors"
    proc = attn("train", "--steps", "6", "--eval-every", "3", "--checkpoint", str(path), "--notebook", str(SOLUTION_08))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "step 6" in proc.stdout and "bleu" in proc.stdout and path.is_file()
    return path


def test_train_then_translate_with_an_attention_heatmap(trained, tmp_path):
    png = tmp_path / "cross.png"
    proc = attn("translate", "--checkpoint", str(trained), "--notebook", str(SOLUTION_08), "--attention", str(png),
                "Yesterday the small dog saw the woman")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().split()) >= 1 and png.read_bytes()[:4] == b"\x89PNG"
    beam = attn("translate", "--checkpoint", str(trained), "--notebook", str(SOLUTION_08), "--beam", "3",
                "the dog sleeps")
    assert beam.returncode == 0, beam.stderr


def test_train_resumes_from_its_checkpoint(trained, tmp_path):
    copy = tmp_path / "ck.safetensors"
    copy.write_bytes(trained.read_bytes())
    proc = attn("train", "--steps", "8", "--eval-every", "4", "--resume", "--checkpoint", str(copy),
                "--notebook", str(SOLUTION_08))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "resuming from step 6" in proc.stdout and "step 8" in proc.stdout


@pytest.mark.parametrize("args, fragment", [
    (["the cat sleepz"], "never seen 'sleepz' (did you mean"),
    ([""], "give a sentence to translate"),
    (["--beam", "0", "the dog"], "--beam must be at least 1"),
])
def test_translate_refuses_bad_input_in_one_sentence(trained, args, fragment):
    _refused(attn("translate", "--checkpoint", str(trained), "--notebook", str(SOLUTION_08), *args), fragment)


def test_commands_refuse_missing_files_and_unfinished_exercises(tmp_path, trained):
    _refused(attn("translate", "--checkpoint", str(tmp_path / "none.safetensors"), "the dog"), "attn train")
    _refused(attn("translate", "--checkpoint", str(trained), "--notebook", str(BLANK_08), "the dog"),
             "your decoder_mask in 08_transformer_translator.ipynb is not implemented yet")
    # A checkpoint of their own: the course folder's may hold a trained model, which `attn train` refuses to replace
    # before it reads any notebook.
    fresh = ("--checkpoint", str(tmp_path / "fresh.safetensors"))
    _refused(attn("train", "--notebook", str(BLANK_08), "--steps", "1", *fresh), "not implemented yet")
    _refused(attn("train", "--notebook", str(tmp_path / "none.ipynb"), *fresh), "not found")


def test_train_on_your_own_pairs_file_and_refuse_a_malformed_one(tmp_path):
    good = tmp_path / "pairs.tsv"
    write_pairs(good, make_corpus(60, seed=2, max_words=6))
    path = tmp_path / "own.safetensors"
    proc = attn("train", "--data", str(good), "--steps", "2", "--checkpoint", str(path), "--notebook", str(SOLUTION_08))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pairs.tsv (60 pairs)" in proc.stdout and path.is_file()
    bad = tmp_path / "bad.tsv"
    bad.write_text("the dog\tder Hund\nthe cat\tdie Katze\njust one column\n", encoding="utf-8")
    _refused(attn("train", "--data", str(bad), "--notebook", str(SOLUTION_08)), "line 3")
    _refused(attn("train", "--data", str(tmp_path / "none.tsv"), "--notebook", str(SOLUTION_08)), "no file at")
