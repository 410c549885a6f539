"""Hidden tests of 04_multi_head_attention: reference implementations, the mistake catalogue, references."""

from __future__ import annotations

import math

import torch
from torch import nn

from utils.attention_variants import attention
from utils.diagnose import count_diagnosis
from utils.grading import (
    CheckFailure,
    LocalPart,
    Mistake,
    expect_pair,
    load_weights,
    local_object,
    standing_in,
    type_name,
)
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

NOTEBOOK = "04_multi_head_attention"
SPLIT = N_("4. Splitting the heads")
BUG = N_("5. The classic silent bug: view without transpose")
MERGE = N_("6. Merging the heads")
PIPELINE = N_("7. Multi-head attention, step by step")
GPT2 = N_("Porting real weights: GPT-2's attention")

# -- the mistake catalogue ----------------------------------------------------------------------------
# Several entries share a name: the same mistake, made in a different place, explained for that place.
VIEW_SPLIT = Mistake(
    "view without transpose",
    "x.view(B, h, L, d) has the right shape, but it deals the flattened (L, D) block out in consecutive "
    "chunks, so one 'head' holds the features of neighbouring positions glued together; view as "
    "(B, L, h, d) first, then transpose(1, 2)",
    BUG,
)
VIEW_MERGE = Mistake(
    "view without transpose",
    "reshaping (B, h, L, d) straight to (B, L, h*d) lays head 0's rows end to end before head 1's, so "
    "output row i is made of several positions of one head; transpose(1, 2) back to (B, L, h, d) first",
    BUG,
)
VIEW_BOTH = Mistake(
    "view without transpose",
    "the heads were split with view(B, h, L, d) and merged without transposing back: the shapes "
    "undo each other, but every head attended over rows that mix positions",
    BUG,
)
SCALE_D_MODEL = Mistake(
    "scaling by sqrt(d_model)",
    "a head's score is a dot product over its own d_k = d_model / h features, so its spread grows with "
    "d_k; dividing by the square root of d_model flattens every head's softmax",
    PIPELINE,
)
MISSING_W_O = Mistake(
    "missing W_o",
    "the concatenated heads were returned without the output projection W_o, so no output feature "
    "mixes information from more than one head",
    PIPELINE,
)
AVERAGE_MERGE = Mistake(
    "averaging heads",
    "the heads were combined by their mean over the head axis, (B, L, d), instead of being "
    "concatenated side by side, (B, L, h*d)",
    MERGE,
)
STRIDED_SPLIT = Mistake(
    "heads split with a strided view",
    "x.view(B, L, d, h).permute(0, 3, 1, 2) has the right shape, but head i gets features i, i + h, i + 2h, ... "
    "(every h-th feature) instead of its own block of d neighbouring ones; view as (B, L, h, d), then "
    "transpose(1, 2)",
    SPLIT,
)
STRIDED_BOTH = Mistake(
    "heads split with a strided view",
    "the heads were split with view(B, L, d, h).permute(0, 3, 1, 2) (and merged back the same way): head i reads "
    "every h-th feature of the projections instead of its own block of d neighbouring ones, so the heads are not "
    "the slices W_q[i*d:(i+1)*d] that the weights were trained as; view as (B, L, h, d), then transpose(1, 2)",
    SPLIT,
)
# The concepts of attention itself, as they show up inside the module (02 explains each for one head).
NO_SCALE = Mistake(
    "no 1/sqrt(d_k) scaling",
    "the heads' raw dot products went into the softmax; their spread grows like sqrt(d_k), so the softmax "
    "saturates; divide each head's scores by sqrt(d_k), d_k = d_model / h",
    PIPELINE,
)
SCALE_DK = Mistake(
    "scaling by 1/d_k",
    "each head's scores were divided by d_k instead of sqrt(d_k), which flattens every head's weights towards "
    "a uniform average",
    PIPELINE,
)
MASK_INVERTED = Mistake(
    "mask polarity inverted",
    "the scores were set to -inf where the mask is True; in this course True means 'may attend', so fill where "
    "the mask is False (~mask)",
    PIPELINE,
)
WRONG_DIM = Mistake(
    "softmax over the wrong dim",
    "the softmax normalised each head's scores over the queries (dim=-2) instead of over the keys (dim=-1)",
    PIPELINE,
)
SHARED_KV = Mistake(
    "a projection shared between Q, K and V",
    "the values were projected with W_k (or the keys with W_v): keys and values share one projection, so what "
    "a head reads is tied to where it looks; each of q, k, v has its own nn.Linear",
    PIPELINE,
)
SHARED_QKV = Mistake(
    "a projection shared between Q, K and V",
    "the keys and values were projected with W_q: one projection for all three, so the heads cannot learn "
    "separate roles for asking, matching and reading; use W_k and W_v",
    PIPELINE,
)
SHARED_QK = Mistake(
    "a projection shared between Q, K and V",
    "the keys were projected with W_q (the same layer as the queries): every score is then a query against a "
    "W_q-projected key, a token scores itself highest and W_k is never used; the keys need their own W_k",
    PIPELINE,
)
SWAPPED = Mistake(
    "query and key/value inputs swapped",
    "the queries were projected from `key` and the keys and values from `query`; forward(query, key, value) "
    "takes the sequence that asks first and the one that is read second",
    PIPELINE,
)
SWAPPED_KV = Mistake(
    "query and key/value inputs swapped",
    "the keys were projected from `value` and the values from `key`; where to look comes from `key`, what is "
    "read from `value`",
    PIPELINE,
)
WRONG_DIM_HEADS = Mistake(
    "softmax over the wrong dim",
    "the softmax normalised over the heads (dim=1 of (B, h, Lq, Lk)) instead of over the keys: each query's "
    "weights must sum to 1 across the keys, dim=-1",
    PIPELINE,
)
WRONG_DIM_BATCH = Mistake(
    "softmax over the wrong dim",
    "the softmax normalised over the batch (dim=0 of (B, h, Lq, Lk)) instead of over the keys: each query's "
    "weights must sum to 1 across the keys, dim=-1",
    PIPELINE,
)
VALUES_FROM_KEY = Mistake(
    "values projected from key instead of value",
    "the values were projected from `key` instead of `value`: forward(query, key, value) reads what it returns "
    "from `value`, which only looks the same when key is value",
    PIPELINE,
)
KEYS_FROM_VALUE = Mistake(
    "keys projected from value instead of key",
    "the keys were projected from `value` instead of `key`: where to look comes from `key`, what is read from "
    "`value`, which only looks the same when key is value",
    PIPELINE,
)
COUNT_NO_W_O = Mistake(
    "output projection not counted",
    "the count has three projections (W_q, W_k, W_v); multi-head attention has a fourth, W_o, that mixes the "
    "concatenated heads: 4·d_model² weights, plus 4·d_model biases",
    "11. Counting parameters",
)
COUNT_PER_HEAD = Mistake(
    "projections counted once per head",
    "the heads do not have their own d_model × d_model matrices: each head uses a d_model × d_k slice of the same "
    "four, so the count does not depend on num_heads: 4·d_model² (+ 4·d_model biases)",
    "11. Counting parameters",
)
COUNT_NO_BIAS = Mistake(
    "biases not counted",
    "with bias=True each of the four projections also has d_model biases: 4·d_model² + 4·d_model",
    "11. Counting parameters",
)
AVERAGE_WEIGHTS = Mistake(
    "averaging heads",
    "the attention weights were averaged over the heads, (B, Lq, Lk), as torch.nn.MultiheadAttention "
    "does by default; this module returns one map per head, (B, h, Lq, Lk)",
    PIPELINE,
)


