"""`attn train` and `attn translate`: notebook 08's translator, outside the notebook.

Both build the model from the learner's own answers: notebook 08's layers and decoders (read from the notebook
file, answer cells only) and the parts of notebooks 03-05 beside it, with PyTorch's built-ins where those are
missing, exactly as the notebook does. Every problem a user can cause (an unfinished exercise, a missing
checkpoint, a malformed pair file, an unknown word) ends in one sentence on stderr and exit status 2, in the user's
language (`--lang`, else $ATTN_LANG). Training never overwrites a trained model without `--force`, and then keeps
it as a backup: your own data trains into a checkpoint named after it.
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
from ..speech import _, language, set_language

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
    it, or the id (08_transformer_translator: your copy in notebooks/). Default: your copy in notebooks/ (in
    notebooks/zh/ when the command speaks Chinese)."""
    if not given:
        return nbs.release_path(NOTEBOOK, nbs.NOTEBOOKS if language() == "en" else nbs.NOTEBOOKS / language())
    try:
        return nbs.find_notebook(given)
    except nbs.CourseError:
        raise UserError(_("--notebook {given}: not found (give your copy of {notebook}.ipynb, its folder, or the id "
                          "{notebook})").format(given=given, notebook=NOTEBOOK)) from None


def _existing(notebook: Path) -> Path:
    if not notebook.is_file():
        raise UserError(_("{path} not found: pass --notebook with your copy of {notebook}.ipynb").format(
            path=notebook, notebook=NOTEBOOK))
    return notebook


