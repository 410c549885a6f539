"""The translator's code: `utils.translator` (see its docstring) loads it on first use."""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..speech import N_, _
from .corpus import Pair, Vocab

__all__ = [
    "Part", "Parts", "load_parts", "load_answers", "BuiltinMultiHeadAttention", "LearnedPositions",
    "BuiltinEncoderLayer", "BuiltinDecoderLayer", "BufferKVCache", "LayerCache", "project_kv", "attend", "Translator", "pad_batch", "Batches",
    "TrainConfig", "Trainer", "bleu", "translate", "capture_attention", "alignment_accuracy",
    "save_checkpoint", "load_checkpoint", "torch_layer_like", "checkpoint_path",
]


# ----------------------------------------------------------------------------------------------------------------
# The learner's parts from earlier notebooks

#: The parts notebook 08 builds on: name -> (notebook, what the built-in stand-in is).
PART_SOURCES = {
    "causal_mask": ("03_masking", "torch.nn.Transformer.generate_square_subsequent_mask"),
    "MultiHeadAttention": ("04_multi_head_attention", "F.multi_head_attention_forward (nn.MultiheadAttention's core)"),
    "PositionalEncoding": ("05_positional_encoding", N_("learned positions (nn.Embedding), as in BERT and GPT-2")),
    "KVCache": ("06_grouped_query_attention", N_("a preallocated buffer that doubles when full (BufferKVCache)")),
}
#: How load_parts checks each part (PyTorch has no sinusoidal table and no KV cache to compare with).
CHECKED_HOW = {
    "causal_mask": N_("your answer from {notebook}, checked against the lower triangle"),
    "MultiHeadAttention": N_("your answer from {notebook}, checked against PyTorch's nn.MultiheadAttention"),
    "PositionalEncoding": N_("your answer from {notebook}, checked against the sinusoid it should add"),
    "KVCache": N_("your answer from {notebook}, checked by appending 2 and then 1 positions"),
}


@dataclass
class Part:
    """One building block, and where it came from."""

    name: str
    obj: Any
    yours: bool
    note: str


@dataclass
class Parts:
    """The building blocks notebook 08 uses, with a table of where each came from (shown in Jupyter)."""

    parts: dict[str, Part] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        parts = self.__dict__.get("parts", {})
        if name in parts:
            return parts[name].obj
        raise AttributeError(name)

    def __getitem__(self, name: str) -> Any:
        return self.parts[name].obj

    def table(self) -> list[tuple[str, str, str]]:
        return [(p.name, "yours" if p.yours else "built-in", p.note) for p in self.parts.values()]

    def __repr__(self) -> str:
        width = max((len(n) for n in self.parts), default=4)
        return "\n".join(f"{n:<{width}}  {who:<8}  {note}" for n, who, note in self.table())

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td style='text-align:left'><code>{html.escape(n)}</code></td><td style='text-align:left'>"
            f"{_('✓ yours') if who == 'yours' else _('built-in')}</td><td style='text-align:left'>"
            f"{html.escape(note)}</td></tr>" for n, who, note in self.table())
        return (f"<table><thead><tr><th style='text-align:left'>{_('part')}</th><th style='text-align:left'>"
                f"{_('from')}</th><th style='text-align:left'>{_('why')}</th></tr></thead><tbody>{rows}</tbody>"
                "</table>")


