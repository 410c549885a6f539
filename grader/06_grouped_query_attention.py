"""Hidden tests of 06_grouped_query_attention: reference GQA and cached decoding, the mistake catalogue, references."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils.attention_variants import undefined_as as _undefined_as
from utils.diagnose import count_diagnosis
from utils.grading import (
    CheckFailure,
    CheckTimeout,
    LocalPart,
    Mistake,
    expect_pair,
    load_grader,
    load_weights,
    local_object,
    standing_in,
)
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

NOTEBOOK = "06_grouped_query_attention"
FAMILY = N_("2. One family: MHA, GQA, MQA")
TILING = N_("2.1 Tiling is not grouping")
CACHE = N_("5. The KV cache")
ROPE = N_("5.2 The cache and rotary positions")
BYTES = N_("7. How big is the cache of a real model?")
GQA = N_("3. Grouped-query attention")

# -- the mistake catalogue ----------------------------------------------------------------------------
TILED = Mistake(
    "repeat (tiling) instead of repeat_interleave",
    "x.repeat(1, n_rep, 1, 1) lays the KV heads out as 0, 1, ..., 0, 1, ... so query head i reads KV head "
    "i % num_kv_heads; in a group, consecutive query heads share one KV head (i // n_rep): 0, 0, ..., 1, 1, ... "
    "The shapes agree, so nothing fails, but a pretrained or converted checkpoint pairs every query head with "
    "the wrong keys",
    TILING,
)
OTHER_AXIS = Mistake(
    "copies along the wrong axis",
    "the copies were made along another dim than the heads (dim 1 of (B, h_kv, L, d_k)): the batch, the positions "
    "or the width grew n_rep times instead of the number of heads; repeat_interleave(n_rep, dim=1)",
    FAMILY,
)
WRONG_DIM = Mistake(
    "cache concatenated on the wrong dim",
    "the new keys and values were appended along an axis other than the sequence axis (dim 2 of "
    "(B, h_kv, L, d_k)); the cache then grows in batch, heads or width instead of in length, and the next "
    "query sees the wrong number of keys",
    CACHE,
)
RETURNS_NEW = Mistake(
    "update returns only the new keys and values",
    "update must store the new keys and values and return everything cached so far, (B, h_kv, t, d_k); returning "
    "only k_new and v_new leaves the new query with its own key alone, as if there were no cache",
    CACHE,
)
NO_CACHE_READ = Mistake(
    "new query attends only to itself",
    "after cache.update(k, v) the attention used the new token's own keys and values instead of the tensors "
    "update returned, so each new token attends to itself alone (one key, weight 1) and never reads the cache",
    CACHE,
)
POSITIONS_RESTART = Mistake(
    "positions restarting at 0",
    "with a cache, the new tokens continue the sequence: their positions are len(cache), len(cache) + 1, ... "
    "Rotating every new query and key as if it stood at position 0 gives each cached key the same rotation, "
    "so the scores no longer see order",
    ROPE,
)
ROTATED_TWICE = Mistake(
    "cached keys rotated again",
    "the keys that update returned were rotated once more by their positions, though each was rotated when it was "
    "new and the cache kept that rotation: every key but the newest is rotated twice, by twice its angle, and the "
    "scores no longer depend on the distance alone. Rotate the new keys once, before they go into the cache",
    ROPE,
)
FORGETS_PROMPT = Mistake(
    "the cache forgets the prompt",
    "the first update (the prompt) was returned but not kept: every later update returns the tokens fed after the "
    "prompt only, so each new token attends to them and not to the prompt. The first update is stored like any other",
    CACHE,
)
ROPE_ON_VALUES = Mistake(
    "RoPE applied to the values",
    "RoPE rotates the queries and the keys, whose dot product then depends on m - n; the values are read, not "
    "compared, and stay as they are. Rotated values carry their position into the output, and unrotated keys "
    "leave the scores blind to order",
    GQA,
)
CACHE_REPEATED = Mistake(
    "repeated heads stored in the cache",
    "the keys and values go into the cache as num_kv_heads heads, (B, h_kv, L, d_k), and are repeated for the "
    "query heads only after it is read: repeat_kv before cache.update stores every KV head n_rep times, and the "
    "cache is as large as multi-head attention's, which is what GQA exists to avoid",
    CACHE,
)
LEN_AXIS = Mistake(
    "len(cache) reads the wrong axis",
    "the number of cached positions is the size of the sequence axis, dim 2 of (B, h_kv, t, d_k); another axis "
    "gives the batch, the heads or the width",
    CACHE,
)
NOT_STORED = Mistake(
    "update does not store what it appends",
    "update returned the old cache joined with the new keys and values but did not keep the result: the cache never "
    "grows past its first update, so each later step sees the prompt and itself and none of the tokens between, and "
    "len(cache) stays where the prompt left it. Store the joined tensors, then return them",
    CACHE,
)
LEN_COUNTS_UPDATES = Mistake(
    "len(cache) counts the updates",
    "len(cache) must be the number of cached positions, the position of the next token; counting the calls of "
    "update gives 1 after a prompt of any length, so every token after the prompt is placed too early",
    CACHE,
)
VALUES_GET_KEYS = Mistake(
    "new keys appended to the value cache",
    "the value cache was extended with the new keys (k_new) instead of the new values: a copy-paste slip in update",
    CACHE,
)
NO_SCALE = Mistake(
    "no 1/sqrt(d_k) scaling",
    "the raw dot products q . k went into the softmax; their spread grows like sqrt(d_k), so the softmax "
    "saturates towards a one-hot choice (notebook 02). Divide the scores by sqrt(d_k), the width of one head",
    GQA,
)
SCALE_DK = Mistake(
    "scaling by 1/d_k",
    "the scores were divided by d_k instead of sqrt(d_k); that shrinks their variance to 1/d_k, so the wider "
    "the heads, the closer every row of weights gets to a uniform average (notebook 02)",
    GQA,
)
MASK_INVERTED = Mistake(
    "mask polarity inverted",
    "the scores were set to -inf where the mask is True; in this course True means 'may attend', so fill "
    "where the mask is False (~mask). With a causal mask each query then reads only the future, and the last "
    "query, which may read everything, has nothing left (0/0)",
    GQA,
)
MASK_IGNORED = Mistake(
    "mask not applied",
    "the mask argument was not used: with a causal mask every query also read the tokens after it, and with "
    "padding every query read the padding. Fill the scores with -inf where the mask is False, before the softmax",
    GQA,
)
SHARED_KV = Mistake(
    "one projection for keys and values",
    "the keys and the values came from the same projection (W_k, or W_v, used twice); they are two different "
    "learned maps of x, k = x W_K to be compared with the queries and v = x W_V to be averaged",
    GQA,
)
SWAPPED_QK = Mistake(
    "queries and keys swapped",
    "the scores were k @ q^T instead of q @ k^T, so row i of the weights belongs to key i, and the softmax "
    "normalises over the queries; with a causal mask query i then reads the tokens after it",
    GQA,
)
# Each explanation is written out in full, so that the catalogue of translations holds it as one sentence.
VIEW_Q = Mistake(
    "view without transpose",
    "the queries were split with a bare view: a (B, L, d_model) projection split by .view(B, heads, L, d_k) without "
    "the transpose mixes positions and features (notebook 04's silent bug); split with .view(B, L, heads, "
    "d_k).transpose(1, 2)",
    GQA,
)
VIEW_KV = Mistake(
    "view without transpose",
    "the keys and values were split with a bare view: a (B, L, d_model) projection split by .view(B, heads, L, d_k) "
    "without the transpose mixes positions and features (notebook 04's silent bug); split with .view(B, L, heads, "
    "d_k).transpose(1, 2)",
    GQA,
)
VIEW_QKV = Mistake(
    "view without transpose",
    "queries, keys and values were split with a bare view: a (B, L, d_model) projection split by .view(B, heads, L, "
    "d_k) without the transpose mixes positions and features (notebook 04's silent bug); split with .view(B, L, "
    "heads, d_k).transpose(1, 2)",
    GQA,
)
VIEW_MERGE = Mistake(
    "view without transpose",
    "the heads (B, h, L, d_k) were merged by a reshape to (B, L, h·d_k) without first moving the head axis next to "
    "d_k (.transpose(1, 2)), which mixes positions and features (notebook 04's silent bug)",
    GQA,
)
NO_FACTOR_2 = Mistake(
    "bytes without the factor 2 (K and V)",
    "the cache holds keys AND values: two tensors of (num_layers, batch, num_kv_heads, seq_len, head_dim) "
    "elements, so the count needs a factor 2",
    BYTES,
)
DTYPE_IGNORED = Mistake(
    "the dtype argument ignored",
    "the bytes per element come from dtype: 4 for float32, 2 for float16 and bfloat16, 1 for int8 "
    "(torch.tensor([], dtype=dtype).element_size()); a constant gives the right count for one dtype only",
    BYTES,
)
WINDOW_IGNORED = Mistake(
    "the window ignored",
    "with a sliding window of W positions the cache keeps only the last W tokens of each sequence (a rolling "
    "buffer), so past W tokens it stops growing: the positions kept are min(seq_len, window)",
    BYTES,
)
WINDOW_ALWAYS = Mistake(
    "the window counted as the length",
    "a sequence shorter than the window keeps all of its tokens, not window positions: the positions kept are "
    "min(seq_len, window), and the window only caps a long sequence",
    BYTES,
)
NO_LAYERS = Mistake(
    "bytes without the layer count",
    "every layer has its own keys and values, so the cache of one layer is multiplied by num_layers",
    BYTES,
)


# -- reference implementations (instructor side only) ------------------------------------------------
def reference_repeat_kv(x: torch.Tensor, n_rep: int, *, tile: bool = False) -> torch.Tensor:
    """(B, h_kv, L, d) -> (B, h_kv * n_rep, L, d): head i is KV head i // n_rep (or i % h_kv when tiled)."""
    return x.repeat(1, n_rep, 1, 1) if tile else x.repeat_interleave(n_rep, dim=1)