def learner_parts(notebook: Path, need: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    """The learner's notebook-08 answers named in `need` (plus the parts from 03-05), and a one-line summary."""
    from . import load_answers, load_parts

    _existing(notebook)
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
            if isinstance(found, NotImplementedError):
                why = _("your {name} in {file} is not implemented yet").format(name=name, file=notebook.name)
            else:
                why = _("your {name} in {file} could not be loaded ({error})").format(
                    name=name, file=notebook.name, error=f"{type(found).__name__}: {first_line}")
            raise UserError(_("{why}: finish that exercise of notebook 08 first (or pass --notebook a finished "
                              "copy)").format(why=why))
    used = ", ".join(_("{name} (yours)").format(name=name) if part.yours else _("{name} (built-in)").format(name=name)
                     for name, part in parts.parts.items())
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
        return split_pairs(pairs, seed=0, held_out=300), _("the course's corpus (40,000 pairs, seed 0)")
    file = Path(path)
    if not file.is_file():
        raise UserError(_("no file at {file}: give a UTF-8 text file of 'source<TAB>target' lines").format(file=file))
    try:
        pairs = read_pairs(file)
    except UnicodeDecodeError:  # before ValueError, of which it is a subclass
        raise UserError(_("{file} is not UTF-8 text: save it as UTF-8 and try again").format(file=file)) from None
    except ValueError as exc:
        raise UserError(_("{problem}; fix or delete that line").format(problem=exc)) from None
    except OSError as exc:
        raise UserError(_("cannot read {file} ({error})").format(file=file, error=exc.strerror or exc)) from None
    distinct = len({p.src for p in pairs})
    if not pairs:
        raise UserError(_("{file} has no sentence pairs: give one 'source<TAB>target' line per pair, "
                          "UTF-8").format(file=file))
    if distinct < MIN_PAIRS:
        lines = _(" ({n} lines)").format(n=len(pairs)) if len(pairs) != distinct else ""
        has = (_("{file} has 1 distinct source sentence{lines}") if distinct == 1 else
               _("{file} has {n} distinct source sentences{lines}")).format(file=file, n=distinct, lines=lines)
        raise UserError(_("{has}: training needs at least {least} (one in ten is held out to measure BLEU), and a "
                          "useful translator thousands").format(has=has, least=MIN_PAIRS))
    held = max(1, min(300, distinct // 10))
    if len(pairs) != distinct:
        described = _("{file} ({n} pairs, {lines} lines)").format(file=file.name, n=f"{distinct:,}",
                                                                  lines=f"{len(pairs):,}")
    else:
        described = _("{file} ({n} pairs)").format(file=file.name, n=f"{distinct:,}")
    return split_pairs(pairs, seed=0, held_out=held), described


def _train_checkpoint(args: argparse.Namespace) -> Path:
    """Where `attn train` saves: --checkpoint; else, with --data, a checkpoint named after the data file
    (checkpoints/my_pairs.safetensors), so that your own data never lands on the course's translator; else
    checkpoints/translator.safetensors."""
    if args.checkpoint:
        return Path(args.checkpoint)
    from . import checkpoint_path

    if args.data:
        stem = Path(args.data).stem or "pairs"
        default = checkpoint_path()
        name = f"{stem}.safetensors"
        return checkpoint_path(name if name != default.name else f"{stem}-data.safetensors")
    return checkpoint_path()


def _backup(path: Path) -> Path:
    """The first free name beside `path` for the model it holds: translator.previous.safetensors, then
    translator.previous-2.safetensors, ... (a backup is never overwritten either)."""
    n = 1
    while True:
        candidate = path.with_name(f"{path.stem}.previous{'' if n == 1 else f'-{n}'}{path.suffix}")
        if not candidate.exists():
            return candidate
        n += 1


def _guard_checkpoint(path: Path, args: argparse.Namespace) -> Path | None:
    """Refuse to train over a trained model unless --resume (train it on) or --force (replace it, after a backup):
    hours of someone's training must not vanish because a command's default pointed at them. Returns the backup
    the model will be moved to, if any."""
    if not path.exists() or args.resume:
        return None
    if not args.force:
        raise UserError(_("{path} already holds a trained model: to train it further add --resume; to replace it add "
                          "--force (it is kept as {backup}); or save elsewhere with --checkpoint FILE").format(
                              path=path, backup=_backup(path).name))
    return _backup(path)


def cmd_train(args: argparse.Namespace) -> int:
    steps = args.steps or DEFAULT_STEPS
    eval_every = args.eval_every
    capped = bool(os.environ.get(STEPS_ENV))
    if capped:  # refused before seconds of loading the data and the notebooks
        value = os.environ[STEPS_ENV]
        steps = int(value) if value.strip().isdigit() else 0
        if steps < 1:
            raise UserError(_("{setting}: give a whole number of steps, at least 1").format(
                setting=f"{STEPS_ENV}={value!r}"))
    path = _train_checkpoint(args)
    backup = _guard_checkpoint(path, args)  # before seconds of loading the data and the notebooks
    # A bad data file or a missing notebook is refused before PyTorch is imported (a second and a half).
    (train_pairs, held_out), described = _data(args.data)
    notebook = _existing(_notebook(args.notebook))

    import torch

    from . import Batches, TrainConfig, Trainer, bleu, load_checkpoint, translate
    from .corpus import Vocab

    torch.set_num_threads(1)
    answers, used = learner_parts(notebook, ("decoder_mask", "EncoderLayer", "DecoderLayer", "greedy_decode"))
    src_vocab = Vocab.build(p.src for p in train_pairs)
    tgt_vocab = Vocab.build(p.tgt for p in train_pairs)
    unknown_src = src_vocab.unk_rate(p.src for p in held_out)
    unknown_tgt = tgt_vocab.unk_rate(p.tgt for p in held_out)
    print(_("data: {described}; {train} to train on, {held} held out; vocabulary {src} / {tgt}; unknown held-out "
            "words {unknown_src} / {unknown_tgt}").format(
                described=described, train=f"{len(train_pairs):,}", held=len(held_out), src=len(src_vocab),
                tgt=len(tgt_vocab), unknown_src=f"{unknown_src:.1%}", unknown_tgt=f"{unknown_tgt:.1%}"))
    print(_("parts: {used}").format(used=used))
    longest = max(len(s.split()) for p in train_pairs + held_out for s in (p.src, p.tgt)) + 2
    max_len = max(64, longest + 8)
    model = _build(answers, len(src_vocab), len(tgt_vocab), {"max_len": max_len})
    if capped:
        eval_every = min(eval_every, steps)
        print((_("{setting}: training 1 step only") if steps == 1 else
               _("{setting}: training {n} steps only")).format(setting=f"{STEPS_ENV}={steps}", n=steps))
    cfg = TrainConfig(steps=steps, eval_every=eval_every)
    batches = Batches([src_vocab.encode(p.src) for p in train_pairs], [tgt_vocab.encode(p.tgt) for p in train_pairs],
                      cfg.batch_size, cfg.seed)
    greedy = answers["greedy_decode"]

    def evaluate() -> dict[str, float]:
        hyps = translate(model, [p.src for p in held_out], src_vocab, tgt_vocab, greedy)
        return {"bleu": round(bleu(hyps, [p.tgt for p in held_out]), 2)}

    trainer = Trainer(model, batches, cfg, evaluate, vocabs=(src_vocab, tgt_vocab))
    if args.resume:
        try:
            meta = load_checkpoint(path, model, trainer)
        except (FileNotFoundError, ValueError) as exc:
            raise UserError(str(exc)) from None
        except RuntimeError as exc:
            raise UserError(_("{path} does not fit this model ({error}): train without --resume").format(
                path=path, error=str(exc).splitlines()[0][:120])) from None
        if meta.get("src_vocab") != src_vocab.to_list() or meta.get("tgt_vocab") != tgt_vocab.to_list():
            raise UserError(_("{path} was trained on other data (its vocabulary differs): train without "
                              "--resume").format(path=path))
        print(_("resuming from step {step} of {path}").format(step=trainer.step, path=path))
    if backup is not None:
        path.replace(backup)
        print(_("the model that was in {path} is kept as {backup}").format(path=path, backup=backup))
    start = time.perf_counter()
    history = trainer.run(checkpoint=path, minutes=args.minutes)
    for row in history:
        print("  ".join(f"{k} {v}" for k, v in row.items()))
    print(_("trained to step {step} ({training} s of training, {total} s in all); checkpoint: {path}").format(
        step=trainer.step, training=f"{trainer.seconds:.0f}", total=f"{time.perf_counter() - start:.0f}", path=path))
    from . import checkpoint_path

    if path.resolve() != checkpoint_path().resolve():
        print(_("translate with it: attn translate --checkpoint {path} \"...\"").format(path=path))
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
            hints.append(_("'{word}' (did you mean {close}?)").format(
                word=word, close=_(" or ").join(repr(w) for w in close)) if close else
                _("'{word}' (try {known})").format(
                    word=word, known=", ".join(repr(w) for w in similar_known_words(word, vocab.itos))))
        more = _(" and {n} more").format(n=len(unknown) - 3) if len(unknown) > 3 else ""
        raise UserError(_("the model has never seen {words}{more}: it translates only the {n} words of its training "
                          "data (`attn translate --vocabulary` lists them)").format(
                              words=", ".join(hints), more=more, n=len(vocab) - 4))
    return known


def _print_vocabulary(vocab) -> None:
    """The words a checkpoint's model can translate, by class (the course corpus's classes; others last)."""
    from .corpus import english_word_classes

    classes = english_word_classes()
    order = ["noun", "verb", "adjective", "adverb", "other"]
    groups: dict[str, list[str]] = {}
    for word in vocab.itos[4:]:
        groups.setdefault(classes.get(word, "other"), []).append(word)
    names = {"noun": _("nouns"), "verb": _("verbs"), "adjective": _("adjectives"), "adverb": _("adverbs"),
             "other": _("others")}
    print(_("{n} words:").format(n=len(vocab) - 4))
    for kind in order:
        if groups.get(kind):
            print(f"  {names[kind]}: {' '.join(sorted(groups[kind]))}")


def cmd_translate(args: argparse.Namespace) -> int:
    text = " ".join(args.sentence).strip()
    if not text and not args.vocabulary:  # said before PyTorch is imported
        raise UserError(_('give a sentence to translate, e.g. attn translate "yesterday the small dog saw the '
                          'woman"'))

    import torch

    from . import checkpoint_path, read_checkpoint
    from .corpus import Vocab, tokenize

    path = Path(args.checkpoint) if args.checkpoint else checkpoint_path()
    try:
        tensors, meta = read_checkpoint(path)
    except (FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    if "src_vocab" not in meta:
        raise UserError(_("{path} has no vocabulary saved with it: train it with `attn train` or notebook "
                          "08").format(path=path))
    src_vocab, tgt_vocab = Vocab(meta["src_vocab"]), Vocab(meta["tgt_vocab"])
    if args.vocabulary:
        _print_vocabulary(src_vocab)
        if not text:
            return 0
    words = _translate_words(tokenize(text), src_vocab)
    torch.set_num_threads(1)
    need = ("decoder_mask", "EncoderLayer", "DecoderLayer") + (("beam_search",) if args.beam else ("greedy_decode",))
    answers, _used = learner_parts(_notebook(args.notebook), need)
    model = _build(answers, len(src_vocab), len(tgt_vocab), meta["config"])
    try:
        model.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    except RuntimeError as exc:
        raise UserError(_("{path} does not fit your current layers ({error}): retrain with `attn train`").format(
            path=path, error=str(exc).splitlines()[0][:150])) from None
    model.eval()
    src = torch.tensor([src_vocab.encode(" ".join(words))])
    if src.shape[1] > model.max_len - 2:
        raise UserError(_("the sentence has {n} words; this model handles at most {most}").format(
            n=len(words), most=model.max_len - 4))
    max_len = min(src.shape[1] + 10, model.max_len - 1)
    with torch.no_grad():
        if args.beam:
            tokens, _score = answers["beam_search"](model, src, args.beam, max_len, 1.0)
        else:
            tokens = answers["greedy_decode"](model, src, max_len)[0]
    output = tgt_vocab.decode(tokens.tolist())
    print(output)
    if args.attention:
        _write_attention(model, src, tokens, src_vocab, tgt_vocab, Path(args.attention))
        print(_("cross-attention heatmap: {path}").format(path=args.attention), file=sys.stderr)
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
        raise UserError(_("your layers' attention does not return its weights, so there is no heatmap to draw"))
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
    p.add_argument("--checkpoint", metavar="FILE", help="where to save (default checkpoints/translator.safetensors; "
                   "with --data, checkpoints/<data file's name>.safetensors)")
    p.add_argument("--force", action="store_true", help="replace a trained model at the checkpoint (it is kept as "
                   "<name>.previous.safetensors)")
    p.add_argument("--notebook", metavar="NB", help=f"your notebook 08: the .ipynb, its folder or the id (default "
                   f"notebooks/{NOTEBOOK}/{NOTEBOOK}.ipynb)")
    p.add_argument("--eval-every", type=int, default=400, help="steps between BLEU evaluations (default 400)")
    p.epilog = (f"{STEPS_ENV}=N in the environment trains N steps only, whatever --steps says (a quick try; the "
                "tests use it)")
    _lang_option(p)
    p.set_defaults(func=_guarded(cmd_train))

    p = sub.add_parser("translate", help="translate a sentence with the trained translator")
    p.add_argument("sentence", nargs="*", help="the English sentence")
    p.add_argument("--beam", type=int, metavar="K", help="beam search with K hypotheses (default: greedy)")
    p.add_argument("--attention", metavar="PNG", help="also write the last layer's cross-attention heatmap here")
    p.add_argument("--vocabulary", action="store_true", help="list the words the model knows (it translates no others)")
    p.add_argument("--checkpoint", metavar="FILE", help="the checkpoint (default checkpoints/translator.safetensors)")
    p.add_argument("--notebook", metavar="NB", help=f"your notebook 08: the .ipynb, its folder or the id (default "
                   f"notebooks/{NOTEBOOK}/{NOTEBOOK}.ipynb)")
    _lang_option(p)
    p.set_defaults(func=_guarded(cmd_translate))


def _lang_option(p: Any) -> None:
    p.add_argument("--lang", choices=["en", "zh"], help="the language of its messages, and of the notebook it "
                   "uses by default (notebooks/zh/ for zh; default: $ATTN_LANG, else en)")


def _guarded(fn):
    def run(args: argparse.Namespace) -> int:
        if getattr(args, "lang", None):
            set_language(args.lang)
        if getattr(args, "steps", None) is not None and args.steps < 1:
            print(f"attn {args.command}: " + _("{option} must be at least 1").format(option="--steps"), file=sys.stderr)
            return 2
        if getattr(args, "beam", None) is not None and args.beam < 1:
            print(f"attn {args.command}: " + _("{option} must be at least 1").format(option="--beam"), file=sys.stderr)
            return 2
        try:
            return fn(args)
        except UserError as exc:
            print(f"attn {args.command}: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print(f"attn {args.command}: " + _("interrupted"), file=sys.stderr)
            return 130
    return run