def _cell_source(cell: Any) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def load_answers(path: str | Path, names: Sequence[str], namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a notebook's first code cell (its imports) and the answer cells named `names`; return what they define.

    Each name maps to the object the learner's cell defined, or to the exception explaining why there is none
    (a missing file or cell, a syntax error, an error while defining it). Only the first code cell and the answer
    cells run, never the notebook's demos. `namespace` seeds the names the cells may use (e.g. earlier parts).
    """
    import nbformat

    path = Path(path)
    if not path.is_file():
        return {n: FileNotFoundError(f"{path} not found") for n in names}
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - a damaged file is reported as such, per part
        return {n: ValueError(f"{path.name} is not a readable notebook ({exc})") for n in names}
    code = [c for c in nb.cells if c.get("cell_type") == "code"]
    answers = {}
    for cell in code:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id") in names:
            answers.setdefault(meta["grade_id"], _cell_source(cell))
    ns: dict[str, Any] = {"__name__": f"learner_{path.stem}"}
    ns.update(namespace or {})
    found: dict[str, Any] = {}
    with _quiet():
        try:
            if code:
                exec(compile(_cell_source(code[0]), f"{path.name}: setup cell", "exec"), ns)  # noqa: S102
        except Exception as exc:  # noqa: BLE001
            return {n: exc for n in names}
        for name in names:  # in the course's order: later answers may use earlier ones
            if name not in answers:
                found[name] = LookupError(f"no answer cell called {name!r} in {path.name}")
                continue
            try:
                exec(compile(answers[name], f"{path.name}: {name}", "exec"), ns)  # noqa: S102
                found[name] = ns[name] if name in ns else LookupError(f"the {name} cell no longer defines {name}")
            except Exception as exc:  # noqa: BLE001
                found[name] = exc
    return found


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    import io
    import warnings

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _why(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return _("not implemented yet")
    if isinstance(exc, FileNotFoundError):
        return _("notebook not found")
    text = str(exc).splitlines()[0][:120] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_causal_mask(fn: Callable[[int], torch.Tensor]) -> None:
    for L in (1, 5):
        got = fn(L)
        want = torch.ones(L, L, dtype=torch.bool).tril()
        if not (isinstance(got, torch.Tensor) and got.dtype == torch.bool and torch.equal(got, want)):
            raise ValueError(f"causal_mask({L}) is not the lower triangle, diagonal included")


def _check_mha(cls: type) -> None:
    torch.manual_seed(0)
    d, h = 16, 4
    mha = cls(d, h)
    ref = nn.MultiheadAttention(d, h, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([mha.W_q.weight, mha.W_k.weight, mha.W_v.weight]))
        ref.in_proj_bias.copy_(torch.cat([mha.W_q.bias, mha.W_k.bias, mha.W_v.bias]))
        ref.out_proj.weight.copy_(mha.W_o.weight)
        ref.out_proj.bias.copy_(mha.W_o.bias)
    q, kv = torch.randn(2, 3, d), torch.randn(2, 5, d)
    mask = torch.rand(2, 1, 3, 5) > 0.3
    mask[..., 0] = True
    with torch.no_grad():
        out, weights = mha(q, kv, kv, mask)
        want, want_w = ref(q, kv, kv, attn_mask=~mask.expand(2, h, 3, 5).reshape(2 * h, 3, 5),
                           average_attn_weights=False)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(weights, want_w, atol=1e-5, rtol=1e-4)


def _check_positional(cls: type) -> None:
    pe = cls(16, 50, 0.0)
    pe.eval()
    with torch.no_grad():
        x = torch.randn(2, 7, 16)
        table = pe(torch.zeros(1, 7, 16))[0]
        torch.testing.assert_close(pe(x), x + table)
    pos = torch.arange(7.0)
    torch.testing.assert_close(table[:, 0], torch.sin(pos))  # the fastest pair turns one radian per token
    torch.testing.assert_close(table[:, 1], torch.cos(pos))


def _check_kv_cache(cls: type) -> None:
    cache = cls()
    if len(cache) != 0:
        raise ValueError("a new KVCache should be empty (len 0)")
    k1, v1, k2, v2 = (torch.randn(2, 3, n, 4) for n in (2, 2, 1, 1))
    cache.update(k1, v1)
    k, v = cache.update(k2, v2)
    torch.testing.assert_close(k, torch.cat([k1, k2], dim=2))
    torch.testing.assert_close(v, torch.cat([v1, v2], dim=2))
    if len(cache) != 3:
        raise ValueError(f"len(cache) should be 3 after 2 + 1 positions, got {len(cache)}")


_CHECKS = {"causal_mask": _check_causal_mask, "MultiHeadAttention": _check_mha, "PositionalEncoding": _check_positional,
           "KVCache": _check_kv_cache}


def load_parts(folder: str | Path | None = None, use_yours: bool = True) -> Parts:
    """Notebook 08's building blocks: the learner's own answers from notebooks 03, 04, 05 and 06 where they pass a
    quick check, built-in stand-ins where they are missing or fail it.

    `folder` holds the course's notebook folders (default: the parent of the current directory, so that
    notebooks/08_.../ finds notebooks/04_.../). Only the notebooks' first code cells and answer cells run.
    """
    base = Path(folder) if folder is not None else Path.cwd().parent
    builtins_ = {"causal_mask": builtin_causal_mask, "MultiHeadAttention": BuiltinMultiHeadAttention,
                 "PositionalEncoding": LearnedPositions, "KVCache": BufferKVCache}
    by_notebook: dict[str, list[str]] = {}
    for name, (notebook, _builtin) in PART_SOURCES.items():
        by_notebook.setdefault(notebook, []).append(name)
    found: dict[str, Any] = {}
    for notebook, names in by_notebook.items():
        # 04's MultiHeadAttention calls its own split_heads/merge_heads: load the answers it depends on too.
        extra = ["split_heads", "merge_heads"] if notebook.startswith("04") else []
        extra += ["sinusoidal_encoding"] if notebook.startswith("05") else []
        extra += ["repeat_kv"] if notebook.startswith("06") else []
        if use_yours:
            loaded = load_answers(base / notebook / f"{notebook}.ipynb", extra + names)
        else:
            loaded = {n: LookupError("built-in chosen") for n in names}
        for name in names:
            found[name] = loaded[name]
            if extra and not isinstance(found[name], BaseException):
                broken = [e for e in extra if isinstance(loaded[e], BaseException)]
                if broken:
                    found[name] = RuntimeError(f"needs {broken[0]}, which failed: {_why(loaded[broken[0]])}")
    parts = Parts()
    for name, (notebook, builtin_note) in PART_SOURCES.items():
        obj = found[name]
        if not isinstance(obj, BaseException):
            try:
                with _quiet():
                    _CHECKS[name](obj)
                parts.parts[name] = Part(name, obj, True, _(CHECKED_HOW[name]).format(notebook=notebook))
                continue
            except Exception as exc:  # noqa: BLE001 - a failing part is replaced, with the reason shown
                obj = exc
        reason = _("not used") if not use_yours else _("yours from {notebook}: {why}").format(
            notebook=notebook[:2], why=_why(obj))
        parts.parts[name] = Part(name, builtins_[name], False, f"{_(builtin_note)} ({reason})")
    return parts


# ----------------------------------------------------------------------------------------------------------------
# PyTorch's built-ins behind the course's interfaces (stand-ins for a part the learner has not finished)

def builtin_causal_mask(L: int) -> torch.Tensor:
    """(L, L) bool, True on and below the diagonal, from PyTorch's own helper (which gives -inf above it)."""
    return nn.Transformer.generate_square_subsequent_mask(L) == 0