# Porting GPT-2's Conv1D weights (load_gpt2_attention).
GPT2_NOT_TRANSPOSED = Mistake(
    "Conv1D weights not transposed",
    "GPT-2's Conv1D stores its weight input-major, (in, out), and computes x @ W + b; nn.Linear stores (out, in) and "
    "computes x @ W.T + b, so each block must be transposed on the way in. The blocks are square (d, d), so the "
    "untransposed copy loads without an error and every projection computes x @ W.T instead of x @ W",
    GPT2,
)
GPT2_ATTN_NOT_TRANSPOSED = Mistake(
    "Conv1D weights not transposed",
    "c_proj was transposed but the three blocks of c_attn were not: a Conv1D weight is (in, out), used as x @ W + b, "
    "and nn.Linear's is (out, in), so W_q, W_k and W_v each need their block transposed as well",
    GPT2,
)
GPT2_PROJ_NOT_TRANSPOSED = Mistake(
    "c_proj not transposed",
    "c_proj is a Conv1D too, (in, out) and used as x @ W + b: W_o needs c_proj_weight transposed, like the three "
    "blocks of c_attn",
    GPT2,
)
GPT2_QKV_ORDER = Mistake(
    "q, k, v taken in the wrong order",
    "c_attn's output is q, then k, then v, side by side along its last dim (split(d, dim=-1) returns them in that "
    "order); W_q must get the first block of d columns, W_k the second, W_v the third, and the same for the bias",
    GPT2,
)
GPT2_WRONG_SPLIT = Mistake(
    "c_attn split along the wrong dim",
    "c_attn_weight is (d, 3d): q, k and v sit side by side along its LAST dim, as blocks of d columns. Reshaping it "
    "to (3, d, d) or cutting it into rows cuts across the three, so each projection gets a mix of q, k and v "
    "weights",
    GPT2,
)
GPT2_NO_BIAS = Mistake(
    "biases not copied",
    "the weights were copied but the biases were not: GPT-2's Conv1D layers add c_attn_bias (3d, split like the "
    "weight) and c_proj_bias, and W_q, W_k, W_v, W_o kept the biases they were initialised with",
    GPT2,
)
GPT2_NOT_IN_PLACE = Mistake(
    "the module passed in was not filled",
    "the module given to load_gpt2_attention still has the weights it was built with: copy GPT-2's weights into "
    "that module's own layers (in place) and return it, rather than filling a new module or a copy",
    GPT2,
)


