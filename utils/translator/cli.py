"""`attn train` and `attn translate`: notebook 08's translator, outside the notebook.

Both build the model from the learner's own answers: notebook 08's layers and decoders (read from the notebook
file, answer cells only) and the parts of notebooks 03-05 beside it, with PyTorch's built-ins where those are
missing, exactly as the notebook does. Every problem a user can cause (an unfinished exercise, a missing
checkpoint, a malformed pair file, an unknown word) ends in one sentence on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
from pathlib import Path
from typing import Any

from .. import notebooks as nbs

NOTEBOOK = "08_transformer_translator"
#: The notebook's configuration (section 6 and 8): the commands train the same model.
MODEL_CONFIG = dict(d_model=128, num_heads=4, d_ff=256, num_layers=2, dropout=0.0)
DEFAULT_STEPS = 2800
#: Set ATTN_TRAIN_STEPS=N to make `attn train` stop after N steps whatever --steps says: a quick try of the command,
#: and how the tests run README's training commands (tests/test_readme.py) without training for minutes.
STEPS_ENV = "ATTN_TRAIN_STEPS"
#: A --data file needs at least this many distinct source sentences: one held out per ten, and at least one.
MIN_PAIRS = 10


class UserError(Exception):
    """A problem the user can fix; the message says how."""


def _notebook(given: str | None) -> Path:
    """The notebook-08 file --notebook means, in the forms `attn check` accepts: a .ipynb file, the folder holding
    it, or the id (08_transformer_translator: your copy in notebooks/). Default: your copy in notebooks/."""
    if not given:
        return nbs.release_path(NOTEBOOK)
    try:
        return nbs.find_notebook(given)
    except nbs.CourseError:
        raise UserError(f"--notebook {given}: not found (give your copy of {NOTEBOOK}.ipynb, its folder, or the id "
                        f"{NOTEBOOK})") from None


def learner_parts(notebook: Path, need: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The learner's notebook-08 answers named in `need` (plus the parts from 03-05), and a one-line summary."""
    from . import load_answers, load_parts

    if not notebook.is_file():
        raise UserError(f"{notebook} not found: pass --notebook with your copy of {NOTEBOOK}.ipynb")
    parts = load_parts(notebook.resolve().parent.parent)
    base = {name: part.obj for name, part in parts.parts.items()}
    answers = load_answers(notebook, ["decoder_mask", "EncoderLayer", "DecoderLayer", "greedy_decode",
                                      "beam_search"], namespace=base)
    for name in need:
        found = answers[name]
        if not isinstance(found, BaseException):
            found = _probe(name, found, answers, base)
        if isinstance(found, BaseException):
            first_line = str(found).splitlines()[0][:150] if str(found) else ""
            why = ("is not implemented yet" if isinstance(found, NotImplementedError) else
                   f"could not be loaded ({type(found).__name__}: {first_line})")
            raise UserError(f"your {name} in {notebook.name} {why}: finish that exercise of notebook 08 first "
                            "(or pass --notebook a finished copy)")
    used = ", ".join(f"{name} ({'yours' if part.yours else 'built-in'})" for name, part in parts.parts.items())
    return {**base, **{k: v for k, v in answers.items() if not isinstance(v, BaseException)}}, used


def _probe(name: str, obj: Any, answers: dict[str, Any], base: dict[str, Any]) -> Any:
    """`obj` if a tiny call of it runs, else the exception it raised (an unfinished answer raises NotImplementedError
    only when called)."""
    import torch

    from . import Translator

    try:
        if name in ("EncoderLayer", "DecoderLayer"):
            obj(16, 2, 32, 0.0)
        elif name == "decoder_mask":
            obj(torch.tensor([[1, 5, 2, 0]]), 0)
        else:
            torch.manual_seed(0)
            tiny = Translator(6, 6, d_model=16, num_heads=2, d_ff=16, num_layers=1).eval()
            src = torch.tensor([[1, 4, 2]])
            obj(tiny, src, 2) if name == "greedy_decode" else obj(tiny, src, 2, 2, 1.0)
    except Exception as exc:  # noqa: BLE001 - the learner's code: any failure is reported in one sentence
        return exc
    return obj