class BuiltinMultiHeadAttention(nn.Module):
    """Notebook 04's interface (W_q, W_k, W_v, W_o; bool masks, True = may attend) on PyTorch's own kernel."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"d_model = {d_model} cannot be split evenly into num_heads = {num_heads} heads")
        self.d_model, self.num_heads = d_model, num_heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, Lq, _ = query.shape
        Lk = key.shape[1]
        attn_mask = None
        if mask is not None:
            attn_mask = ~mask.expand(B, self.num_heads, Lq, Lk).reshape(B * self.num_heads, Lq, Lk)
        biases = [m.bias for m in (self.W_q, self.W_k, self.W_v)]
        out, weights = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), self.d_model, self.num_heads,
            None, None if biases[0] is None else torch.cat(biases), None, None, False, 0.0,
            self.W_o.weight, self.W_o.bias, training=self.training, need_weights=True, attn_mask=attn_mask,
            use_separate_proj_weight=True, q_proj_weight=self.W_q.weight, k_proj_weight=self.W_k.weight,
            v_proj_weight=self.W_v.weight, average_attn_weights=False)
        return out.transpose(0, 1), weights


class LearnedPositions(nn.Module):
    """Learned absolute positions (BERT, GPT-2): x + an embedding of each position, then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        L = x.shape[-2]
        if L > self.embedding.num_embeddings:
            raise ValueError(f"sequence length {L} is longer than max_len={self.embedding.num_embeddings}")
        return self.dropout(x + self.embedding.weight[:L])