# -- reference implementations (instructor side only) ------------------------------------------------
def reference_split_heads(x: torch.Tensor, num_heads: int, *, transpose: bool = True, strided: bool = False
                          ) -> torch.Tensor:
    B, L, D = x.shape
    if strided:  # G-8: view(B, L, d, h).permute(0, 3, 1, 2), head i = features i, i + h, ...
        return x.reshape(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)
    if not transpose:
        return x.reshape(B, num_heads, L, D // num_heads)
    return x.reshape(B, L, num_heads, D // num_heads).transpose(1, 2)


def reference_merge_heads(x: torch.Tensor, *, transpose: bool = True, average: bool = False, strided: bool = False
                          ) -> torch.Tensor:
    B, h, L, d = x.shape
    if strided:  # the inverse of the strided split
        return x.permute(0, 2, 3, 1).reshape(B, L, h * d)
    if average:
        return x.mean(dim=1)
    if not transpose:
        return x.reshape(B, L, h * d)
    return x.transpose(1, 2).reshape(B, L, h * d)


def reference_mha(
    params: dict[str, torch.Tensor],
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    num_heads: int,
    *,
    split_transpose: bool = True,
    merge_transpose: bool = True,
    scale_width: str = "d_k",
    use_w_o: bool = True,
    strided: str = "",
    projections: tuple[str, str, str] = ("W_q", "W_k", "W_v"),
    inputs: str = "qkv",
    concept: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention from a state dict (W_q.weight, W_q.bias, ...), with switches for the mistakes.

    `strided`: "split" or "both" (G-8); `projections`: which layer makes q, k, v; `inputs`: which of query (q),
    key (k), value (v) each projection reads ("kqq": query and key/value swapped); `concept`: one of
    utils.attention_variants' standard attention mistakes, made inside every head."""

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        bias = params.get(f"{name}.bias")
        return torch.nn.functional.linear(x, params[f"{name}.weight"], bias)

    d_model = query.shape[-1]
    source = {"q": query, "k": key, "v": value}
    split_strided = strided in ("split", "both")
    q, k, v = (reference_split_heads(linear(source[i], w), num_heads, transpose=split_transpose, strided=split_strided)
               for i, w in zip(inputs, projections))
    d_k = d_model // num_heads
    switches = {}
    if concept is not None:
        switches = {"no_scale": {"divisor": 1.0}, "scale_dk": {"divisor": float(d_k)},
                    "mask_inverted": {"invert_mask": True}, "softmax_wrong_dim": {"softmax_dim": -2},
                    "softmax_heads": {"softmax_dim": 1}, "softmax_batch": {"softmax_dim": 0}}[concept]
    if scale_width != "d_k":
        switches = {"divisor": math.sqrt(d_model)}
    out, weights = attention(q, k, v, mask, **switches)
    out = reference_merge_heads(out, transpose=merge_transpose, strided=strided == "both")
    if use_w_o:
        out = linear(out, "W_o")
    return out, weights


def reference_gpt2_attention(x, c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, n_heads):
    """GPT-2's causal self-attention as Hugging Face's GPT2Attention computes it (Conv1D: x @ W + b)."""
    B, L, d = x.shape
    qkv = torch.addmm(c_attn_bias, x.reshape(-1, d), c_attn_weight).view(B, L, 3 * d)
    q, k, v = (t.view(B, L, n_heads, d // n_heads).permute(0, 2, 1, 3) for t in qkv.split(d, dim=2))
    scores = q @ k.transpose(-1, -2) / (v.shape[-1] ** 0.5)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    weights = torch.softmax(torch.where(causal, scores, torch.finfo(scores.dtype).min), dim=-1)
    out = (weights @ v).permute(0, 2, 1, 3).reshape(B * L, d)
    return torch.addmm(c_proj_bias, out, c_proj_weight).view(B, L, d)


def gpt2_params(c_attn_weight, c_attn_bias, c_proj_weight, c_proj_bias, *, order=(0, 1, 2), transpose_attn=True,
                transpose_proj=True, rows=False, biases=None) -> dict[str, torch.Tensor]:
    """Our module's state dict holding GPT-2's weights; the switches reproduce the porting mistakes.

    `order`: which of GPT-2's blocks (0 = q, 1 = k, 2 = v) W_q, W_k, W_v get; `rows`: c_attn_weight cut as
    reshape(3, d, d) (across q, k and v) instead of into column blocks; `biases`: the biases the module kept
    (instead of GPT-2's)."""
    d = c_attn_weight.shape[0]
    blocks = list(c_attn_weight.reshape(3, d, d) if rows else c_attn_weight.split(d, dim=-1))
    bias_blocks = list(c_attn_bias.split(d))
    params = {}
    for name, i in zip(("W_q", "W_k", "W_v"), order):
        params[f"{name}.weight"] = (blocks[i].T if transpose_attn else blocks[i]).contiguous()
        params[f"{name}.bias"] = bias_blocks[i].clone()
    params["W_o.weight"] = (c_proj_weight.T if transpose_proj else c_proj_weight).contiguous()
    params["W_o.bias"] = c_proj_bias.clone()
    if biases is not None:
        params.update({k: v.clone() for k, v in biases.items()})
    return params


def mha_mistakes(params, query, key, value, mask, num_heads):
    """{Mistake: wrong output} and {Mistake: wrong weights} for every catalogued MHA mistake.

    A variant is offered only where it predicts an answer the right one is not: where it equals the reference (one
    head of width 1, a query that is also the key), an answer that has the mistake would be right, and a right answer
    must not count against it. So is one whose output has another shape than the right one (query and key swapped
    when Lq != Lk).
    """
    args = (params, query, key, value, mask, num_heads)
    right_out, right_w = reference_mha(*args)
    switches = {
        VIEW_SPLIT: {"split_transpose": False},
        VIEW_MERGE: {"merge_transpose": False},
        VIEW_BOTH: {"split_transpose": False, "merge_transpose": False},
        SCALE_D_MODEL: {"scale_width": "d_model"},
        MISSING_W_O: {"use_w_o": False},
        STRIDED_SPLIT: {"strided": "split"},
        STRIDED_BOTH: {"strided": "both"},
        NO_SCALE: {"concept": "no_scale"},
        SCALE_DK: {"concept": "scale_dk"},
        WRONG_DIM: {"concept": "softmax_wrong_dim"},
        SHARED_KV: {"projections": ("W_q", "W_k", "W_k")},
        SHARED_QKV: {"projections": ("W_q", "W_q", "W_q")},
        SHARED_QK: {"projections": ("W_q", "W_q", "W_v")},
        SWAPPED: {"inputs": "kqq"},
        SWAPPED_KV: {"inputs": "qvk"},
        WRONG_DIM_HEADS: {"concept": "softmax_heads"},
        WRONG_DIM_BATCH: {"concept": "softmax_batch"},
        VALUES_FROM_KEY: {"inputs": "qkk"},
        KEYS_FROM_VALUE: {"inputs": "qvv"},
    }
    if mask is not None:
        switches[MASK_INVERTED] = {"concept": "mask_inverted"}
    variants = {}
    for mistake, how in switches.items():
        try:
            variants[mistake] = reference_mha(*args, **how)
        except RuntimeError:  # the mistake cannot run on these shapes (query and key swapped, Lq != Lk, a mask)
            continue

    def differs(a, b):
        return a.shape != b.shape or not torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)

    def predicts(t, right):
        return t.shape == right.shape and differs(t, right) and bool(torch.isfinite(t).any())

    no_weights = {MISSING_W_O, VIEW_MERGE}  # mistakes after the softmax leave the weights right
    outputs = {m: out for m, (out, _w) in variants.items() if predicts(out, right_out)}
    weights = {m: w for m, (_out, w) in variants.items() if m not in no_weights and predicts(w, right_w)}
    weights[AVERAGE_WEIGHTS] = right_w.mean(dim=1)
    return outputs, weights


def _random_params(g: torch.Generator, d_model: int, bias: bool) -> dict[str, torch.Tensor]:
    params = {}
    for name in ("W_q", "W_k", "W_v", "W_o"):
        params[f"{name}.weight"] = torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
        if bias:
            params[f"{name}.bias"] = torch.randn(d_model, generator=g) * 0.1
    return params


def make_references() -> dict[str, torch.Tensor]:
    """Hidden inputs and the expected outputs; `attn references 04_multi_head_attention` stores them."""
    g = torch.Generator().manual_seed(40404)
    refs: dict[str, torch.Tensor] = {}
    x = torch.randn(2, 5, 12, generator=g)
    refs["split_heads.x"] = x
    refs["split_heads.out"] = reference_split_heads(x, 3)
    heads = torch.randn(2, 3, 5, 4, generator=g)
    refs["merge_heads.x"] = heads
    refs["merge_heads.out"] = reference_merge_heads(heads)
    # MultiHeadAttention(12, 3): cross-attention, Lq = 4 != Lk = 6, key != value, a padding mask (B, 1, 1, Lk).
    params = _random_params(g, 12, bias=True)
    query = torch.randn(2, 4, 12, generator=g)
    key = torch.randn(2, 6, 12, generator=g)
    value = torch.randn(2, 6, 12, generator=g)
    mask = (torch.arange(6) < torch.tensor([6, 4])[:, None])[:, None, None, :]  # (B, 1, 1, Lk)
    out, weights = reference_mha(params, query, key, value, mask, 3)
    refs.update({f"MultiHeadAttention.{k}": v for k, v in params.items()})
    refs.update(
        {
            "MultiHeadAttention.query": query,
            "MultiHeadAttention.key": key,
            "MultiHeadAttention.value": value,
            "MultiHeadAttention.mask": mask,
            "MultiHeadAttention.out": out,
            "MultiHeadAttention.weights": weights,
        }
    )
    return refs


# -- hidden tests --------------------------------------------------------------------------------------
def _split_mistakes(x: torch.Tensor, h: int) -> dict:
    """The split mistakes that predict something here (with one feature per head, the strided split is right)."""
    right = reference_split_heads(x, h)
    wrong = {VIEW_SPLIT: reference_split_heads(x, h, transpose=False),
             STRIDED_SPLIT: reference_split_heads(x, h, strided=True)}
    return {m: t for m, t in wrong.items() if not torch.equal(t, right)}


def test_split_heads(check, refs, split_heads):
    with check("matches the reference on a hidden input (B=2, L=5, D=12, h=3)", weight=2):
        x = refs["split_heads.x"]
        check.close(
            split_heads(x.clone(), 3), refs["split_heads.out"], "split_heads(x, 3)",
            mistakes=_split_mistakes(x, 3),
        )
    with check("fresh random inputs of several shapes (h = 2, 5, 20: down to one feature per head)"):
        for B, L, D, h in [(3, 7, 20, 2), (1, 9, 20, 5), (2, 3, 20, 20)]:
            with check.case():
                x = torch.randn(B, L, D)
                check.close(
                    split_heads(x.clone(), h), reference_split_heads(x, h),
                    _("split_heads(x of shape {shape}, {h})").format(shape=(B, L, D), h=h),
                    mistakes=_split_mistakes(x, h),
                )
    with check("one head: split_heads(x, 1) is x with a head axis of size 1"):
        x = torch.randn(2, 6, 8)
        check.close(split_heads(x.clone(), 1), x.unsqueeze(1), "split_heads(x, 1)")
    with check("merging back gives x again (split then merge is the identity)"):
        x = torch.randn(2, 11, 24)
        check.close(
            reference_merge_heads(split_heads(x.clone(), 6)), x, "merge(split_heads(x, 6))",
            mistakes={VIEW_SPLIT: reference_merge_heads(reference_split_heads(x, 6, transpose=False)),
                      STRIDED_SPLIT: reference_merge_heads(reference_split_heads(x, 6, strided=True))},
        )
    with check("keeps the input's dtype (float64 in, float64 out)", weight=0.5):
        x = torch.randn(2, 5, 12, dtype=torch.float64)
        check.close(split_heads(x.clone(), 3), reference_split_heads(x, 3), "split_heads(x in float64, 3)",
                    mistakes=_split_mistakes(x, 3))
    with check("a width that heads cannot share evenly (D=10, h=4) raises ValueError with a message"):
        try:
            split_heads(torch.randn(2, 3, 10), 4)
        except ValueError as exc:
            check.true(str(exc).strip(), "the ValueError should say why (D is not divisible by num_heads).")
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise CheckFailure(_("expected a ValueError that explains the problem, got {error}: {message}").format(
                error=type(exc).__name__, message=exc)) from None
        else:
            raise CheckFailure(_("split_heads(x of width 10, num_heads=4) returned instead of raising ValueError."))


def test_merge_heads(check, refs, merge_heads):
    # A merge written as the inverse of the strided split, permute(0, 2, 3, 1), is left to the generic diagnosis
    # ("two axes merged in the opposite order"), which says exactly what it does.
    def mistakes(x):
        return {
            VIEW_MERGE: reference_merge_heads(x, transpose=False),
            AVERAGE_MERGE: reference_merge_heads(x, average=True),
        }

    with check("matches the reference on a hidden input (B=2, h=3, L=5, d=4)", weight=2):
        x = refs["merge_heads.x"]
        check.close(merge_heads(x.clone()), refs["merge_heads.out"], "merge_heads(x)", mistakes=mistakes(x))
    with check("fresh random inputs of several shapes, including a non-contiguous one"):
        for B, h, L, d in [(3, 4, 7, 5), (1, 8, 2, 3)]:
            with check.case():
                x = torch.randn(B, h, L, d)
                check.close(merge_heads(x.clone()), reference_merge_heads(x),
                            _("merge_heads(x of shape {shape})").format(shape=(B, h, L, d)),
                            mistakes=mistakes(x))
        x = torch.randn(2, 6, 3, 5).transpose(1, 2)  # (B=2, h=3, L=6, d=5), not contiguous
        check.close(merge_heads(x), reference_merge_heads(x), "merge_heads(a transposed tensor)", mistakes=mistakes(x))
    with check("one head: merge_heads of (B, 1, L, d) is the (B, L, d) inside"):
        x = torch.randn(2, 1, 6, 8)
        check.close(merge_heads(x.clone()), x[:, 0], "merge_heads(x with h=1)")
    with check("keeps the input's dtype (float64 in, float64 out)", weight=0.5):
        x = torch.randn(2, 3, 5, 4, dtype=torch.float64)
        check.close(merge_heads(x.clone()), reference_merge_heads(x), "merge_heads(x in float64)", mistakes=mistakes(x))
    with check("undoes the split: merge_heads(split(x)) == x"):
        for h in (2, 3, 12):
            with check.case():
                x = torch.randn(2, 9, 12)
                heads = reference_split_heads(x, h)
                check.close(merge_heads(heads), x, f"merge_heads(split(x, {h}))", mistakes=mistakes(heads))


def _build(cls, d_model: int, num_heads: int, bias: bool = True):
    module = cls(d_model, num_heads, bias=bias)
    if not isinstance(module, nn.Module):
        raise CheckFailure(_("{what} should be an nn.Module, got {type}.").format(what="MultiHeadAttention",
                                                                                  type=type(module).__name__))
    return module


def _load(module, params: dict[str, torch.Tensor]) -> None:
    """Load the test's weights; with bias=False, a bias the module should not have is an error too."""
    extra = sorted(k for k in module.state_dict() if k.startswith(("W_q.", "W_k.", "W_v.", "W_o.")) and k not in params)
    if extra:
        raise CheckFailure(_("unexpected parameter(s) {extra}: with bias=False the four nn.Linear layers have no "
                             "bias.").format(extra=extra))
    load_weights(module, params, N_("W_q, W_k, W_v, W_o, each nn.Linear(d_model, d_model, bias=bias)"))


def _run(module, query, key, value, mask):
    return expect_pair(module(query, key, value, mask=mask), "MultiHeadAttention.forward")


def _compare(check, module, params, query, key, value, mask, num_heads, out_ref, w_ref, what, **tol):
    out, weights = _run(module, query, key, value, mask)
    cache: list = []

    def wrong(i: int) -> dict:  # computed once, and only for a wrong answer
        if not cache:
            cache.append(mha_mistakes(params, query, key, value, mask, num_heads))
        return cache[0][i]

    check.close(out, out_ref, _("output ({what})").format(what=_(what)), mistakes=lambda: wrong(0), **tol)
    check.close(weights, w_ref, _("weights ({what})").format(what=_(what)), mistakes=lambda: wrong(1), **tol)


def params_from_torch(reference: nn.MultiheadAttention) -> dict[str, torch.Tensor]:
    """The state dict of our module that holds the same weights as torch's module (06's grader uses it too)."""
    W_q, W_k, W_v = reference.in_proj_weight.detach().chunk(3)
    params = {"W_q.weight": W_q, "W_k.weight": W_k, "W_v.weight": W_v, "W_o.weight": reference.out_proj.weight.detach()}
    if reference.in_proj_bias is not None:
        b_q, b_k, b_v = reference.in_proj_bias.detach().chunk(3)
        params.update({"W_q.bias": b_q, "W_k.bias": b_k, "W_v.bias": b_v, "W_o.bias": reference.out_proj.bias.detach()})
    return {k: v.clone() for k, v in params.items()}


def _against_torch(check, cls, *, B, Lq, Lk, d_model, num_heads, bias, mask_kind, self_attention, **tol):
    reference = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    for p in reference.parameters():  # torch starts its biases at zero: make them matter
        nn.init.normal_(p, std=1 / math.sqrt(d_model))
    module = _build(cls, d_model, num_heads, bias)
    params = params_from_torch(reference)
    _load(module, params)
    query = torch.randn(B, Lq, d_model)
    key = query if self_attention else torch.randn(B, Lk, d_model)
    value = query if self_attention else torch.randn(B, Lk, d_model)
    if mask_kind == "causal":
        mask = torch.ones(Lq, Lk, dtype=torch.bool).tril()  # (Lq, Lk)
    elif mask_kind == "padding":
        lengths = torch.randint(1, Lk + 1, (B,))
        lengths[0] = Lk
        mask = (torch.arange(Lk) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, Lk)
    else:
        mask = None
    attn_mask = None
    if mask is not None:  # torch's boolean attn_mask means the opposite: True = may NOT attend
        attn_mask = (~mask).expand(B, num_heads, Lq, Lk).reshape(B * num_heads, Lq, Lk)
    with torch.no_grad():
        out_ref, w_ref = reference(query, key, value, attn_mask=attn_mask, need_weights=True,
                                   average_attn_weights=False)
        _compare(check, module, params, query, key, value, mask, num_heads, out_ref, w_ref,
                 N_("compared with torch.nn.MultiheadAttention"), **tol)


def _test_multi_head_attention(check, refs, MultiHeadAttention):
    with check("supplied weights reproduce stored outputs (cross-attention Lq != Lk, key != value, padding mask)", weight=2):
        params = {k.removeprefix("MultiHeadAttention."): v for k, v in refs.items()
                  if k.startswith("MultiHeadAttention.W_")}
        module = _build(MultiHeadAttention, 12, 3)
        _load(module, params)
        q, k, v = (refs[f"MultiHeadAttention.{n}"] for n in ("query", "key", "value"))
        mask = refs["MultiHeadAttention.mask"]
        with torch.no_grad():
            _compare(check, module, params, q, k, v, mask, 3, refs["MultiHeadAttention.out"],
                     refs["MultiHeadAttention.weights"], N_("hidden cross-attention input"))
    with check("matches torch.nn.MultiheadAttention: self-attention, no mask"):
        _against_torch(check, MultiHeadAttention, B=2, Lq=7, Lk=7, d_model=16, num_heads=4, bias=True,
                       mask_kind=None, self_attention=True)
    with check("matches torch.nn.MultiheadAttention: cross-attention (Lq=3, Lk=8), padding mask, bias=False"):
        _against_torch(check, MultiHeadAttention, B=3, Lq=3, Lk=8, d_model=24, num_heads=6, bias=False,
                       mask_kind="padding", self_attention=False)
    with check("matches torch.nn.MultiheadAttention: causal (Lq, Lk) mask, larger input (B=2, L=40, d_model=64, h=8)"):
        _against_torch(check, MultiHeadAttention, B=2, Lq=40, Lk=40, d_model=64, num_heads=8, bias=True,
                       mask_kind="causal", self_attention=True, atol=2e-5)
    with check("matches torch.nn.MultiheadAttention: cross-attention with Lq = Lk, query, key and value all different, causal mask"):
        _against_torch(check, MultiHeadAttention, B=2, Lq=6, Lk=6, d_model=16, num_heads=4, bias=True,
                       mask_kind="causal", self_attention=False)
    with check("matches torch.nn.MultiheadAttention with a single head (d_k = d_model)"):
        _against_torch(check, MultiHeadAttention, B=2, Lq=5, Lk=6, d_model=8, num_heads=1, bias=True,
                       mask_kind="padding", self_attention=False)
    with check("in float64 (module.double() and float64 inputs) the output and the weights are float64", weight=0.5):
        params = {k: v.double() for k, v in _random_params(torch.Generator().manual_seed(4), 12, bias=True).items()}
        module = _build(MultiHeadAttention, 12, 3)
        _load(module, {k: v.float() for k, v in params.items()})
        module.double()
        query, key = torch.randn(2, 4, 12, dtype=torch.float64), torch.randn(2, 6, 12, dtype=torch.float64)
        mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2)
        params = {k: v.float().double() for k, v in params.items()}  # what the module holds after the round trip
        out_ref, w_ref = reference_mha(params, query, key, key, mask, 3)
        with torch.no_grad():
            _compare(check, module, params, query, key, key, mask, 3, out_ref, w_ref, N_("float64"))
    with check("d_model not divisible by num_heads (10, 4) raises ValueError"):
        try:
            MultiHeadAttention(10, 4)
        except ValueError:
            pass
        except NotImplementedError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise CheckFailure(_("expected a ValueError that explains the problem, got {error}: {message}").format(
                error=type(exc).__name__, message=exc)) from None
        else:
            raise CheckFailure(_("MultiHeadAttention(10, 4) was built: 10 features cannot be shared by 4 heads."))


def _torch_count(d_model: int, num_heads: int, bias: bool) -> int:
    with torch.device("meta"):  # no memory, no initialisation: only the shapes
        module = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True)
    return sum(p.numel() for p in module.parameters())


def test_mha_parameter_count(check, refs, mha_parameter_count):
    with check("returns a Python int", weight=0.5):
        n = mha_parameter_count(16, 4, bias=True)
        check.true(isinstance(n, int) and not isinstance(n, bool),
                   _("expected an int, got {type}.").format(type=type(n).__name__))
    with check("equals the parameter count of torch.nn.MultiheadAttention, with and without bias", weight=2):
        for d_model, h, bias in [(16, 4, True), (16, 4, False), (64, 8, True), (30, 5, False), (512, 1, True)]:
            n = mha_parameter_count(d_model, h, bias=bias)
            want = _torch_count(d_model, h, bias)
            wrong = {COUNT_NO_W_O: 3 * d_model * d_model + 3 * d_model * bias}
            if bias:
                wrong[COUNT_NO_BIAS] = 4 * d_model * d_model
            if h > 1:
                wrong[COUNT_PER_HEAD] = h * want
            check.equal(n, want, _("mha_parameter_count({d_model}, {h}, bias={bias}) returned {n}, which is not the "
                                   "number of parameters of torch.nn.MultiheadAttention with that "
                                   "configuration.").format(d_model=d_model, h=h, bias=bias, n=n), wrong,
                        count_diagnosis(n, want, {_("d_model² (one weight matrix)"): d_model * d_model,
                                                  _("d_model (one bias vector)"): d_model}))
    with check("does not depend on the number of heads"):
        counts = {h: mha_parameter_count(96, h, bias=True) for h in (1, 2, 3, 4, 6, 8, 12)}
        check.true(len(set(counts.values())) == 1,
                   _("d_model=96 gave different counts for different h: {counts}. Splitting d_model into heads cuts "
                     "the same four matrices into slices; it adds no parameters.").format(counts=counts))
    with check("a LLaMA-7B sized layer (d_model=4096, 32 heads, no bias)"):
        n = mha_parameter_count(4096, 32, bias=False)
        check.true(n == _torch_count(4096, 32, False),
                   _("mha_parameter_count(4096, 32, bias=False) returned {n}.").format(n=n))


# -- load_gpt2_attention -----------------------------------------------------------------------------------
_PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")


def _gpt2_weights(d: int) -> tuple[torch.Tensor, ...]:
    """Random GPT-2-shaped weights (every bias nonzero): c_attn (d, 3d) and (3d,), c_proj (d, d) and (d,)."""
    return (torch.randn(d, 3 * d) / math.sqrt(d), torch.randn(3 * d) * 0.5 + 0.1,
            torch.randn(d, d) / math.sqrt(d), torch.randn(d) * 0.5 + 0.1)


def _module_params(module) -> dict[str, torch.Tensor]:
    params = {}
    for name in _PROJECTIONS:
        layer = getattr(module, name)
        params[f"{name}.weight"] = layer.weight.detach()
        params[f"{name}.bias"] = layer.bias.detach()
    return params


def _gpt2_mistakes(weights, before: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> dict:
    """{Mistake: the state dict that mistake loads}. The order of q, k, v is offered as the learner's own order, when
    their three projections hold three different blocks of c_attn (so a swap is named whichever swap it is)."""
    import itertools

    biases = {k: v for k, v in before.items() if k.endswith(".bias")}
    wrong = {
        GPT2_NOT_TRANSPOSED: gpt2_params(*weights, transpose_attn=False, transpose_proj=False),
        GPT2_ATTN_NOT_TRANSPOSED: gpt2_params(*weights, transpose_attn=False),
        GPT2_PROJ_NOT_TRANSPOSED: gpt2_params(*weights, transpose_proj=False),
        GPT2_WRONG_SPLIT: gpt2_params(*weights, rows=True),
        GPT2_NO_BIAS: gpt2_params(*weights, biases=biases),
        GPT2_NOT_IN_PLACE: dict(before),
    }
    for order in itertools.permutations(range(3)):
        if order == (0, 1, 2):
            continue
        swapped = gpt2_params(*weights, order=order)
        if all(got[f"{n}.weight"].shape == swapped[f"{n}.weight"].shape
               and torch.allclose(got[f"{n}.weight"], swapped[f"{n}.weight"], atol=1e-6) for n in ("W_q", "W_k", "W_v")):
            wrong[GPT2_QKV_ORDER] = swapped
            break
    return wrong


def _port(check, load_gpt2_attention, d: int, n_heads: int):
    """The course's MultiHeadAttention (not the learner's: a bug there costs points there), GPT-2 weights ported
    into it by the learner's function; returns (module, what came back, the weights, the module's state before)."""
    module = local_object(load_gpt2_attention, LocalPart("multi_head_attention"))(d, n_heads)
    before = _module_params(module)
    weights = _gpt2_weights(d)
    returned = load_gpt2_attention(module, *(w.clone() for w in weights))
    return module, returned, weights, before


def _offered(wrong: dict, key: str, right: torch.Tensor) -> dict:
    """The mistakes that predict something other than the right value for this one tensor."""
    return {m: p[key] for m, p in wrong.items()
            if p[key].shape != right.shape or not torch.allclose(p[key], right, atol=1e-6)}


def _holds(key: str, got: torch.Tensor, weights) -> str:
    """`key`, saying which block of c_attn it holds when that is one of GPT-2's other blocks (or turned the other way):
    the learner reads which projection got what."""
    c_attn_weight, c_attn_bias = weights[0], weights[1]
    d = c_attn_weight.shape[0]
    names = (N_("queries"), N_("keys"), N_("values"))
    blocks = c_attn_weight.split(d, dim=-1) if key.endswith(".weight") else c_attn_bias.split(d)
    own = {"W_q": 0, "W_k": 1, "W_v": 2}.get(key.split(".")[0])
    for i, block in enumerate(blocks):
        for turned in ((True, False) if key.endswith(".weight") else (False,)):
            candidate = block.T if turned else block
            if (i, turned) == (own, key.endswith(".weight")) or got.shape != candidate.shape:
                continue
            if torch.allclose(got, candidate, atol=1e-6):
                if not key.endswith(".weight"):
                    return _("{key} (it holds the {block} part of c_attn_bias)").format(key=key, block=_(names[i]))
                how = _("turned the nn.Linear way") if turned else _("as GPT-2 stores it, (in, out)")
                return _("{key} (it holds the {block} block of c_attn_weight, {how})").format(
                    key=key, block=_(names[i]), how=how)
    return key


def test_load_gpt2_attention(check, refs, load_gpt2_attention):
    configs = [(24, 4, 2, 7), (12, 3, 3, 5), (16, 1, 2, 6)]  # (d, n_heads, B, L): the largest first
    with check("the ported module computes GPT-2's causal attention (hidden random weights, several d and n_heads, "
               "nonzero biases)", weight=2):
        for d, n_heads, B, L in configs:
            with check.case():
                module, _returned, weights, before = _port(check, load_gpt2_attention, d, n_heads)
                got = _module_params(module)
                x = torch.randn(B, L, d)
                causal = torch.ones(L, L, dtype=torch.bool).tril()
                with torch.no_grad():
                    out, _w = expect_pair(module(x, x, x, mask=causal), "MultiHeadAttention.forward")
                wrong = _gpt2_mistakes(weights, before, got)
                check.close(out, reference_gpt2_attention(x, *weights, n_heads),
                            _("output of the ported module (d={d}, {h} heads)").format(d=d, h=n_heads),
                            mistakes=lambda: {m: reference_mha(p, x, x, x, causal, n_heads)[0]
                                              for m, p in wrong.items()})
    with check("each of W_q, W_k, W_v, W_o holds its own part of GPT-2's weights (weight and bias)"):
        d, n_heads = 12, 3
        module, _returned, weights, before = _port(check, load_gpt2_attention, d, n_heads)
        got = _module_params(module)
        right = gpt2_params(*weights)
        wrong = _gpt2_mistakes(weights, before, got)
        for name in _PROJECTIONS:
            for part in ("weight", "bias"):
                with check.case():
                    key = f"{name}.{part}"
                    check.close(got[key], right[key], _holds(key, got[key], weights),
                                mistakes=_offered(wrong, key, right[key]))
    with check("returns the module it was given, filled in place", weight=0.5):
        module, returned, weights, _before = _port(check, load_gpt2_attention, 8, 2)
        check.true(isinstance(returned, nn.Module),
                   _("load_gpt2_attention returned {type}; return the module it was given (filled in).").format(
                       type=type_name(returned)))
        ported = gpt2_params(*weights)
        check.close(_module_params(module)["W_o.weight"], ported["W_o.weight"], "W_o.weight of the module passed in")
        check.close(_module_params(returned)["W_o.weight"], ported["W_o.weight"], "W_o.weight of the module returned")
    with check("copies values into the module's own parameters: given float64 weights, they stay float32", weight=0.5):
        module = local_object(load_gpt2_attention, LocalPart("multi_head_attention"))(8, 2)
        weights = _gpt2_weights(8)
        load_gpt2_attention(module, *(w.double() for w in weights))
        got = _module_params(module)
        changed = sorted(k for k, v in got.items() if v.dtype != torch.float32)
        check.true(not changed, _("after porting float64 weights, {names} are no longer float32: the port replaced the "
                                  "module's parameters with the caller's tensors (or new ones) instead of copying the "
                                  "values into them; load_state_dict or copy_ keep the module's own dtype and "
                                  "memory.").format(names=", ".join(changed)))
        right = {k: v.float() for k, v in gpt2_params(*(w.double() for w in weights)).items()}
        for key in ("W_q.weight", "W_o.weight"):
            check.close(got[key].float(), right[key], key)
    with check("the module still trains: gradients reach every ported weight", weight=0.5):
        module, _returned, _weights, _before = _port(check, load_gpt2_attention, 8, 2)
        x = torch.randn(2, 4, 8)
        out, _w = expect_pair(module(x, x, x), "MultiHeadAttention.forward")
        frozen = _("no gradient reached {name}.weight after the port: copy the values into the module's own "
                   "parameters (under torch.no_grad(), or with load_state_dict) and leave them requiring grad, rather "
                   "than replacing or freezing them.")
        check.true(bool(out.requires_grad), frozen.format(name="W_o"))
        out.sum().backward()
        for name in _PROJECTIONS:
            grad = getattr(module, name).weight.grad
            check.true(isinstance(grad, torch.Tensor) and bool(grad.abs().sum() > 0), frozen.format(name=name))


def test_multi_head_attention(check, refs, MultiHeadAttention):
    """Graded on its own: the split_heads and merge_heads it calls are the reference ones (their bugs cost points there)."""
    def split_heads(x, num_heads):
        return reference_split_heads(x, num_heads)

    def merge_heads(x):
        return reference_merge_heads(x)

    with standing_in(MultiHeadAttention, split_heads=split_heads, merge_heads=merge_heads):
        _test_multi_head_attention(check, refs, MultiHeadAttention)


def _reference_heads():
    def split_heads(x, num_heads):
        return reference_split_heads(x, num_heads)

    def merge_heads(x):
        return reference_merge_heads(x)

    return {"split_heads": split_heads, "merge_heads": merge_heads}


# While grading, the visible checks of a composite exercise run with these parts standing in for the learner's
# (utils.engine.checking.GradingContext), as its hidden tests do: a bug in a part costs points in that part only.
STAND_INS = {"MultiHeadAttention": _reference_heads}

HIDDEN_TESTS = {
    "split_heads": test_split_heads,
    "merge_heads": test_merge_heads,
    "MultiHeadAttention": test_multi_head_attention,
    "load_gpt2_attention": test_load_gpt2_attention,
    "mha_parameter_count": test_mha_parameter_count,
}