def reference_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding, pairing dimension i with i + d/2 (notebook 05's apply_rope); float64 inside."""
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)  # (d/2,)
    angle = positions.to(torch.float64)[:, None] * theta  # (L, d/2)
    cos, sin = angle.cos(), angle.sin()
    xd = x.to(torch.float64)
    x1, x2 = xd[..., : d // 2], xd[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def _linear(params: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))


def _project(params, x, num_heads, num_kv_heads, shared_kv=False, bare_view=""):
    """q (B, h, L, d_k), k and v (B, h_kv, L, d_k) from x (B, L, d_model); shared_kv: v from W_k, and bare_view
    ("q", "kv" or "qkv"): those split by .view(B, heads, L, d_k) without the transpose (mistakes)."""
    B, L, d_model = x.shape
    d_k = d_model // num_heads

    def split(t, heads, role):
        return t.view(B, heads, L, d_k) if role in bare_view else t.view(B, L, heads, d_k).transpose(1, 2)

    q = split(_linear(params, "W_q", x), num_heads, "q")
    k = split(_linear(params, "W_k", x), num_kv_heads, "k")
    v = split(_linear(params, "W_k" if shared_kv else "W_v", x), num_kv_heads, "v")
    return q, k, v


def _attend(params, q, k, v, mask, num_heads, num_kv_heads, tile, scale="sqrt", mask_mode="ok", swap=False,
            merge_view=False):
    """The attention and W_o; `scale` ("sqrt", "none", "d_k"), `mask_mode` ("ok", "inverted", "ignored") and
    `swap` (k @ q^T) reproduce the catalogued mistakes."""
    n_rep = num_heads // num_kv_heads
    k, v = reference_repeat_kv(k, n_rep, tile=tile), reference_repeat_kv(v, n_rep, tile=tile)
    d_k = q.shape[-1]
    raw = k @ q.transpose(-2, -1) if swap else q @ k.transpose(-2, -1)  # (B, h, Lq, Lk)
    scores = raw / {"sqrt": math.sqrt(d_k), "none": 1.0, "d_k": d_k}[scale]
    if mask is not None and mask_mode != "ignored":
        scores = scores.masked_fill(mask if mask_mode == "inverted" else ~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    B, h, Lq, d_k = q.shape
    heads = weights @ v  # (B, h, Lq, d_k)
    merged = heads.reshape(B, Lq, h * d_k) if merge_view else heads.transpose(1, 2).reshape(B, Lq, h * d_k)
    out = _linear(params, "W_o", merged)
    return out, weights


def reference_gqa(params, x, mask, num_heads, num_kv_heads, *, rope=False, tile=False, shared_kv=False,
                  bare_view="", rope_values=False, **how):
    """One full pass of grouped-query self-attention from a state dict: (output, weights).

    The switches (tile, shared_kv, bare_view, and _attend's scale, mask_mode, swap, merge_view) reproduce the
    catalogued mistakes."""
    q, k, v = _project(params, x, num_heads, num_kv_heads, shared_kv, bare_view)
    if rope:
        positions = torch.arange(x.shape[1])
        if rope_values:  # a mistake: the values rotated, the keys not
            q, v = reference_rope(q, positions), reference_rope(v, positions)
        else:
            q, k = reference_rope(q, positions), reference_rope(k, positions)
    return _attend(params, q, k, v, mask, num_heads, num_kv_heads, tile, **how)




def _gqa_mistakes(params, x, mask, h, h_kv, rope=False):
    """{mistake: (output, weights)} of each catalogued mistake of GroupedQueryAttention that predicts something
    here: the mask mistakes only where a mask is given, swapped q and k only for self-attention of L > 1."""
    switches = {TILED: dict(tile=True), NO_SCALE: dict(scale="none"), SCALE_DK: dict(scale="d_k"),
                SHARED_KV: dict(shared_kv=True), VIEW_Q: dict(bare_view="q"), VIEW_KV: dict(bare_view="kv"),
                VIEW_QKV: dict(bare_view="qkv"), VIEW_MERGE: dict(merge_view=True)}
    if x.shape[1] > 1:
        switches[SWAPPED_QK] = dict(swap=True)
    if mask is not None:
        switches[MASK_INVERTED] = dict(mask_mode="inverted")
        switches[MASK_IGNORED] = dict(mask_mode="ignored")
    if h == h_kv:
        del switches[TILED]  # one KV head per query head: tiling is grouping
    if rope:
        switches[ROPE_ON_VALUES] = dict(rope_values=True)
    return {m: reference_gqa(params, x, mask, h, h_kv, rope=rope, **kw) for m, kw in switches.items()}


def _offer(actual, predictions, which):
    """The mistakes dict for check.close: prediction `which` (0 output, 1 weights) of each mistake."""
    offered = {}
    for m, pair in predictions.items():
        predicted = _undefined_as(actual, pair[which])
        if predicted is not None:
            offered[m] = predicted
    return offered


def reference_decode(params, x, prefill, num_heads, num_kv_heads, *, rope=False, read_cache=True,
                     restart=False, tile=False, twice=False):
    """Cached decoding: a causal prefill of `prefill` tokens, then one token at a time.

    Returns the outputs of every position (B, L, d_model) and the weights of each call. The switches
    reproduce the catalogued mistakes: no cache read, positions restarting at 0, tiled KV heads, the returned keys
    rotated once more by their positions.
    """
    L = x.shape[1]
    chunks = [(0, prefill)] + [(t, t + 1) for t in range(prefill, L)] if prefill else [(t, t + 1) for t in range(L)]
    ks, vs, outs, weights = [], [], [], []
    for a, b in chunks:
        q, k, v = _project(params, x[:, a:b], num_heads, num_kv_heads)
        if rope:
            positions = torch.arange(b - a) if restart else torch.arange(a, b)
            q, k = reference_rope(q, positions), reference_rope(k, positions)
        ks.append(k)
        vs.append(v)
        keys = torch.cat(ks, dim=2) if read_cache else k
        if rope and twice:
            keys = reference_rope(keys, torch.arange(keys.shape[2]))
        values = torch.cat(vs, dim=2) if read_cache else v
        Lk = keys.shape[2]
        mask = torch.ones(b - a, Lk, dtype=torch.bool).tril(Lk - (b - a))  # (Lq, Lk): query i sees keys <= its position
        out, w = _attend(params, q, keys, values, mask, num_heads, num_kv_heads, tile)
        outs.append(out)
        weights.append(w)
    return torch.cat(outs, dim=1), weights


def random_params(g: torch.Generator | None, d_model: int, num_heads: int, num_kv_heads: int,
                  bias: bool = True) -> dict[str, torch.Tensor]:
    kv_width = num_kv_heads * (d_model // num_heads)
    shapes = {"W_q": (d_model, d_model), "W_k": (kv_width, d_model), "W_v": (kv_width, d_model),
              "W_o": (d_model, d_model)}
    params = {}
    for name, (out_f, in_f) in shapes.items():
        params[f"{name}.weight"] = torch.randn(out_f, in_f, generator=g) / math.sqrt(in_f)
        if bias:
            params[f"{name}.bias"] = torch.randn(out_f, generator=g) * 0.1
    return params


def reference_kv_cache_bytes(num_layers, num_kv_heads, head_dim, seq_len, batch_size=1, bytes_per_element=2,
                             window=None):
    kept = seq_len if window is None else min(seq_len, window)
    return 2 * num_layers * batch_size * num_kv_heads * kept * head_dim * bytes_per_element


def _repeat_kv(x, n_rep):
    return reference_repeat_kv(x, n_rep)


# -- reference tensors on inputs the learner never sees ---------------------------------------------------
GQA_SIZE = dict(B=2, L=7, d_model=24, num_heads=6, num_kv_heads=2)


def make_references() -> dict[str, torch.Tensor]:
    """Hidden inputs and the expected outputs; `attn references 06_grouped_query_attention` stores them."""
    g = torch.Generator().manual_seed(60606)
    refs: dict[str, torch.Tensor] = {}
    x = torch.randn(2, 3, 5, 4, generator=g)
    refs["repeat_kv.x"] = x
    refs["repeat_kv.out"] = reference_repeat_kv(x, 4)
    s = GQA_SIZE
    params = random_params(g, s["d_model"], s["num_heads"], s["num_kv_heads"])
    x = torch.randn(s["B"], s["L"], s["d_model"], generator=g)
    mask = (torch.arange(s["L"]) < torch.tensor([7, 5])[:, None])[:, None, None, :]  # (B, 1, 1, L) padding
    out, weights = reference_gqa(params, x, mask, s["num_heads"], s["num_kv_heads"])
    refs.update({f"gqa.{k}": v for k, v in params.items()})
    refs.update({"gqa.x": x, "gqa.mask": mask, "gqa.out": out, "gqa.weights": weights})
    causal = torch.ones(s["L"], s["L"], dtype=torch.bool).tril()
    refs["gqa.rope_out"], refs["gqa.rope_weights"] = reference_gqa(params, x, causal, s["num_heads"],
                                                                   s["num_kv_heads"], rope=True)
    return refs


# -- helpers -------------------------------------------------------------------------------------------
def _raises_value_error(fn, *args) -> bool:
    try:
        fn(*args)
    except ValueError:
        return True
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CheckFailure(_("expected a ValueError, got {error}: {message}").format(error=type(exc).__name__,
                                                                                     message=exc)) from None
    return False


def _build(cls, d_model, num_heads, num_kv_heads, **kwargs):
    module = cls(d_model, num_heads, num_kv_heads, **kwargs)
    if not isinstance(module, nn.Module):
        raise CheckFailure(_("{type} should be an nn.Module (subclass torch.nn.Module).").format(
            type="GroupedQueryAttention"))
    return module


def _load(module, params):
    extra = sorted(k for k in module.state_dict() if k.startswith(("W_q.", "W_k.", "W_v.", "W_o.")) and k not in params)
    if extra:
        raise CheckFailure(_("unexpected parameter(s) {extra}: with bias=False the four nn.Linear layers have no "
                             "bias.").format(extra=extra))
    load_weights(module, params, N_("W_q (d_model -> d_model), W_k and W_v (d_model -> num_kv_heads * d_k), W_o "
                                    "(d_model -> d_model), each an nn.Linear"))


def _gqa_module(cls, params, d_model, num_heads, num_kv_heads, **kwargs):
    module = _build(cls, d_model, num_heads, num_kv_heads, **kwargs).eval()
    _load(module, params)
    return module


# -- hidden tests ----------------------------------------------------------------------------------------
def _repeat_mistakes(actual, x, n_rep):
    """Tiling, and copies made along another axis than the heads (the one whose shape the answer has)."""
    found = {TILED: reference_repeat_kv(x, n_rep, tile=True)}
    if isinstance(actual, torch.Tensor) and actual.shape != (x.shape[0], x.shape[1] * n_rep, *x.shape[2:]):
        same_shape = [w for d in (0, 2, 3) for w in (x.repeat_interleave(n_rep, dim=d),
                                                     x.repeat(*[n_rep if i == d else 1 for i in range(4)]))
                      if w.shape == actual.shape]
        if same_shape:
            exact = [w for w in same_shape if torch.allclose(actual.detach().to(w.dtype), w)]
            found[OTHER_AXIS] = (exact or same_shape)[0]
    return found


def test_repeat_kv(check, refs, repeat_kv):
    with check("matches the reference on a hidden input (B=2, h_kv=3, L=5, d=4, n_rep=4)", weight=2):
        x = refs["repeat_kv.x"]
        out = repeat_kv(x, 4)
        check.close(out, refs["repeat_kv.out"], "repeat_kv(x, 4)", mistakes=_repeat_mistakes(out, x, 4))
    with check("head i of the result is KV head i // n_rep, on fresh shapes"):
        for B, h_kv, L, d, n_rep in [(3, 2, 7, 5, 3), (1, 4, 2, 8, 2), (2, 5, 1, 3, 5)]:
            with check.case():
                x = torch.randn(B, h_kv, L, d)
                out = repeat_kv(x, n_rep)
                expected = torch.stack([x[:, i // n_rep] for i in range(h_kv * n_rep)], dim=1)
                check.close(out, expected, _("repeat_kv(x of shape {shape}, {n_rep})").format(shape=(B, h_kv, L, d),
                                                                                              n_rep=n_rep),
                            mistakes=_repeat_mistakes(out, x, n_rep))
    with check("n_rep = 1 returns x's values unchanged (multi-head attention needs no copies)"):
        x = torch.randn(2, 4, 3, 5)
        check.close(repeat_kv(x, 1), x, "repeat_kv(x, 1)")
    with check("one KV head (multi-query): every query head gets the same keys"):
        x = torch.randn(2, 1, 6, 4)
        check.close(repeat_kv(x, 8), x.expand(2, 8, 6, 4), "repeat_kv(x with one head, 8)")
    with check("keeps the dtype (float64) and works on a non-contiguous input"):
        x = torch.randn(2, 5, 3, 4, dtype=torch.float64).transpose(1, 2)  # (B=2, h_kv=3, L=5, d=4), not contiguous
        out = repeat_kv(x, 2)
        check.close(out, reference_repeat_kv(x, 2), "repeat_kv(a transposed float64 tensor, 2)",
                    mistakes=_repeat_mistakes(out, x, 2))


def _compare(check, module, params, x, mask, h, h_kv, out_ref, w_ref, what, rope=False, **tol):
    with torch.no_grad():
        out, weights = expect_pair(module(x, mask=mask), "GroupedQueryAttention.forward")
    wrong = _gqa_mistakes(params, x, mask, h, h_kv, rope)
    check.close(out, out_ref, _("output ({what})").format(what=_(what)), mistakes=_offer(out, wrong, 0), **tol)
    check.close(weights, w_ref, _("weights ({what})").format(what=_(what)), mistakes=_offer(weights, wrong, 1), **tol)


def _test_grouped_query_attention(check, refs, GroupedQueryAttention):
    s = GQA_SIZE
    h, h_kv, d_model = s["num_heads"], s["num_kv_heads"], s["d_model"]
    params = {k.removeprefix("gqa."): v for k, v in refs.items() if k.startswith("gqa.W_")}
    x = refs["gqa.x"]
    with check("supplied weights reproduce stored outputs (d_model=24, 6 heads, 2 KV heads, padding mask)", weight=2):
        module = _gqa_module(GroupedQueryAttention, params, d_model, h, h_kv)
        _compare(check, module, params, x, refs["gqa.mask"], h, h_kv, refs["gqa.out"], refs["gqa.weights"],
                 N_("hidden input"))
    with check("num_kv_heads = num_heads is multi-head attention: equals torch.nn.MultiheadAttention"):
        reference = nn.MultiheadAttention(32, 4, batch_first=True)
        for p in reference.parameters():
            nn.init.normal_(p, std=1 / math.sqrt(32))
        torch_params = load_grader("04_multi_head_attention").params_from_torch(reference)
        module = _gqa_module(GroupedQueryAttention, torch_params, 32, 4, 4)
        xx = torch.randn(3, 9, 32)
        causal = torch.ones(9, 9, dtype=torch.bool).tril()
        with torch.no_grad():
            out_ref, w_ref = reference(xx, xx, xx, attn_mask=~causal, need_weights=True, average_attn_weights=False)
        _compare(check, module, torch_params, xx, causal, 4, 4, out_ref, w_ref,
                 N_("compared with torch.nn.MultiheadAttention"))
    with check("num_kv_heads = num_heads loads notebook 04's MultiHeadAttention weights and gives its outputs"):
        mha04 = load_grader("04_multi_head_attention")
        p04 = random_params(None, 20, 5, 5)  # the state dict of MultiHeadAttention(20, 5): same names, same shapes
        module = _gqa_module(GroupedQueryAttention, p04, 20, 5, 5)
        xx = torch.randn(2, 8, 20)
        pad = (torch.arange(8) < torch.tensor([8, 3])[:, None])[:, None, None, :]  # (B, 1, 1, L)
        out_ref, w_ref = mha04.reference_mha(p04, xx, xx, xx, pad, 5)
        _compare(check, module, p04, xx, pad, 5, 5, out_ref, w_ref,
                 N_("compared with notebook 04's multi-head attention"))
    with check("num_kv_heads = 1 is multi-query attention: every head attends over the one shared K and V"):
        p1 = random_params(None, 16, 4, 1, bias=False)
        module = _gqa_module(GroupedQueryAttention, p1, 16, 4, 1, bias=False)
        xx = torch.randn(2, 6, 16)
        q = F.linear(xx, p1["W_q.weight"]).view(2, 6, 4, 4).transpose(1, 2)  # (B, h, L, d_k)
        k = F.linear(xx, p1["W_k.weight"])[:, None]  # (B, 1, L, d_k): one head for all
        v = F.linear(xx, p1["W_v.weight"])[:, None]
        w_ref = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)  # broadcast over the 4 query heads
        out_ref = F.linear((w_ref @ v).transpose(1, 2).reshape(2, 6, 16), p1["W_o.weight"])
        _compare(check, module, p1, xx, None, 4, 1, out_ref, w_ref, "num_kv_heads = 1")  # code, not words
    with check("equals F.scaled_dot_product_attention(..., enable_gqa=True) (8 heads, 4 KV heads, causal)"):
        p2 = random_params(None, 64, 8, 4)
        module = _gqa_module(GroupedQueryAttention, p2, 64, 8, 4)
        xx = torch.randn(2, 13, 64)
        q, k, v = _project(p2, xx, 8, 4)
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # (B, h, L, d_k)
        out_ref = F.linear(heads.transpose(1, 2).reshape(2, 13, 64), p2["W_o.weight"], p2["W_o.bias"])
        with torch.no_grad():
            out, _weights = expect_pair(module(xx, mask=torch.ones(13, 13, dtype=torch.bool).tril()),
                                 "GroupedQueryAttention.forward")
        wrong = _gqa_mistakes(p2, xx, torch.ones(13, 13, dtype=torch.bool).tril(), 8, 4)
        check.close(out, out_ref, "output (compared with torch's enable_gqa)", mistakes=_offer(out, wrong, 0),
                    atol=2e-5)
    with check("query head i reads KV head i // n_rep (only one KV head carries values, W_o = identity)"):
        h8, kv2, d = 8, 2, 32
        for j in range(kv2):
            p3 = random_params(None, d, h8, kv2, bias=False)
            p3["W_v.weight"] = torch.zeros_like(p3["W_v.weight"])
            p3["W_v.weight"][j * 4:(j + 1) * 4] = torch.randn(4, d)  # only KV head j has non-zero values
            p3["W_o.weight"] = torch.eye(d)
            module = _gqa_module(GroupedQueryAttention, p3, d, h8, kv2, bias=False)
            with torch.no_grad():
                out, _weights = expect_pair(module(torch.randn(1, 5, d)), "GroupedQueryAttention.forward")
            check.shape(out, (1, 5, d), "output")
            reads = [bool(out[..., 4 * i:4 * i + 4].abs().max() > 1e-6) for i in range(h8)]
            expected = [i // (h8 // kv2) == j for i in range(h8)]
            tiled = [i % kv2 == j for i in range(h8)]
            check.true(reads == expected,
                       _("only KV head {j} carries values, yet the query heads that received them are {heads}; with 8 "
                         "query heads and 2 KV heads, heads 0-3 should read KV head 0 and heads 4-7 KV head 1.").format(
                           j=j, heads=[i for i, r in enumerate(reads) if r]), TILED if reads == tiled else None)
    with check("rope=True rotates q and k by their positions (stored outputs, causal mask)"):
        module = _gqa_module(GroupedQueryAttention, params, d_model, h, h_kv, rope=True)
        causal = torch.ones(s["L"], s["L"], dtype=torch.bool).tril()
        _compare(check, module, params, x, causal, h, h_kv, refs["gqa.rope_out"], refs["gqa.rope_weights"],
                 "rope=True", rope=True)  # code, not words
    with check("K and V projections are num_kv_heads * d_k wide; bias=False leaves no biases"):
        module = _build(GroupedQueryAttention, 48, 12, 3, bias=False)
        shapes = {name: tuple(p.shape) for name, p in module.named_parameters()}
        expected = {"W_q.weight": (48, 48), "W_k.weight": (12, 48), "W_v.weight": (12, 48), "W_o.weight": (48, 48)}
        check.true(all(shapes.get(k) == v for k, v in expected.items()) and len(shapes) == 4,
                   _("GroupedQueryAttention(48, 12, 3, bias=False) has parameters {shapes}; expected "
                     "{expected}.").format(shapes=shapes, expected=expected))
    with check("ValueError when heads cannot share the width or the KV heads evenly (30, 4, 2) and (24, 6, 4)"):
        check.true(_raises_value_error(GroupedQueryAttention, 30, 4, 2),
                   "GroupedQueryAttention(30, 4, 2) was built: 30 features cannot be shared by 4 heads.")
        check.true(_raises_value_error(GroupedQueryAttention, 24, 6, 4),
                   "GroupedQueryAttention(24, 6, 4) was built: 6 query heads cannot be split into 4 equal groups.")


def _cache_mistake(actual, updates, others=None):
    """The learner's cache content matched against concatenation along each wrong axis (the one of its shape), and,
    for the values, against the keys (`others`)."""
    if not isinstance(actual, torch.Tensor):
        return {}
    if others is not None and len(others) > 1:
        return {VALUES_GET_KEYS: torch.cat([updates[0]] + others[1:], dim=2), **_cache_mistake(actual, updates)}
    found = {}
    if len(updates) > 2:  # offered whatever the shape, so that an answer it does not explain refutes it
        found[FORGETS_PROMPT] = torch.cat(updates[1:], dim=2)
    if len(updates) > 1:
        found[RETURNS_NEW] = updates[-1]
    if len(updates) > 2:
        found[NOT_STORED] = torch.cat([updates[0], updates[-1]], dim=2)
    for dim in (0, 1, 3):
        try:
            wrong = torch.cat(updates, dim=dim)
        except RuntimeError:
            continue
        if wrong.shape == actual.shape:
            found[WRONG_DIM] = wrong
            break
    return found


def _update(cache, k, v):
    return expect_pair(cache.update(k, v), "KVCache.update")


def _decode(GroupedQueryAttention, KVCache, params, x, prefill, h, h_kv, rope):
    """The learner's module and cache, run as in generation: returns outputs (B, L, d) and each call's weights."""
    d_model = x.shape[-1]
    module = _gqa_module(GroupedQueryAttention, params, d_model, h, h_kv, rope=rope)
    cache = KVCache()
    L = x.shape[1]
    outs, weights = [], []
    with torch.no_grad():
        if prefill:
            out, w = expect_pair(module(x[:, :prefill], mask=torch.ones(prefill, prefill, dtype=torch.bool).tril(),
                                        cache=cache), N_("GroupedQueryAttention.forward with a cache"))
            outs.append(out)
            weights.append(w)
        for t in range(prefill, L):
            out, w = expect_pair(module(x[:, t:t + 1], cache=cache), N_("GroupedQueryAttention.forward with a cache"))
            outs.append(out)
            weights.append(w)
    for o in outs:
        if not isinstance(o, torch.Tensor) or o.dim() != 3:
            raise CheckFailure(_("GroupedQueryAttention.forward should return an output of shape (B, L_new, "
                                 "d_model)."))
    return torch.cat(outs, dim=1), weights


def _prefix_passes(GroupedQueryAttention, params, x, prefill, h, h_kv, rope):
    """The learner's module WITHOUT a cache, run as the cached decoding sees the sequence: a causal pass over the
    prefill, then for each later token t a causal pass over tokens 0..t, keeping its last row. Returns outputs
    (B, L, d) and the weights of each call, shaped like those of cached decoding."""
    module = _gqa_module(GroupedQueryAttention, params, x.shape[-1], h, h_kv, rope=rope)
    outs, weights = [], []
    with torch.no_grad():
        for t in range(prefill - 1, x.shape[1]):
            n = t + 1
            out, w = expect_pair(module(x[:, :n], mask=torch.ones(n, n, dtype=torch.bool).tril()),
                                 "GroupedQueryAttention.forward")
            if not isinstance(out, torch.Tensor) or out.dim() != 3 or not isinstance(w, torch.Tensor) or w.dim() != 4:
                raise CheckFailure(_("GroupedQueryAttention.forward should return an output (B, L, d_model) and "
                                     "weights (B, h, L, L)."))
            outs.append(out if t == prefill - 1 else out[:, -1:])
            weights.append(w if t == prefill - 1 else w[:, :, -1:])
    return torch.cat(outs, dim=1), weights


def _own_math_is_right(own, reference) -> bool:
    """The learner's attention, without a cache, agrees with the reference: only then do the cache mistakes'
    predictions (computed with the reference attention) say anything about their answer."""
    return isinstance(own, torch.Tensor) and own.shape == reference.shape and bool(
        torch.allclose(own, reference, atol=1e-4, equal_nan=False))


def _decode_check(check, GroupedQueryAttention, KVCache, *, rope, B, L, prefill, d_model, h, h_kv):
    """Cached decoding (a prefill, then single tokens) against the learner's own module without a cache, so a
    mistake in the attention itself is charged to GroupedQueryAttention only; the cache mistakes are offered
    when that module is right."""
    params = random_params(None, d_model, h, h_kv)
    x = torch.randn(B, L, d_model)
    out, _weights = _decode(GroupedQueryAttention, KVCache, params, x, prefill, h, h_kv, rope)
    own, _own_weights = _prefix_passes(GroupedQueryAttention, params, x, max(prefill, 1), h, h_kv, rope)
    full, _full_weights = reference_gqa(params, x, torch.ones(L, L, dtype=torch.bool).tril(), h, h_kv, rope=rope)
    mistakes = {}
    if _own_math_is_right(own, full):
        args = (params, x, prefill, h, h_kv)
        mistakes[NO_CACHE_READ] = reference_decode(*args, rope=rope, read_cache=False)[0]
        if rope:
            mistakes[POSITIONS_RESTART] = reference_decode(*args, rope=True, restart=True)[0]
            mistakes[ROTATED_TWICE] = reference_decode(*args, rope=True, twice=True)[0]
    check.close(out, own, _("outputs of cached decoding (L={L}, prefill={prefill}) vs your module without a "
                            "cache").format(L=L, prefill=prefill),
                mistakes=mistakes, atol=2e-5)


def _test_kv_cache(check, refs, KVCache, GroupedQueryAttention):
    with check("grows on the sequence axis: (B, h_kv, t, d_k) after t one-token updates"):
        cache = KVCache()
        ks, vs = [], []
        for t in range(1, 5):
            k, v = torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)
            ks.append(k)
            vs.append(v)
            k_all, v_all = _update(cache, k, v)
            check.close(k_all, torch.cat(ks, dim=2), _("keys after {t} updates").format(t=t),
                        mistakes=_cache_mistake(k_all, ks))
            check.close(v_all, torch.cat(vs, dim=2), _("values after {t} updates").format(t=t),
                        mistakes=_cache_mistake(v_all, vs, ks))
    with check("returns everything so far: a prefill of random length, then single tokens (float64)"):
        cache = KVCache()
        P = int(torch.randint(2, 9, ()))
        ks = [torch.randn(1, 2, P, 6, dtype=torch.float64)]
        vs = [torch.randn(1, 2, P, 6, dtype=torch.float64)]
        _update(cache, ks[0], vs[0])
        for _step in range(3):
            ks.append(torch.randn(1, 2, 1, 6, dtype=torch.float64))
            vs.append(torch.randn(1, 2, 1, 6, dtype=torch.float64))
            k_all, v_all = _update(cache, ks[-1], vs[-1])
        check.close(k_all, torch.cat(ks, dim=2), "keys", mistakes=_cache_mistake(k_all, ks))
        check.close(v_all, torch.cat(vs, dim=2), "values", mistakes=_cache_mistake(v_all, vs, ks))
    with check("len(cache) counts the cached positions: 0, then the prefill, then one more per token"):
        cache = KVCache()
        counts = [len(cache)]
        _update(cache, torch.randn(3, 2, 5, 7), torch.randn(3, 2, 5, 7))  # every axis a different size
        counts.append(len(cache))
        _update(cache, torch.randn(3, 2, 1, 7), torch.randn(3, 2, 1, 7))
        counts.append(len(cache))
        check.true(counts == [0, 5, 6], _("len(cache) was {counts} (empty, after 5 positions, after one more, of "
                                          "(B=3, h_kv=2, t, d_k=7)); expected [0, 5, 6].").format(counts=counts),
                   LEN_AXIS if counts in ([0, 3, 3], [0, 2, 2], [0, 7, 7]) else
                   LEN_COUNTS_UPDATES if counts == [0, 1, 2] else NOT_STORED if counts == [0, 5, 5] else None)
    with check("two caches are independent (no state shared between instances)"):
        a, b = KVCache(), KVCache()
        _update(a, torch.randn(1, 1, 3, 2), torch.randn(1, 1, 3, 2))
        k_b, _v_b = _update(b, torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2))
        check.close(k_b, torch.ones(1, 1, 1, 2), "keys of a second, fresh cache after one update")
    with check("in your module's decoding, your cache gives what the course's cache gives (prefill, then single "
               "tokens, rope=True)", weight=2):
        _cache_against_course_cache(check, GroupedQueryAttention, KVCache)


def _test_cache_path(check, GroupedQueryAttention):
    """forward(x, cache=...) graded with the course's KV cache in the learner's process: a mistake in the module's
    cache path (the update's result ignored, positions restarting) costs GroupedQueryAttention, and a bug in the
    learner's KVCache costs nothing here."""
    course_cache = local_object(GroupedQueryAttention, LocalPart("kv_cache"))
    with check("with a cache, the keys and values are stored as num_kv_heads heads (B, h_kv, t, d_k), repeated "
               "only after they are read"):
        params = random_params(None, 24, 6, 2)
        module = _gqa_module(GroupedQueryAttention, params, 24, 6, 2)
        cache = course_cache()
        with torch.no_grad():
            expect_pair(module(torch.randn(2, 3, 24), mask=torch.ones(3, 3, dtype=torch.bool).tril(), cache=cache),
                        N_("GroupedQueryAttention.forward with a cache"))
            expect_pair(module(torch.randn(2, 1, 24), cache=cache), N_("GroupedQueryAttention.forward with a cache"))
        stored = cache.k
        shape = tuple(stored.shape) if isinstance(stored, torch.Tensor) else None
        check.true(shape == (2, 2, 4, 4), _("the cache holds keys of shape {shape} after a prompt of 3 tokens and "
                                            "one more, expected (B=2, h_kv=2, 4, d_k=4).").format(shape=shape),
                   CACHE_REPEATED if shape == (2, 6, 4, 4) else None)
    for rope in (False, True):
        with check(_("with the course's KV cache, cached decoding (a prefill, then single tokens) equals your module "
                     "without a cache: outputs, random lengths (rope={rope})").format(rope=rope),
                   weight=3 if rope else 2):
            for _step in range(2):
                L = int(torch.randint(5, 12, ()))
                prefill = int(torch.randint(2, L - 1, ()))  # at least 2 prompt tokens, then at least 2 single ones
                _decode_check(check, GroupedQueryAttention, course_cache, rope=rope, B=2, L=L, prefill=prefill,
                              d_model=24, h=6, h_kv=2)
    with check("with the course's KV cache and no prompt (the first token alone, then one at a time), cached decoding "
               "equals your module without a cache (rope=True)", weight=2):
        _decode_check(check, GroupedQueryAttention, course_cache, rope=True, B=2, L=int(torch.randint(4, 9, ())),
                      prefill=0, d_model=24, h=6, h_kv=2)
    with check("with the course's KV cache, cached decoding (prefill of 4, then 5 single tokens) gives your "
               "module's weights at every step (rope=True)", weight=2):
        L, prefill = 9, 4
        params = random_params(None, 16, 4, 2)
        x = torch.randn(2, L, 16)
        _out, weights = _decode(GroupedQueryAttention, course_cache, params, x, prefill, 4, 2, rope=True)
        own_out, own = _prefix_passes(GroupedQueryAttention, params, x, prefill, 4, 2, rope=True)
        full_out, _full_weights = reference_gqa(params, x, torch.ones(L, L, dtype=torch.bool).tril(), 4, 2, rope=True)
        wrong = {}
        if _own_math_is_right(own_out, full_out):
            args = (params, x, prefill, 4, 2)
            wrong = {NO_CACHE_READ: reference_decode(*args, rope=True, read_cache=False)[1],
                     POSITIONS_RESTART: reference_decode(*args, rope=True, restart=True)[1],
                     ROTATED_TWICE: reference_decode(*args, rope=True, twice=True)[1]}
        check.close(weights[0], own[0], "weights of the prefill", mistakes={m: w[0] for m, w in wrong.items()})
        for i, w in enumerate(weights[1:]):
            t = prefill + i
            check.close(w, own[i + 1], _("weights of the token at position {t}").format(t=t),
                        mistakes={m: ws[i + 1] for m, ws in wrong.items()})


def _cache_against_course_cache(check, GroupedQueryAttention, KVCache):
    """The learner's module decodes twice, once with their cache and once with the course's: whatever the module
    does, the two agree exactly when the learner's cache behaves like the course's. Where the module cannot decode
    with the course's cache (its cache path is broken, which costs GroupedQueryAttention), the same updates are
    made directly instead."""
    course_cache = local_object(GroupedQueryAttention, LocalPart("kv_cache"))
    L, prefill = 9, 4
    params = random_params(None, 16, 4, 2)
    x = torch.randn(2, L, 16)
    try:
        expected, _weights = _decode(GroupedQueryAttention, course_cache, params, x, prefill, 4, 2, rope=True)
    except (NotImplementedError, CheckTimeout):
        raise
    except Exception:  # noqa: BLE001 - the module's own cache path fails: check the cache on its own
        cache = KVCache()
        ks = [torch.randn(2, 2, prefill, 4)]
        vs = [torch.randn(2, 2, prefill, 4)]
        _update(cache, ks[0], vs[0])
        for t in range(prefill, L):
            ks.append(torch.randn(2, 2, 1, 4))
            vs.append(torch.randn(2, 2, 1, 4))
            k_all, v_all = _update(cache, ks[-1], vs[-1])
            check.close(k_all, torch.cat(ks, dim=2), _("keys after token {t}").format(t=t),
                        mistakes=_cache_mistake(k_all, ks))
            check.close(v_all, torch.cat(vs, dim=2), _("values after token {t}").format(t=t),
                        mistakes=_cache_mistake(v_all, vs))
            check.true(len(cache) == t + 1,
                       _("len(cache) was {n} after {positions} positions.").format(n=len(cache), positions=t + 1))
        return
    out, _weights = _decode(GroupedQueryAttention, KVCache, params, x, prefill, 4, 2, rope=True)
    check.close(out, expected, "outputs of your module decoding with your cache vs with the course's cache",
                atol=1e-5)


def _bytes_mistakes(expected, num_layers):
    return {NO_FACTOR_2: expected // 2, NO_LAYERS: expected // num_layers}


def test_kv_cache_bytes(check, refs, kv_cache_bytes):
    with check("returns a Python int", weight=0.5):
        n = kv_cache_bytes(2, 2, 8, 10)
        check.true(isinstance(n, int) and not isinstance(n, bool),
                   _("expected an int, got {type}.").format(type=type(n).__name__))
    configs = [  # (layers, kv heads, head_dim, seq_len, batch)
        (N_("LLaMA-2-7B (32 layers, 32 KV heads of 128) at 4096 tokens"), (32, 32, 128, 4096, 1)),
        (N_("LLaMA-2-70B (80 layers, 8 KV heads of 128) at 32768 tokens"), (80, 8, 128, 32768, 1)),
        (N_("Falcon-7B style multi-query (32 layers, 1 KV head of 64), batch 8, 2048 tokens"), (32, 1, 64, 2048, 8)),
    ]
    for what, (layers, kv, hd, L, B) in configs:
        with check(_("fp16: {what}").format(what=_(what)), weight=2):
            n = kv_cache_bytes(layers, kv, hd, L, batch_size=B)
            expected = reference_kv_cache_bytes(layers, kv, hd, L, B)
            check.equal(n, expected, _("kv_cache_bytes({layers}, {kv}, {hd}, {L}, batch_size={B}) returned "
                                       "{n}.").format(layers=layers, kv=kv, hd=hd, L=L, B=B, n=n),
                        _bytes_mistakes(expected, layers), count_diagnosis(n, expected, {}))
    with check("the dtype sets the bytes per element: float32 4, bfloat16 2, int8 1"):
        sizes = ((torch.float32, 4), (torch.bfloat16, 2), (torch.int8, 1))
        got = {dtype: kv_cache_bytes(12, 4, 64, 1000, batch_size=3, dtype=dtype) for dtype, _size in sizes}
        if len(set(got.values())) == 1 and any(got[d] != reference_kv_cache_bytes(12, 4, 64, 1000, 3, size)
                                               for d, size in sizes):
            raise CheckFailure(_("kv_cache_bytes(12, 4, 64, 1000, batch_size=3, dtype=...) returned {n} for float32, "
                                 "bfloat16 and int8 alike.").format(n=got[torch.int8]), DTYPE_IGNORED)
        for dtype, size in sizes:
            n = got[dtype]
            expected = reference_kv_cache_bytes(12, 4, 64, 1000, 3, size)
            check.equal(n, expected, _("kv_cache_bytes(12, 4, 64, 1000, batch_size=3, dtype={dtype}) returned "
                                       "{n}.").format(dtype=dtype, n=n),
                        _bytes_mistakes(expected, 12), count_diagnosis(n, expected, {}))
    with check("a sliding window caps the positions kept: min(seq_len, window), with every other factor as before",
               weight=2):
        for layers, kv, hd, L, B, W in ((32, 8, 128, 10000, 2, 4096), (4, 2, 16, 3000, 3, 1000), (4, 2, 16, 100, 3, 4096),
                                         (6, 3, 8, 640, 1, 640)):
            with check.case():
                n = kv_cache_bytes(layers, kv, hd, L, batch_size=B, window=W)
                expected = reference_kv_cache_bytes(layers, kv, hd, L, B, window=W)
                mistakes = _bytes_mistakes(expected, layers)
                if L > W:
                    mistakes[WINDOW_IGNORED] = reference_kv_cache_bytes(layers, kv, hd, L, B)
                if L < W:
                    mistakes[WINDOW_ALWAYS] = reference_kv_cache_bytes(layers, kv, hd, W, B)
                check.equal(n, expected, _("kv_cache_bytes({layers}, {kv}, {hd}, {L}, batch_size={B}, window={W}) "
                                           "returned {n}.").format(layers=layers, kv=kv, hd=hd, L=L, B=B, W=W, n=n),
                            mistakes, count_diagnosis(n, expected, {}))
    with check("linear in the sequence length and the batch: doubling either doubles the bytes"):
        base = kv_cache_bytes(6, 2, 32, 777, batch_size=5)
        check.true(kv_cache_bytes(6, 2, 32, 2 * 777, batch_size=5) == 2 * base
                   and kv_cache_bytes(6, 2, 32, 777, batch_size=10) == 2 * base,
                   "doubling seq_len or batch_size should double the number of bytes.")


def test_grouped_query_attention(check, refs, GroupedQueryAttention):
    """Graded on its own: the repeat_kv it calls is the reference one (its bugs cost points there), and its cache
    path runs with the course's KV cache (a KVCache bug costs points in KVCache only)."""
    with standing_in(GroupedQueryAttention, repeat_kv=_repeat_kv):
        _test_grouped_query_attention(check, refs, GroupedQueryAttention)
        _test_cache_path(check, GroupedQueryAttention)


def test_kv_cache(check, refs, KVCache, GroupedQueryAttention):
    """The cache on its own, then in the learner's module against the course's cache (with the reference
    repeat_kv: a repeat_kv bug costs points there only)."""
    with standing_in(GroupedQueryAttention, repeat_kv=_repeat_kv):
        _test_kv_cache(check, refs, KVCache, GroupedQueryAttention)


# -- cache_is_correct: a graded "find the bug" on transcripts of a cache's life ---------------------------
TRANSCRIPT = CACHE  # the exercise sits at the end of section 5

CHECKS_NEWEST = Mistake(
    "checks only the newest positions",
    "the checker compared each step's newest positions with what that step fed, and never the positions before "
    "them: a cache that forgets the prompt, or hands back only the new keys and values, passes that test. Step i "
    "must return everything fed at steps 0..i, in order",
    TRANSCRIPT,
)
CHECKS_FINAL = Mistake(
    "checks only the last step",
    "the checker compared only what the last update returned: a cache that returned something wrong at an earlier "
    "step (the prompt's step, for instance) and was right again by the end passes. Every step's return is read by "
    "the attention of that step, so every step must be right",
    TRANSCRIPT,
)
CHECKS_KEYS = Mistake(
    "checks only the keys",
    "the checker compared the keys and never the values: a cache whose value half is wrong (the new keys appended "
    "to the values) passes. Keys and values are two caches that must both hold everything fed so far",
    TRANSCRIPT,
)
CHECKS_PREFIX = Mistake(
    "compares only the first t positions",
    "the checker compared the first t positions with what was fed and ignored anything after them: a cache that "
    "returns an extra, never written slot passes, and the new query would attend to it. The returned length must "
    "be exactly the number of positions fed",
    TRANSCRIPT,
)
ONE_PER_UPDATE = Mistake(
    "every update counted as one position",
    "the checker expected step i to return i + 1 positions, so it rejects a correct cache whenever the first update "
    "brings a prompt of several positions; count the positions fed (the size of axis 2 of each k_new), not the "
    "updates",
    TRANSCRIPT,
)

#: The broken caches of the transcripts, each a class of mistake: (label, what the feedback says it does).
BROKEN_CACHES = {
    "forgets the prompt": N_("a cache that forgets the prompt (after the first update it returns only the tokens "
                             "fed since)"),
    "only the newest": N_("a cache whose update returns only the new keys and values"),
    "wrong axis": N_("a cache that appends on the heads axis (dim 1) instead of the sequence axis"),
    "values get the keys": N_("a cache whose values are wrong (the new keys appended to the value cache)"),
    "one slot too many": N_("a preallocated buffer that returns one never written slot after the filled part"),
    "buffer wraps around": N_("a buffer one slot too small: the last token wraps onto slot 0, and every view it "
                              "returned earlier shows it"),
    "prompt step wrong": N_("a cache that returns only the prompt's last position at the first update, and "
                            "everything afterwards"),
}


def _fed(B, h, P, steps, d, dtype=torch.float32, repeat_last=False):
    """What one cache is fed: a prompt (B, h, P, d), then `steps` single tokens; keys and values drawn apart."""
    fed = [(torch.randn(B, h, P, d, dtype=dtype), torch.randn(B, h, P, d, dtype=dtype))]
    for _step in range(steps):
        fed.append((torch.randn(B, h, 1, d, dtype=dtype), torch.randn(B, h, 1, d, dtype=dtype)))
    if repeat_last and steps >= 2:  # the same token twice: equal keys and values, as a model without positions makes
        fed[-1] = (fed[-2][0].clone(), fed[-2][1].clone())
    return fed


def _cat_life(fed):
    """What a correct torch.cat cache returns at every step."""
    ks, vs = [k for k, _ in fed], [v for _, v in fed]
    return [(torch.cat(ks[:i + 1], dim=2), torch.cat(vs[:i + 1], dim=2)) for i in range(len(fed))]


def _buffer_life(fed, capacity=None, extra=0):
    """A preallocated buffer that writes each update into its next free slots and returns views of them, recorded
    as views (so a later write into the same memory shows in them) and copied at the end. `capacity` smaller than
    the positions fed makes it wrap around (slot t mod capacity); `extra` returns that many unwritten slots too."""
    B, h, _P, d = fed[0][0].shape
    total = sum(k.shape[2] for k, _ in fed)
    size = capacity or total + extra
    k_buf = fed[0][0].new_zeros(B, h, size, d)
    v_buf = fed[0][1].new_zeros(B, h, size, d)
    n, views = 0, []
    for k_new, v_new in fed:
        for j in range(k_new.shape[2]):
            k_buf[:, :, (n + j) % size] = k_new[:, :, j]
            v_buf[:, :, (n + j) % size] = v_new[:, :, j]
        n += k_new.shape[2]
        shown = min(n + extra, size)
        views.append((k_buf[:, :, :shown], v_buf[:, :, :shown]))
    return [(k.clone(), v.clone()) for k, v in views]


def _broken_life(label, fed):
    ks, vs = [k for k, _ in fed], [v for _, v in fed]
    steps = range(len(fed))
    if label == "forgets the prompt":
        return [(ks[0], vs[0])] + [(torch.cat(ks[1:i + 1], dim=2), torch.cat(vs[1:i + 1], dim=2)) for i in steps[1:]]
    if label == "only the newest":
        return [(k, v) for k, v in fed]
    if label == "wrong axis":  # only where the prompt is one position: else torch.cat would raise
        return [(torch.cat(ks[:i + 1], dim=1), torch.cat(vs[:i + 1], dim=1)) for i in steps]
    if label == "values get the keys":
        return [(torch.cat(ks[:i + 1], dim=2), torch.cat([vs[0]] + ks[1:i + 1], dim=2)) for i in steps]
    if label == "one slot too many":
        return _buffer_life(fed, extra=1)
    if label == "buffer wraps around":
        return _buffer_life(fed, capacity=sum(k.shape[2] for k in ks) - 1)
    if label == "prompt step wrong":
        right = _cat_life(fed)
        return [(ks[0][:, :, -1:], vs[0][:, :, -1:])] + right[1:]
    raise KeyError(label)


def _transcripts():
    """[(kind, fed, returned)]: kind "correct" or a broken cache's label; each broken cache has a correct partner
    fed the very same tensors, and a few more correct lives try the cases a hasty checker rejects."""
    B, h, d = int(torch.randint(1, 4, ())), int(torch.randint(1, 4, ())), int(torch.randint(3, 9, ()))
    P = int(torch.randint(2, 7, ()))
    lives = []
    for label in BROKEN_CACHES:
        prompt = 1 if label == "wrong axis" else P
        fed = _fed(B, h, prompt, int(torch.randint(2, 5, ())), d)
        partner = _buffer_life(fed) if label in ("one slot too many", "buffer wraps around") else _cat_life(fed)
        lives.append((("correct", label), fed, partner))
        lives.append(((label, label), fed, _broken_life(label, fed)))
    for fed in (_fed(2, 2, 5, 3, 4, dtype=torch.float64), _fed(1, 1, 1, 4, 6), _fed(B, h, P, 0, d),
                _fed(B, h, P, 3, d, repeat_last=True), _fed(3, 2, 4, 2, 8)):
        lives.append((("correct", None), fed, _buffer_life(fed) if fed[0][0].shape[0] == 3 else _cat_life(fed)))
    order = torch.randperm(len(lives)).tolist()
    return [lives[i] for i in order]


def _reference_checker(fed, returned, *, newest=False, final=False, keys=False, prefix=False, one_each=False):
    """The correct checker, and (with a switch) each catalogued way of checking too little or too much."""
    ks, vs = [k for k, _ in fed], [v for _, v in fed]
    steps = [len(fed) - 1] if final else range(len(fed))
    for i in steps:
        k_all, v_all = returned[i]
        pairs = [(k_all, ks[:i + 1])] if keys else [(k_all, ks[:i + 1]), (v_all, vs[:i + 1])]
        for got, parts in pairs:
            want = torch.cat(parts, dim=2)
            if one_each and got.shape[2] != i + 1:
                return False
            if newest:
                n = parts[-1].shape[2]
                if got.dim() != 4 or got.shape[2] < n or not torch.equal(got[:, :, -n:], parts[-1]):
                    return False
                continue
            if prefix and got.dim() == 4 and got.shape[:2] == want.shape[:2] and got.shape[3] == want.shape[3] \
                    and got.shape[2] >= want.shape[2]:
                got = got[:, :, :want.shape[2]]
            if not torch.equal(got, want):
                return False
    return True


_CHECKER_MISTAKES = {CHECKS_NEWEST: dict(newest=True), CHECKS_FINAL: dict(final=True), CHECKS_KEYS: dict(keys=True),
                     CHECKS_PREFIX: dict(prefix=True), ONE_PER_UPDATE: dict(one_each=True)}


def _as_bool(said):
    """A Python bool, or a one-element bool tensor (torch.equal gives the first, (a == b).all() the second)."""
    if isinstance(said, bool):
        return said
    if isinstance(said, torch.Tensor) and said.numel() == 1 and said.dtype == torch.bool:
        return bool(said)
    return None


def test_cache_is_correct(check, refs, cache_is_correct):
    lives = _transcripts()
    answers, changed = [], False
    for (kind, family), fed, returned in lives:
        copies = ([(k.clone(), v.clone()) for k, v in fed], [(k.clone(), v.clone()) for k, v in returned])
        try:
            said = cache_is_correct(*copies)
        except (NotImplementedError, CheckTimeout):
            raise
        except Exception as exc:  # noqa: BLE001 - one transcript's crash fails the checks of that transcript only
            said = exc
        changed = changed or not all(torch.equal(a, b) for pairs in zip(copies[0] + copies[1], fed + returned)
                                     for a, b in zip(*pairs))
        answers.append(((kind, family), said))
    truth = [kind == "correct" for (kind, _family), _life, _ret in lives]
    got = [_as_bool(said) for _key, said in answers]
    mistake = None
    if got != truth:
        for m, switches in _CHECKER_MISTAKES.items():
            predicted = [_reference_checker(fed, ret, **switches) for _key, fed, ret in lives]
            if predicted != truth and got == predicted:
                mistake = m
                break

    def judged(index, want: bool, what):
        (kind, family), said = answers[index]
        if isinstance(said, Exception):
            exc = said
            raise CheckFailure(_("cache_is_correct raised {error} on the transcript of {what}: {message}. Tensors of "
                                 "different shapes cannot be compared value by value: compare the shapes "
                                 "first.").format(error=type(exc).__name__, what=_(what), message=exc), mistake)
        if _as_bool(said) is None:
            raise CheckFailure(_("cache_is_correct returned {said!r} (a {type}); return True or False.").format(
                said=said, type=type(said).__name__))
        check.true(_as_bool(said) == want,
                   (_("the transcript of {what} was called correct.") if not want else
                    _("the transcript of {what} was called wrong, though every step returned exactly what was fed so "
                      "far.")).format(what=_(what)), mistake)

    with check("says True for every correct cache's transcript (torch.cat or a buffer's views; prompts of 1 to 6 "
               "positions, float64, one update only, the same token fed twice), and is no constant", weight=2):
        for i, ((kind, family), _life, _ret) in enumerate(lives):
            if kind == "correct":
                judged(i, True, N_("a correct cache") if family is None else
                       N_("a correct cache (fed as the broken ones are)"))
        check.true(any(g is False for g, t in zip(got, truth) if not t),
                   _("every transcript was called correct, the broken caches' too: a checker must be able to say "
                     "False."), mistake)
    for label, what in BROKEN_CACHES.items():
        with check(_("says False for {what}, and True for a correct cache fed the same").format(what=_(what))):
            keys = [key for key, _said in answers]
            judged(keys.index(("correct", label)), True, N_("a correct cache (fed as the broken ones are)"))
            judged(keys.index((label, label)), False, what)
    with check("leaves its inputs unchanged", weight=0.5):
        check.true(not changed, _("cache_is_correct changed the tensors of a transcript in place; the caller still "
                                  "needs them."))


HIDDEN_TESTS = {
    "repeat_kv": test_repeat_kv,
    "GroupedQueryAttention": test_grouped_query_attention,
    "KVCache": test_kv_cache,
    "cache_is_correct": test_cache_is_correct,
    "kv_cache_bytes": test_kv_cache_bytes,
}