class BufferKVCache:
    """Notebook 06's KVCache interface on a preallocated buffer: keys and values (B, h, t, d_k) are written in place
    into storage that doubles when full, so appending a position copies one position, not all of them."""

    def __init__(self) -> None:
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None
        self._t = 0

    def __len__(self) -> int:
        return self._t

    def update(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append (B, h, L_new, d_k) keys and values; return all of them so far, (B, h, t, d_k) views."""
        t = self._t + k_new.shape[2]
        if self._k is None or t > self._k.shape[2]:
            size = max(16, 2 * t)
            grown = [x.new_empty(*x.shape[:2], size, x.shape[3]) for x in (k_new, v_new)]
            if self._k is not None:
                grown[0][:, :, :self._t] = self._k[:, :, :self._t]
                grown[1][:, :, :self._t] = self._v[:, :, :self._t]
            self._k, self._v = grown
        self._k[:, :, self._t:t] = k_new
        self._v[:, :, self._t:t] = v_new
        self._t = t
        return self._k[:, :, :t], self._v[:, :, :t]


class LayerCache:
    """One decoder layer's cache while decoding one batch of sentences.

    - ``self_attn``: a KVCache (notebook 06's interface) of the self-attention's projected keys and values,
      (B, h, t, d_k), one position appended per step;
    - ``memory``: the cross-attention's keys and values of the encoder output, ``(k, v)`` each (B, h, Ls, d_k),
      projected at the first step and reused at every later one (None until then).
    """

    def __init__(self, kv_cache: Callable[[], Any] | None = None) -> None:
        self.self_attn = (kv_cache or BufferKVCache)()
        self.memory: tuple[torch.Tensor, torch.Tensor] | None = None

    def __len__(self) -> int:
        return len(self.self_attn)


def _heads(attn: nn.Module) -> int:
    heads = getattr(attn, "num_heads", None)
    if not isinstance(heads, int):
        raise AttributeError(f"{type(attn).__name__} has no num_heads attribute (notebook 04's MultiHeadAttention "
                             "keeps the number of heads in self.num_heads)")
    return heads


def project_kv(attn: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values of `x` (B, L, d_model) under the attention module's W_k and W_v, split into heads:
    two tensors (B, h, L, d_k), the form a KVCache stores."""
    h = _heads(attn)
    B, L, d = x.shape
    return tuple(proj(x).view(B, L, h, d // h).transpose(1, 2) for proj in (attn.W_k, attn.W_v))


def attend(attn: nn.Module, query: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
           mask: torch.Tensor | None = None) -> torch.Tensor:
    """The attention module's output for `query` (B, Lq, d_model) over keys and values that are already projected
    and split into heads, (B, h, Lk, d_k) each (from `project_kv` or a KVCache); `mask` bool, True = may attend.
    Runs on PyTorch's scaled_dot_product_attention; returns (B, Lq, d_model) (no weights)."""
    h = _heads(attn)
    B, Lq, d = query.shape
    q = attn.W_q(query).view(B, Lq, h, d // h).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return attn.W_o(out.transpose(1, 2).reshape(B, Lq, d))


def torch_mask(mask: torch.Tensor | None, heads: int) -> torch.Tensor | None:
    """The course's (B, 1, Lq, Lk) True-may-attend mask as PyTorch's (B * heads, Lq, Lk) True-is-blocked one."""
    if mask is None:
        return None
    B, _, Lq, Lk = mask.shape
    return ~mask.expand(B, heads, Lq, Lk).reshape(B * heads, Lq, Lk)


class BuiltinEncoderLayer(nn.Module):
    """`nn.TransformerEncoderLayer` (pre-norm, ReLU) behind the course's EncoderLayer interface."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.num_heads, self.norm_first = num_heads, True
        self.layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True, norm_first=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            mask = mask.expand(x.shape[0], 1, x.shape[1], x.shape[1])
        return self.layer(x, src_mask=torch_mask(mask, self.num_heads))


class BuiltinDecoderLayer(nn.Module):
    """`nn.TransformerDecoderLayer` (pre-norm, ReLU) behind the course's DecoderLayer interface. With a cache it runs
    the same layer's weights on one new position, its keys and values cached (see LayerCache)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.num_heads, self.norm_first = num_heads, True
        self.layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout, batch_first=True, norm_first=True)

    def _cached(self, mha: nn.MultiheadAttention, h: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor] | None,
                source: torch.Tensor | None, mask: torch.Tensor | None):
        d, H = h.shape[-1], self.num_heads
        w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
        b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
        split = lambda t: t.unflatten(-1, (H, d // H)).transpose(1, 2)  # noqa: E731
        if kv is None:
            kv = split(F.linear(source, w_k, b_k)), split(F.linear(source, w_v, b_v))
        out = F.scaled_dot_product_attention(split(F.linear(h, w_q, b_q)), *kv, attn_mask=mask)
        return mha.out_proj(out.transpose(1, 2).flatten(2)), kv

    def forward(self, x, memory, tgt_mask=None, src_mask=None, cache=None):
        B, L, Ls = x.shape[0], x.shape[1], memory.shape[1]
        if cache is None:
            if tgt_mask is not None:
                tgt_mask = tgt_mask.expand(B, 1, L, L)
            if src_mask is not None:
                src_mask = src_mask.expand(B, 1, L, Ls)
            return self.layer(x, memory, tgt_mask=torch_mask(tgt_mask, self.num_heads),
                              memory_mask=torch_mask(src_mask, self.num_heads))
        lay = self.layer
        h = lay.norm1(x)
        new_kv = self._cached(lay.self_attn, h, None, h, None)[1]
        kv = cache.self_attn.update(*new_kv)
        mask = None if L == 1 else torch.ones(L, kv[0].shape[2], dtype=torch.bool).tril(kv[0].shape[2] - L)
        x = x + lay.dropout1(self._cached(lay.self_attn, h, kv, None, mask)[0])
        out, cache.memory = self._cached(lay.multihead_attn, lay.norm2(x), cache.memory, memory, src_mask)
        x = x + lay.dropout2(out)
        return x + lay._ff_block(lay.norm3(x))


_MERGER = nn.MultiheadAttention(1, 1, batch_first=True)


def builtin_decoder_mask(tgt: torch.Tensor, pad_id: int) -> torch.Tensor:
    """The stand-in for notebook 08's decoder_mask: PyTorch's square subsequent mask merged with the key padding
    mask by nn.MultiheadAttention's own `merge_masks` (float masks, 0 where allowed)."""
    square = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
    merged, _ = _MERGER.merge_masks(square, tgt == pad_id, tgt[..., None].float())
    return merged == 0


def torch_layer_like(layer: Any, num_heads: int) -> nn.Module:
    """PyTorch's own nn.TransformerEncoderLayer (or DecoderLayer, when `layer` has a cross_attn) holding `layer`'s
    weights, with its norm_first, dropout off and in eval mode: the reference a course layer must equal.

    Only reads `layer`'s attributes (self_attn/cross_attn.W_q..W_o, linear1/2, norm1/2/3, norm_first), so it also
    works on a layer that lives in another process while grading."""
    decoder = hasattr(layer, "cross_attn")
    d_model, d_ff = layer.linear1.weight.shape[1], layer.linear1.weight.shape[0]
    cls = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    norm_first = layer.norm_first
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first should be True (pre-norm) or False (post-norm), got {norm_first!r}")
    reference = cls(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first)
    state = {}
    for ours, theirs in (("self_attn", "self_attn"), ("cross_attn", "multihead_attn"))[: 2 if decoder else 1]:
        block = getattr(layer, ours)
        projections = [getattr(block, name) for name in ("W_q", "W_k", "W_v")]
        state[f"{theirs}.in_proj_weight"] = torch.cat([m.weight.detach() for m in projections])
        state[f"{theirs}.in_proj_bias"] = torch.cat([m.bias.detach() for m in projections])
        state[f"{theirs}.out_proj.weight"] = block.W_o.weight.detach()
        state[f"{theirs}.out_proj.bias"] = block.W_o.bias.detach()
    for name in ("linear1", "linear2", "norm1", "norm2") + (("norm3",) if decoder else ()):
        module = getattr(layer, name)
        state[f"{name}.weight"] = module.weight.detach()
        state[f"{name}.bias"] = module.bias.detach()
    reference.load_state_dict(state)
    return reference.eval()


def checkpoint_path(name: str = "translator.safetensors") -> Path:
    """Where the translator's checkpoint lives: checkpoints/ in the course folder (not in git)."""
    return Path(__file__).resolve().parents[2] / "checkpoints" / name  # the course folder (utils/translator/..)


# ----------------------------------------------------------------------------------------------------------------
# The model

class Translator(nn.Module):
    """Embeddings, positions, a stack of encoder and decoder layers, and the output projection.

    The layers, the positional encoding and the decoder's mask are whatever you pass in (your classes from
    notebook 08 and the parts from earlier notebooks); left out, PyTorch's built-ins stand in. When the layers are
    pre-norm (their `norm_first` is True, the default) each stack ends with a LayerNorm, as in GPT-2 and T5.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        *,
        d_model: int = 128,
        num_heads: int = 4,
        d_ff: int = 256,
        num_layers: int = 2,
        dropout: float = 0.0,
        max_len: int = 64,
        pad_id: int = Vocab.pad_id,
        bos_id: int = Vocab.bos_id,
        eos_id: int = Vocab.eos_id,
        encoder_layer: Callable[..., nn.Module] | None = None,
        decoder_layer: Callable[..., nn.Module] | None = None,
        positional: Callable[..., nn.Module] | None = None,
        decoder_mask: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
        kv_cache: Callable[[], Any] | None = None,
    ) -> None:
        super().__init__()
        self.config = dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, d_model=d_model,
                           num_heads=num_heads, d_ff=d_ff, num_layers=num_layers, dropout=dropout, max_len=max_len)
        self.d_model, self.max_len = d_model, max_len
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.pos = (positional or LearnedPositions)(d_model, max_len, dropout)
        self.encoder = nn.ModuleList((encoder_layer or BuiltinEncoderLayer)(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers))
        self.decoder = nn.ModuleList((decoder_layer or BuiltinDecoderLayer)(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_layers))
        pre_norm = bool(getattr(self.encoder[0], "norm_first", True)) if num_layers else True
        self.enc_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.dec_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self.decoder_mask = decoder_mask or builtin_decoder_mask
        self.kv_cache = kv_cache or BufferKVCache  # the self-attention cache's class (notebook 06's KVCache)

    def _embed(self, embedding: nn.Embedding, tokens: torch.Tensor, start: int = 0) -> torch.Tensor:
        x = embedding(tokens) * math.sqrt(self.d_model)
        if start + tokens.shape[1] > self.max_len:
            raise ValueError(f"a sequence of {start + tokens.shape[1]} tokens is longer than max_len={self.max_len}")
        if start == 0:
            return self.pos(x)
        # Positions start..start+L-1 only (cached decoding): the encoding of zeros is the table itself.
        table = self.pos(torch.zeros(1, start + tokens.shape[1], self.d_model, device=x.device))
        return x + table[:, start:]

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, Ls) token ids -> memory (B, Ls, d_model) and the source mask (B, 1, 1, Ls)."""
        src_mask = (src != self.pad_id)[:, None, None, :]
        x = self._embed(self.src_embed, src)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.enc_norm(x), src_mask

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               cache: list[LayerCache] | None = None) -> torch.Tensor:
        """tgt (B, Lt) token ids -> logits (B, Lt, tgt_vocab_size).

        Without a cache, `tgt` is the whole prefix (from <bos>) and the decoder's mask is applied. With a cache
        (from `new_cache()`), `tgt` is only the newest token (B, 1), placed after the ones already cached.
        """
        if cache is None:
            tgt_mask = self.decoder_mask(tgt, self.pad_id)
            x = self._embed(self.tgt_embed, tgt)
            for layer in self.decoder:
                x = layer(x, memory, tgt_mask, src_mask)
        else:
            if len(cache) != len(self.decoder):
                raise ValueError(f"the cache has {len(cache)} layers, the decoder {len(self.decoder)}: "
                                 "use model.new_cache()")
            x = self._embed(self.tgt_embed, tgt, start=len(cache[0]))
            for layer, layer_cache in zip(self.decoder, cache):
                x = layer(x, memory, None, src_mask, cache=layer_cache)
        return self.generator(self.dec_norm(x))

    def new_cache(self) -> list[LayerCache]:
        """An empty cache, one LayerCache per decoder layer (each with a fresh `self.kv_cache`)."""
        return [LayerCache(self.kv_cache) for _ in self.decoder]

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits for every position of `tgt` (which starts with <bos>)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)


# ----------------------------------------------------------------------------------------------------------------
# Data

def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = Vocab.pad_id) -> torch.Tensor:
    """Token id lists -> (B, longest) LongTensor, padded at the end."""
    if not seqs:
        raise ValueError("pad_batch needs at least one sequence")
    L = max(len(s) for s in seqs)
    return torch.tensor([list(s) + [pad_id] * (L - len(s)) for s in seqs], dtype=torch.long)


class Batches:
    """Endless (src, tgt) batches of encoded pairs, shuffled with a seed; pairs of similar length share a batch
    (sorted within chunks of 50 batches) so that little of each batch is padding."""

    def __init__(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], batch_size: int = 64,
                 seed: int = 0, bucket: int = 50) -> None:
        if len(src) != len(tgt) or not src:
            raise ValueError(f"need as many source as target sentences (and some): got {len(src)} and {len(tgt)}")
        self.src, self.tgt, self.batch_size, self.bucket = list(src), list(tgt), batch_size, bucket
        self.rng = random.Random(seed)
        self.queue: list[list[int]] = []

    def _refill(self) -> None:
        order = list(range(len(self.src)))
        self.rng.shuffle(order)
        chunk = self.bucket * self.batch_size
        batches = []
        for i in range(0, len(order), chunk):
            part = sorted(order[i:i + chunk], key=lambda k: (len(self.src[k]) + len(self.tgt[k]), k))
            batches += [part[j:j + self.batch_size] for j in range(0, len(part), self.batch_size)]
        self.rng.shuffle(batches)
        self.queue = batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def state(self) -> dict[str, Any]:
        """Where the stream is (the shuffler's state and the batches left), for an exact resume."""
        version, internal, gauss = self.rng.getstate()
        return {"rng": [version, list(internal), gauss], "queue": self.queue}

    def load_state(self, state: dict[str, Any]) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.queue = [list(b) for b in state["queue"]]

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.queue:
            self._refill()
        idx = self.queue.pop()
        return pad_batch([self.src[i] for i in idx]), pad_batch([self.tgt[i] for i in idx])


# ----------------------------------------------------------------------------------------------------------------
# BLEU and translation

def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu, 0-100) of tokenized sentences: the text is already split into words, so sacrebleu's
    own tokenizer is off (tokenize='none')."""
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} translations for {len(references)} references")
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)], tokenize="none", force=True).score


@torch.no_grad()
def translate(model: Translator, sentences: Sequence[str], src_vocab: Vocab, tgt_vocab: Vocab,
              decode: Callable[..., torch.Tensor], batch_size: int = 250, max_extra: int = 5) -> list[str]:
    """Translate tokenized sentences with `decode(model, src, max_len)` (e.g. your greedy_decode), in batches."""
    was_training = model.training
    model.eval()
    out: list[str] = []
    try:
        for i in range(0, len(sentences), batch_size):
            ids = [src_vocab.encode(s) for s in sentences[i:i + batch_size]]
            src = pad_batch(ids, model.pad_id)
            max_len = min(src.shape[1] + max_extra, model.max_len - 1)
            tokens = decode(model, src, max_len)
            out += [tgt_vocab.decode(row.tolist()) for row in tokens]
    finally:
        model.train(was_training)
    return out


# ----------------------------------------------------------------------------------------------------------------
# Training

@dataclass
class TrainConfig:
    steps: int = 2400
    batch_size: int = 64
    lr: float = 3e-3
    warmup: int = 150
    label_smoothing: float = 0.1
    clip: float = 1.0
    eval_every: int = 400
    seed: int = 0


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up over `warmup` steps, then a cosine from 1 down to 0.05 at the last step."""
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup))
    return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))