def _build(answers: dict[str, Any], src_size: int, tgt_size: int, config: dict[str, Any] | None = None):
    from . import Translator

    cfg = {**MODEL_CONFIG, **(config or {})}
    cfg.pop("src_vocab_size", None)
    cfg.pop("tgt_vocab_size", None)
    return Translator(src_size, tgt_size, **cfg, encoder_layer=answers["EncoderLayer"],
                      decoder_layer=answers["DecoderLayer"], positional=answers["PositionalEncoding"],
                      decoder_mask=answers["decoder_mask"])


def _data(path: str | None):
    from .corpus import COURSE_CORPUS, make_corpus, read_pairs, split_pairs

    if path is None:
        pairs = make_corpus(**COURSE_CORPUS)
        return split_pairs(pairs, seed=0, held_out=300), "the course's corpus (40,000 pairs, seed 0)"
    file = Path(path)
    if not file.is_file():
        raise UserError(f"no file at {file}: give a UTF-8 text file of 'source<TAB>target' lines")
    try:
        pairs = read_pairs(file)
    except UnicodeDecodeError:  # before ValueError, of which it is a subclass
        raise UserError(f"{file} is not UTF-8 text: save it as UTF-8 and try again") from None
    except ValueError as exc:
        raise UserError(f"{exc}; fix or delete that line") from None
    except OSError as exc:
        raise UserError(f"cannot read {file} ({exc.strerror or exc})") from None
    distinct = len({p.src for p in pairs})
    if not pairs:
        raise UserError(f"{file} has no sentence pairs: give one 'source<TAB>target' line per pair, UTF-8")
    if distinct < MIN_PAIRS:
        lines = f" ({len(pairs)} lines)" if len(pairs) != distinct else ""
        raise UserError(f"{file} has {distinct} distinct source sentence{'s' if distinct != 1 else ''}{lines}: "
                        f"training needs at least {MIN_PAIRS} (one in ten is held out to measure BLEU), and a "
                        "useful translator thousands")
    held = max(1, min(300, distinct // 10))
    lines = f", {len(pairs):,} lines" if len(pairs) != distinct else ""
    return split_pairs(pairs, seed=0, held_out=held), f"{file.name} ({distinct:,} pairs{lines})"


def cmd_train(args: argparse.Namespace) -> int:
    steps = args.steps or DEFAULT_STEPS
    eval_every = args.eval_every
    capped = bool(os.environ.get(STEPS_ENV))
    if capped:  # refused before seconds of loading the data and the notebooks
        value = os.environ[STEPS_ENV]
        steps = int(value) if value.strip().isdigit() else 0
        if steps < 1:
            raise UserError(f"{STEPS_ENV}={value!r}: give a whole number of steps, at least 1")

    import torch

    from . import Batches, TrainConfig, Trainer, bleu, checkpoint_path, load_checkpoint, translate
    from .corpus import Vocab

    torch.set_num_threads(1)
    (train_pairs, held_out), described = _data(args.data)
    answers, used = learner_parts(_notebook(args.notebook),
                                  ("decoder_mask", "EncoderLayer", "DecoderLayer", "greedy_decode"))
    src_vocab = Vocab.build(p.src for p in train_pairs)
    tgt_vocab = Vocab.build(p.tgt for p in train_pairs)
    unknown_src = src_vocab.unk_rate(p.src for p in held_out)
    unknown_tgt = tgt_vocab.unk_rate(p.tgt for p in held_out)
    print(f"data: {described}; {len(train_pairs):,} to train on, {len(held_out)} held out; vocabulary "
          f"{len(src_vocab)} / {len(tgt_vocab)}; unknown held-out words {unknown_src:.1%} / {unknown_tgt:.1%}")
    print(f"parts: {used}")
    longest = max(len(s.split()) for p in train_pairs + held_out for s in (p.src, p.tgt)) + 2
    max_len = max(64, longest + 8)
    model = _build(answers, len(src_vocab), len(tgt_vocab), {"max_len": max_len})
    if capped:
        eval_every = min(eval_every, steps)
        print(f"{STEPS_ENV}={steps}: training {steps} step{'s' if steps != 1 else ''} only")
    cfg = TrainConfig(steps=steps, eval_every=eval_every)
    batches = Batches([src_vocab.encode(p.src) for p in train_pairs], [tgt_vocab.encode(p.tgt) for p in train_pairs],
                      cfg.batch_size, cfg.seed)
    greedy = answers["greedy_decode"]

    def evaluate() -> dict[str, float]:
        hyps = translate(model, [p.src for p in held_out], src_vocab, tgt_vocab, greedy)
        return {"bleu": round(bleu(hyps, [p.tgt for p in held_out]), 2)}

    trainer = Trainer(model, batches, cfg, evaluate, vocabs=(src_vocab, tgt_vocab))
    path = Path(args.checkpoint) if args.checkpoint else checkpoint_path()
    if args.resume:
        try:
            meta = load_checkpoint(path, model, trainer)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from None
        except RuntimeError as exc:
            raise UserError(f"{path} does not fit this model ({str(exc).splitlines()[0][:120]}): train without "
                            "--resume") from None
        if meta.get("src_vocab") != src_vocab.to_list() or meta.get("tgt_vocab") != tgt_vocab.to_list():
            raise UserError(f"{path} was trained on other data (its vocabulary differs): train without --resume")
        print(f"resuming from step {trainer.step} of {path}")
    start = time.perf_counter()
    history = trainer.run(checkpoint=path, minutes=args.minutes)
    for row in history:
        print("  ".join(f"{k} {v}" for k, v in row.items()))
    print(f"trained to step {trainer.step} ({trainer.seconds:.0f} s of training, {time.perf_counter() - start:.0f} s "
          f"in all); checkpoint: {path}")
    return 0


def _translate_words(words: list[str], vocab) -> list[str]:
    """Map each word to a known one (the lower-case form when only that is known); unknown words raise one
    sentence that names them and suggests known words in their place."""
    from .corpus import similar_known_words

    known, unknown = [], []
    for word in words:
        if word in vocab:
            known.append(word)
        elif word.lower() in vocab:
            known.append(word.lower())
        elif word not in unknown:
            unknown.append(word)
    if unknown:
        hints = []
        for word in unknown[:3]:
            close = difflib.get_close_matches(word.lower(), vocab.itos[4:], n=2, cutoff=0.8)
            hints.append(f"'{word}' (did you mean {' or '.join(repr(w) for w in close)}?)" if close else
                         f"'{word}' (try {', '.join(repr(w) for w in similar_known_words(word, vocab.itos))})")
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise UserError(f"the model has never seen {', '.join(hints)}{more}: it translates only the "
                        f"{len(vocab) - 4} words of its training data (`attn translate --vocabulary` lists them)")
    return known


def _print_vocabulary(vocab) -> None:
    """The words a checkpoint's model can translate, by class (the course corpus's classes; others last)."""
    from .corpus import english_word_classes

    classes = english_word_classes()
    order = ["noun", "verb", "adjective", "adverb", "other"]
    groups: dict[str, list[str]] = {}
    for word in vocab.itos[4:]:
        groups.setdefault(classes.get(word, "other"), []).append(word)
    print(f"{len(vocab) - 4} words:")
    for kind in order:
        if groups.get(kind):
            print(f"  {kind}s: {' '.join(sorted(groups[kind]))}")


def cmd_translate(args: argparse.Namespace) -> int:
    import torch

    from . import checkpoint_path, read_checkpoint
    from .corpus import Vocab, tokenize

    text = " ".join(args.sentence).strip()
    if not text and not args.vocabulary:
        raise UserError('give a sentence to translate, e.g. attn translate "yesterday the small dog saw the woman"')
    path = Path(args.checkpoint) if args.checkpoint else checkpoint_path()
    try:
        tensors, meta = read_checkpoint(path)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    if "src_vocab" not in meta:
        raise UserError(f"{path} has no vocabulary saved with it: train it with `attn train` or notebook 08")
    src_vocab, tgt_vocab = Vocab(meta["src_vocab"]), Vocab(meta["tgt_vocab"])
    if args.vocabulary:
        _print_vocabulary(src_vocab)
        if not text:
            return 0
    words = _translate_words(tokenize(text), src_vocab)
    torch.set_num_threads(1)
    need = ("decoder_mask", "EncoderLayer", "DecoderLayer") + (("beam_search",) if args.beam else ("greedy_decode",))
    answers, _ = learner_parts(_notebook(args.notebook), need)
    model = _build(answers, len(src_vocab), len(tgt_vocab), meta["config"])
    try:
        model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    except RuntimeError as exc:
        raise UserError(f"{path} does not fit your current layers ({str(exc).splitlines()[0][:150]}): "
                        "retrain with `attn train`") from None
    model.eval()
    src = torch.tensor([src_vocab.encode(" ".join(words))])
    if src.shape[1] > model.max_len - 2:
        raise UserError(f"the sentence has {len(words)} words; this model handles at most {model.max_len - 4}")
    max_len = min(src.shape[1] + 10, model.max_len - 1)
    with torch.no_grad():
        if args.beam:
            tokens, _ = answers["beam_search"](model, src, args.beam, max_len, 1.0)
        else:
            tokens = answers["greedy_decode"](model, src, max_len)[0]
    output = tgt_vocab.decode(tokens.tolist())
    print(output)
    if args.attention:
        _write_attention(model, src, tokens, src_vocab, tgt_vocab, Path(args.attention))
        print(f"cross-attention heatmap: {args.attention}", file=sys.stderr)
    return 0


def _write_attention(model, src, tokens, src_vocab, tgt_vocab, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from ..viz import alignment_heatmaps
    from . import capture_attention

    tokens = tokens.tolist()
    if model.eos_id in tokens:
        tokens = tokens[: tokens.index(model.eos_id) + 1]
    tgt = torch.tensor([[model.bos_id] + tokens])
    with torch.no_grad(), capture_attention(model) as maps:
        model(src, tgt[:, :-1])
    layers = sorted(n for n in maps if n.endswith("cross_attn"))
    if not layers:
        raise UserError("your layers' attention does not return its weights, so there is no heatmap to draw")
    last = maps[layers[-1]][0]  # (h, Lt, Ls)
    src_words = [src_vocab.itos[i] for i in src[0].tolist()]
    tgt_words = [tgt_vocab.itos[i] for i in tokens]
    fig = alignment_heatmaps([last[h] for h in range(last.shape[0])],
                             [f"{layers[-1].split('.')[0]} {layers[-1].split('.')[1]}, head {h}" for h in
                              range(last.shape[0])], src_words, tgt_words, None, cols=min(4, last.shape[0]))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("train", help="train notebook 08's translator (your layers) and save a checkpoint")
    p.add_argument("--data", metavar="PAIRS.tsv", help="your own 'source<TAB>target' file (default: the course corpus)")
    p.add_argument("--steps", type=int, help=f"training steps (default {DEFAULT_STEPS}, the notebook's)")
    p.add_argument("--minutes", type=float, help="stop after this many minutes (a checkpoint is saved)")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint")
    p.add_argument("--checkpoint", metavar="FILE", help="where to save (default checkpoints/translator.safetensors)")
    p.add_argument("--notebook", metavar="NB", help=f"your notebook 08: the .ipynb, its folder or the id (default "
                   f"notebooks/{NOTEBOOK}/{NOTEBOOK}.ipynb)")
    p.add_argument("--eval-every", type=int, default=400, help="steps between BLEU evaluations (default 400)")
    p.epilog = (f"{STEPS_ENV}=N in the environment trains N steps only, whatever --steps says (a quick try; the "
                "tests use it)")
    p.set_defaults(func=_guarded(cmd_train))

    p = sub.add_parser("translate", help="translate a sentence with the trained translator")
    p.add_argument("sentence", nargs="*", help="the English sentence")
    p.add_argument("--beam", type=int, metavar="K", help="beam search with K hypotheses (default: greedy)")
    p.add_argument("--attention", metavar="PNG", help="also write the last layer's cross-attention heatmap here")
    p.add_argument("--vocabulary", action="store_true", help="list the words the model knows (it translates no others)")
    p.add_argument("--checkpoint", metavar="FILE", help="the checkpoint (default checkpoints/translator.safetensors)")
    p.add_argument("--notebook", metavar="NB", help=f"your notebook 08: the .ipynb, its folder or the id (default "
                   f"notebooks/{NOTEBOOK}/{NOTEBOOK}.ipynb)")
    p.set_defaults(func=_guarded(cmd_translate))


def _guarded(fn):
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "steps", None) is not None and args.steps < 1:
            print(f"attn {args.command}: --steps must be at least 1", file=sys.stderr)
            return 2
        if getattr(args, "beam", None) is not None and args.beam < 1:
            print(f"attn {args.command}: --beam must be at least 1", file=sys.stderr)
            return 2
        try:
            return fn(args)
        except UserError as exc:
            print(f"attn {args.command}: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"attn {args.command}: interrupted", file=sys.stderr)
            return 130
    return run