class Trainer:
    """Adam with warm-up and cosine decay, label smoothing, gradient clipping; a progress bar with the loss and
    tokens/s; held-out BLEU every `eval_every` steps; checkpoints (safetensors) that `resume` picks up again."""

    def __init__(self, model: Translator, batches: Batches, cfg: TrainConfig,
                 evaluate: Callable[[], dict[str, float]] | None = None,
                 vocabs: tuple[Vocab, Vocab] | None = None) -> None:
        self.model, self.batches, self.cfg, self.evaluate = model, batches, cfg, evaluate
        self.vocabs = vocabs  # saved with every checkpoint, so that `attn translate` can read it
        self.optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, cfg))
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=model.pad_id, label_smoothing=cfg.label_smoothing)
        self.step = 0
        self.seconds = 0.0  # training time only, evaluation excluded
        self.history: list[dict[str, float]] = []  # one row per evaluation

    def train_step(self, src: torch.Tensor, tgt: torch.Tensor) -> tuple[float, int]:
        logits = self.model(src, tgt[:, :-1])
        target = tgt[:, 1:]
        loss = self.loss_fn(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return loss.item(), int((target != self.model.pad_id).sum())

    def run(self, until: int | None = None, progress: bool = True, checkpoint: str | Path | None = None,
            minutes: float | None = None) -> list[dict[str, float]]:
        """Train to step `until` (default: the configured steps) or for `minutes`; returns the evaluation rows."""
        from tqdm.auto import tqdm

        until = self.cfg.steps if until is None else min(until, self.cfg.steps)
        deadline = None if minutes is None else time.monotonic() + 60 * minutes
        self.model.train()
        bar = tqdm(total=until, initial=self.step, disable=not progress, unit="step", dynamic_ncols=True)
        loss = float("nan")
        try:
            while self.step < until and (deadline is None or time.monotonic() < deadline):
                t0 = time.perf_counter()
                src, tgt = next(self.batches)
                loss, tokens = self.train_step(src, tgt)
                dt = time.perf_counter() - t0
                self.seconds += dt
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens / dt:,.0f}", refresh=False)
                if self.step % self.cfg.eval_every == 0 or self.step == self.cfg.steps:
                    self._evaluate(loss)
                    if checkpoint is not None:
                        save_checkpoint(checkpoint, self.model, self)
        finally:
            bar.close()
        if self.step > 0 and (not self.history or self.history[-1]["step"] != self.step):
            self._evaluate(loss)  # stopped between evaluations (until=, minutes=): measure where it stopped
        if checkpoint is not None:
            save_checkpoint(checkpoint, self.model, self)
        return self.history

    def _evaluate(self, loss: float) -> None:
        row = {"step": self.step, "seconds": round(self.seconds, 1), "loss": round(loss, 4)}
        if self.evaluate is not None:
            row.update(self.evaluate())
        self.history.append(row)


# ----------------------------------------------------------------------------------------------------------------
# Checkpoints (safetensors: tensors and a JSON header, nothing executable)

def save_checkpoint(path: str | Path, model: Translator, trainer: Trainer | None = None,
                    extra: dict[str, Any] | None = None) -> Path:
    """Write the model's weights, its configuration, and (with a trainer) Adam's state and the step, so that
    training can resume exactly where it stopped."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {f"model.{k}": v.detach().contiguous() for k, v in model.state_dict().items()}
    meta: dict[str, Any] = {"config": model.config, **(extra or {})}
    if trainer is not None and trainer.vocabs is not None:
        meta.update(src_vocab=trainer.vocabs[0].to_list(), tgt_vocab=trainer.vocabs[1].to_list())
    if trainer is not None:
        state = trainer.optimizer.state_dict()
        for index, slots in state["state"].items():
            for name, value in slots.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"adam.{index}.{name}"] = value.detach().contiguous().reshape(value.shape)
        meta.update(step=trainer.step, seconds=trainer.seconds, history=trainer.history,
                    train_config=trainer.cfg.__dict__, batches=trainer.batches.state())
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"attn": json.dumps(meta)})
    tmp.replace(path)  # a crash mid-write never leaves a half checkpoint behind
    return path


def read_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and metadata of a checkpoint, with a clear error for a missing or foreign file."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(_("no checkpoint at {path}: train one first (`attn train`, or notebook 08)").format(
            path=path))
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("attn", "null"))
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for damaged files
        raise ValueError(_("{path} is not a readable checkpoint ({error})").format(path=path, error=exc)) from exc
    if not isinstance(meta, dict) or "config" not in meta:
        raise ValueError(_("{path} is a safetensors file but not a translator checkpoint (no 'attn' "
                           "metadata)").format(path=path))
    return tensors, meta


def load_checkpoint(path: str | Path, model: Translator, trainer: Trainer | None = None) -> dict[str, Any]:
    """Load weights (and, with a trainer, Adam's state, the step and the history) saved by `save_checkpoint`."""
    tensors, meta = read_checkpoint(path)
    state = {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")}
    model.load_state_dict(state)
    if trainer is not None and "step" in meta:
        opt_state = trainer.optimizer.state_dict()
        for key, value in tensors.items():
            if key.startswith("adam."):
                _, index, name = key.split(".", 2)
                opt_state["state"].setdefault(int(index), {})[name] = value
        trainer.optimizer.load_state_dict(opt_state)
        trainer.step, trainer.seconds, trainer.history = meta["step"], meta["seconds"], meta["history"]
        if "batches" in meta:
            trainer.batches.load_state(meta["batches"])
        trainer.scheduler.last_epoch = trainer.step
        for group in trainer.optimizer.param_groups:
            group["lr"] = group["initial_lr"] * lr_factor(trainer.step, trainer.cfg)
    return meta


# ----------------------------------------------------------------------------------------------------------------
# Looking inside: attention maps and alignment

@contextlib.contextmanager
def capture_attention(model: Translator) -> Iterator[dict[str, torch.Tensor]]:
    """Within the block, every attention module's weights (B, h, Lq, Lk) land in the dict, by name:
    'encoder.0.self_attn', 'decoder.1.cross_attn', ... (the last call of each module wins)."""
    maps: dict[str, torch.Tensor] = {}
    handles = []
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in ("self_attn", "cross_attn"):
            def hook(_m, _inputs, output, name=name):
                if isinstance(output, tuple) and len(output) == 2 and isinstance(output[1], torch.Tensor):
                    maps[name] = output[1].detach()
            handles.append(module.register_forward_hook(hook))
    try:
        yield maps
    finally:
        for h in handles:
            h.remove()


def alignment_accuracy(weights: torch.Tensor, pairs: Sequence[Pair]) -> torch.Tensor:
    """How often the most-attended source word is the gold one, per head.

    `weights` (B, h, Lt, Ls) are cross-attention maps from teacher forcing on `pairs` (target input = <bos> + words,
    source = <bos> + words + <eos>): the query at target position t is the one that predicts target word t, and
    source word s sits at key s + 1. Target words without a gold source word are skipped. Returns (h,) shares.
    """
    hits = torch.zeros(weights.shape[1])
    total = 0
    for b, pair in enumerate(pairs):
        if pair.alignment is None:
            continue
        for t, s in enumerate(pair.alignment):
            if s is None:
                continue
            hits += (weights[b, :, t].argmax(-1) == s + 1).float()
            total += 1
    if total == 0:
        raise ValueError("no gold alignment in these pairs (your own TSV file has none unless it has a third column)")
    return hits / total

