"""Hidden tests of 01_attention_intuition: reference tensors, properties on fresh inputs, the catalogue of mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from utils.grading import HALF_TOLERANCE, KEPT_DTYPES, LocalPart, Mistake, expect_pair, identify, standing_in
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

# Sections of the notebook that explain each mistake (their headings, verbatim).
S_WHY = N_("4. Why softmax?")
S_SAFE = N_("5. Softmax, safely: overflow and the max trick")
S_POOL = N_("6. Attention pooling: one query, many keys")
S_SCORES = N_("7. Scoring functions: dot product vs additive (Bahdanau)")

NO_MAX = Mistake(
    "no max-subtraction",
    "exp of a score above about 88.7 overflows to inf in float32, and inf / inf is NaN; subtract the maximum along "
    "`dim` first, which changes nothing else because softmax is shift-invariant",
    S_SAFE,
)
WRONG_DIM = Mistake(
    "wrong dim",
    "the output is normalised along another dimension than the `dim` argument asks for: the max or the sum (or "
    "both) runs over a hard-coded dim=-1 or dim=0, or keepdim was forgotten so it broadcasts along the wrong axis",
    S_SAFE,
)
NO_KEEPDIM = Mistake(
    "keepdim=True forgotten",
    "x.max(dim=dim) and e.sum(dim=dim) drop the reduced axis, so the result broadcasts against the wrong axis "
    "(each entry is shifted or divided by another row's value; on non-square input the shapes clash): keep the "
    "axis with keepdim=True",
    S_SAFE,
)
GLOBAL_MAX = Mistake(
    "one max for the whole tensor",
    "subtracting x.max() (the largest entry of the whole tensor) instead of the maximum along `dim` keeps exp "
    "from overflowing, but a row whose scores all lie far below that global maximum underflows to exp = 0 "
    "everywhere, and 0 / 0 is NaN; subtract each row's own maximum, x.max(dim=dim, keepdim=True)",
    S_SAFE,
)
KEYS = Mistake(
    "weighting keys instead of values",
    "the output is weights @ keys; the keys only decide where to look, what comes back is the weighted sum of the values",
    S_POOL,
)
SCORES = Mistake(
    "scores instead of weights",
    "the raw dot products were used as the weights without a softmax, so they are neither positive nor summing to 1",
    S_WHY,
)
SCALED = Mistake(
    "scaled scores",
    "the scores were divided by sqrt(d); attention pooling here uses plain dot products "
    "(the 1/sqrt(d_k) scaling is notebook 02's topic)",
    S_POOL,
)
COSINE = Mistake(
    "cosine similarity instead of the dot product",
    "the scores here are plain dot products k_i · q: normalising the query and keys to unit length (cosine "
    "similarity) throws away their lengths, so every score lies in [-1, 1] and the weights come out far too flat",
    S_POOL,
)
SCORES_AS_WEIGHTS = Mistake(
    "raw scores returned instead of the weights",
    "the output is right, but the weights returned are the raw scores (dot products); return the softmax of the "
    "scores, the distribution the output was blended with",
    S_WHY,
)
MULTIPLIED = Mistake(
    "projections multiplied, not added",
    "additive attention adds the projected query and key, tanh(W_q q + W_k k_i); multiplying them is another "
    "scoring function (and with zero entries it silences the key)",
    S_SCORES,
)
MISSING_TANH = Mistake(
    "missing tanh",
    "without the tanh the score is w_v·W_q q + w_v·W_k k_i: the query adds the same number to every key's score, "
    "softmax ignores it, and the weights no longer depend on the query",
    S_SCORES,
)
NO_W_V = Mistake(
    "w_v never applied",
    "the hidden units tanh(W_q q + W_k k_i) are summed as they are; each should be weighted by its entry of w_v "
    "(a dot product with w_v), which is what learns how much every hidden unit counts",
    S_SCORES,
)
TANH_OUTSIDE = Mistake(
    "tanh after w_v",
    "the tanh squashes the final score instead of the hidden layer W_q q + W_k k_i; it belongs before the dot product with w_v",
    S_SCORES,
)
BATCH_DIMS = Mistake(
    "leading batch dims not handled",
    "each example alone gets the right scores, but with leading batch dims the shapes no longer line up: the "
    "projected query needs its own key axis (unsqueeze(-2)) to broadcast against every key, and a transpose must "
    "name the last two dims (transpose(-2, -1)), never dims 0 and 1",
    S_SCORES,
)
_UNTRANSPOSED = N_(
    "W_q and W_k are stored as (out, in), like nn.Linear's weight, so the projections are `query @ W_q.T` and "
    "`keys @ W_k.T`; `x @ W` computes Wᵀx, which runs only when W is square and is then the wrong projection"
)
UNTRANSPOSED = Mistake("weight matrix applied untransposed", _UNTRANSPOSED, S_SCORES)
NW_PLUS = Mistake(
    "plus sign in the Gaussian kernel",
    "the exponent is +(q - x_i)² / (2h²): the farther a key, the larger its score, so the weights go to the keys "
    "farthest from the query; the Gaussian kernel is exp(-(q - x_i)² / (2h²)), a similarity that falls with distance",
    S_POOL,
)
NW_NOT_SQUARED = Mistake(
    "distance not squared",
    "the score uses the distance |q - x_i| (or the signed difference q - x_i) instead of its square; the Gaussian "
    "kernel is exp(-(q - x_i)² / (2h²)): square the difference (which also makes the sign irrelevant)",
    S_POOL,
)
NW_BANDWIDTH = Mistake(
    "bandwidth not squared, or the 2 missing",
    "the squared distance is divided by something other than 2h² (by 2h, h², h or (2h)²): the bandwidth h is a "
    "length, so it is squared like the distance, and the Gaussian has the 2 in 2h²",
    S_POOL,
)
NW_QUERY_AXIS = Mistake(
    "normalised over the queries",
    "the softmax runs over the queries (dim=0 of the (m, n) scores) instead of over the keys: each query must "
    "share its weight among the n keys (each row sums to 1), not each key among the queries",
    S_POOL,
)
NW_NAIVE = Mistake(
    "Gaussian weights normalised without the max shift",
    "exp(-(q - x_i)² / (2h²)) underflows to 0 for every key when the query is far from all of them or h is tiny, "
    "and 0 / 0 is NaN; the normalised kernel is a softmax of the negative squared distances, so compute it as a "
    "stable softmax (subtract the row's maximum, or call your softmax)",
    S_SAFE,
)


# -- reference implementations (instructor side only) ------------------------------------------------
def ref_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def ref_attention_pool(query, keys, values):
    weights = ref_softmax(keys @ query)  # (n,)
    return weights @ values, weights  # (d_v,), (n,)


def ref_additive_scores(query, keys, W_q, W_k, w_v):
    hidden = (query @ W_q.T).unsqueeze(-2) + keys @ W_k.T  # (..., n, h)
    return torch.tanh(hidden) @ w_v  # (..., n)


def ref_nadaraya_watson(x_query, x_keys, y_keys, bandwidth):
    scores = -((x_query[:, None] - x_keys[None, :]) ** 2) / (2 * bandwidth**2)  # (m, n)
    return ref_softmax(scores, dim=-1) @ y_keys  # (m,)


# -- what the catalogued mistakes return ---------------------------------------------------------------
def _naive_softmax(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def _global_max_softmax(x, dim=-1):
    e = torch.exp(x - x.max())
    return e / e.sum(dim=dim, keepdim=True)


def _stability_mistakes(x, dim=-1):
    """The two stability mistakes: no max at all, and one max for the whole tensor (G-7)."""
    return {NO_MAX: _naive_softmax(x, dim), GLOBAL_MAX: _global_max_softmax(x, dim)}


def _softmax_mistakes(actual, x, dim):
    """{WRONG_DIM: the wrong-dim softmax that `actual` reproduces (or the first one), NO_MAX: the naive softmax}.

    "Wrong dim" is a family (a hard-coded dim=0 or dim=-1): where the answer is right, one of its members is right
    too (dim=0 asked of a hard-coded dim=0), so it is not offered there, and that right answer does not rule it out.
    """
    keep = dim % x.dim()
    wrong = [ref_softmax(x, d) for d in range(x.dim()) if d != keep]
    # Half of the softmax along the wrong dim: the max along `dim` (as asked), the sum along another.
    shifted = torch.exp(x - x.amax(dim=keep, keepdim=True))
    wrong += [shifted / shifted.sum(dim=d, keepdim=True) for d in range(x.dim()) if d != keep]
    found = next((w for w in wrong if isinstance(actual, torch.Tensor) and identify(actual, {WRONG_DIM: w})), None)
    mistakes = {NO_MAX: _naive_softmax(x, dim)}
    right = isinstance(actual, torch.Tensor) and identify(actual, {WRONG_DIM: ref_softmax(x, dim)})
    if wrong and not right:
        mistakes[WRONG_DIM] = found if found is not None else wrong[0]
    return mistakes


def _pool_mistakes(query, keys, values):
    scores = keys @ query
    w = ref_softmax(scores)
    ws = ref_softmax(scores / math.sqrt(query.shape[-1]))
    wc = ref_softmax(torch.cosine_similarity(keys, query.unsqueeze(-2), dim=-1))
    out = {KEYS: w @ keys, SCORES: scores @ values, SCALED: ws @ values, COSINE: wc @ values}
    weights = {SCORES_AS_WEIGHTS: scores, SCALED: ws, COSINE: wc}
    return out, weights


def _nw_bandwidths(h):
    """The wrong denominators of the bandwidth family: 2h, h², h and (2h)² in place of 2h²."""
    return (2 * h, h**2, h, (2 * h) ** 2)


def _nw_mistakes(actual, x_query, x_keys, y_keys, h, bandwidth_family=True):
    """What each catalogued Nadaraya–Watson mistake returns on these inputs; of the bandwidth family, the member
    the answer reproduces (or the first), offered only where no member coincides with the right answer (h = 1)."""
    diff = x_query[:, None] - x_keys[None, :]
    sq = diff**2
    right = ref_nadaraya_watson(x_query, x_keys, y_keys, h)
    out = {
        NW_PLUS: ref_softmax(sq / (2 * h**2)) @ y_keys,
        NW_NOT_SQUARED: (ref_softmax(-diff.abs() / (2 * h**2)) @ y_keys, ref_softmax(-diff / (2 * h**2)) @ y_keys),
        NW_QUERY_AXIS: ref_softmax(-sq / (2 * h**2), dim=0) @ y_keys,
        KEYS: ref_softmax(-sq / (2 * h**2)) @ x_keys,
    }
    if bandwidth_family:
        family = [ref_softmax(-sq / c) @ y_keys for c in _nw_bandwidths(h)]
        if not any(torch.allclose(f, right, atol=1e-5) for f in family):
            found = next((f for f in family if isinstance(actual, torch.Tensor) and identify(actual, {NW_BANDWIDTH: f})),
                         None)
            out[NW_BANDWIDTH] = found if found is not None else family[0]
    return out


def _nw_naive(x_query, x_keys, y_keys, h):
    """exp / sum without the shift: 0 / 0 = NaN where every key underflows."""
    e = torch.exp(-((x_query[:, None] - x_keys[None, :]) ** 2) / (2 * h**2))
    return (e / e.sum(dim=-1, keepdim=True)) @ y_keys


def _additive_mistakes(query, keys, W_q, W_k, w_v):
    hidden = (query @ W_q.T).unsqueeze(-2) + keys @ W_k.T
    product = (query @ W_q.T).unsqueeze(-2) * (keys @ W_k.T)
    return {MISSING_TANH: hidden @ w_v, TANH_OUTSIDE: torch.tanh(hidden @ w_v), MULTIPLIED: torch.tanh(product) @ w_v,
            NO_W_V: torch.tanh(hidden).sum(-1)}


def _untransposed_mistakes(actual, query, keys, W_q, W_k, w_v):
    """Square weights: the scores with W_q, W_k or both applied as x @ W instead of x @ W.T (the one nearest the
    answer)."""
    variants = [ref_additive_scores(query, keys, a, b, w_v) for a, b in ((W_q.T, W_k), (W_q, W_k.T), (W_q.T, W_k.T))]
    nearest = variants[0]
    if isinstance(actual, torch.Tensor):
        close = [v for v in variants if v.shape == actual.shape and torch.allclose(actual.detach(), v, atol=1e-5)]
        nearest = close[0] if close else nearest
    return {UNTRANSPOSED: nearest}


# -- reference tensors ---------------------------------------------------------------------------------
def make_references() -> dict[str, torch.Tensor]:
    """Inputs the learner never sees and the expected outputs; `attn references` stores them."""
    g = torch.Generator().manual_seed(20240101)
    refs: dict[str, torch.Tensor] = {}
    x = torch.randn(4, 9, generator=g) * 4
    refs |= {"softmax.x": x, "softmax.out": ref_softmax(x)}
    x3 = torch.randn(2, 5, 3, generator=g) * 3
    refs |= {"softmax.x3": x3, "softmax.out3_dim1": ref_softmax(x3, dim=1)}

    q, k, v = torch.randn(6, generator=g), torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)
    out, w = ref_attention_pool(q, k, v)
    refs |= {"pool.q": q, "pool.k": k, "pool.v": v, "pool.out": out, "pool.w": w}
    q, k, v = torch.randn(4, generator=g), torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    out, w = ref_attention_pool(q, k, v)
    refs |= {"pool2.q": q, "pool2.k": k, "pool2.v": v, "pool2.out": out, "pool2.w": w}

    q, k = torch.randn(3, generator=g), torch.randn(6, 5, generator=g)
    W_q, W_k, w_v = torch.randn(4, 3, generator=g), torch.randn(4, 5, generator=g), torch.randn(4, generator=g)
    refs |= {"add.q": q, "add.k": k, "add.Wq": W_q, "add.Wk": W_k, "add.wv": w_v,
             "add.out": ref_additive_scores(q, k, W_q, W_k, w_v)}

    xq, xk = torch.rand(7, generator=g) * 6 - 1, torch.rand(12, generator=g) * 5
    yk = torch.sin(xk) * 2 + torch.randn(12, generator=g) * 0.3
    h = torch.tensor(0.7)
    refs |= {"nw.xq": xq, "nw.xk": xk, "nw.yk": yk, "nw.h": h, "nw.out": ref_nadaraya_watson(xq, xk, yk, h)}
    return refs


# -- hidden tests --------------------------------------------------------------------------------------
def test_softmax(check, refs, softmax):
    with check("matches the reference on hidden inputs (2-D, default dim)", weight=2):
        x = refs["softmax.x"]
        out = softmax(x)
        check.close(out, refs["softmax.out"], "softmax(x)", mistakes=_softmax_mistakes(out, x, -1))
    with check("matches the reference along dim=1 of a 3-D input"):
        x = refs["softmax.x3"]
        out = softmax(x, dim=1)
        check.close(out, refs["softmax.out3_dim1"], "softmax(x, dim=1)", mistakes=_softmax_mistakes(out, x, 1))
    with check("equals torch.softmax along every dim of a fresh 4-D tensor, negative dims included"):
        x = torch.randn(2, 3, 4, 5) * 3
        for dim in (0, 1, 2, 3, -1, -2):
            with check.case():
                out = softmax(x, dim=dim)
                check.close(out, torch.softmax(x, dim=dim),
                            _("softmax(x, dim={dim}) for x of shape (2, 3, 4, 5)").format(dim=dim),
                            mistakes=_softmax_mistakes(out, x, dim))
    with check("a square input (6 x 6): each row is normalised with its own max and its own sum"):
        x = torch.randn(6, 6) * 3
        out = softmax(x)
        m, e = x.amax(dim=-1), torch.exp(x - x.amax(dim=-1, keepdim=True))
        no_keep_max = torch.exp(x - m) / torch.exp(x - m).sum(dim=-1, keepdim=True)
        no_keep_sum = e / e.sum(dim=-1)
        no_keep_both = torch.exp(x - m) / torch.exp(x - m).sum(dim=-1)
        check.close(out, torch.softmax(x, dim=-1), "softmax of a square input", mistakes={
            **_softmax_mistakes(out, x, -1),
            NO_KEEPDIM: next((w for w in (no_keep_max, no_keep_sum, no_keep_both)
                              if isinstance(out, torch.Tensor) and identify(out, {NO_KEEPDIM: w})), no_keep_max)})
    with check("no overflow at x = 1000", weight=3):
        x = 1000.0 + torch.randn(3, 6)
        out = softmax(x)
        check.close(out, torch.softmax(x, dim=-1), "softmax of scores near 1000", mistakes=_stability_mistakes(x))
    with check("each row is made stable on its own: rows around 0, 300, -300 and 1000 in one batch", weight=3):
        x = torch.randn(4, 8) + torch.tensor([[0.0], [300.0], [-300.0], [1000.0]])
        out = softmax(x)
        check.close(out, torch.softmax(x, dim=-1), "softmax of rows at very different scales",
                    mistakes=_stability_mistakes(x), atol=1e-5)
    with check("shift invariance: softmax(x + c) == softmax(x) for a different large c in every row", weight=2):
        x = torch.randn(4, 7)
        c = 200.0 + 800.0 * torch.rand(4, 1)
        out = softmax(x + c)
        check.close(out, torch.softmax(x, dim=-1), "softmax(x + c)", mistakes=_stability_mistakes(x + c),
                    atol=1e-4)
    with check("rows of 2000 widely spread scores are finite, non-negative and sum to 1", weight=2):
        x = torch.randn(3, 2000) * 30
        out = softmax(x)
        check.shape(out, (3, 2000), "softmax(x)")
        check.close(out.sum(-1), torch.ones(3), "row sums", mistakes={NO_MAX: _naive_softmax(x).sum(-1)})
        check.true(bool((out >= 0).all()), "some weights are negative: exp is never negative")
    with check("keeps x's dtype: float64 gives float64, float16 gives float16"):
        x = torch.randn(4, 6) * 3
        for dtype in KEPT_DTYPES:
            with check.case():
                xd = x.to(dtype)
                check.close(softmax(xd), ref_softmax(xd.double()).to(dtype),
                            _("softmax(x) for x of dtype {dtype}").format(dtype=dtype), **HALF_TOLERANCE)
    with check("returns the softmax and leaves its input unchanged (no in-place edits)", weight=0.5):
        x = torch.randn(3, 5)
        before = x.clone()
        out = softmax(x)
        check.true(torch.equal(x, before), "softmax(x) modified x; write `x - m`, not `x -= m`, so the caller's tensor survives")
        check.close(out, ref_softmax(before), "softmax(x)")


def test_attention_pool(check, refs, attention_pool):
    """Graded on its own: an attention_pool that calls the learner's softmax gets the reference one meanwhile (a
    softmax bug costs points in softmax, not again here)."""
    def softmax(x, dim=-1):
        return ref_softmax(x, dim)

    with standing_in(attention_pool, softmax=softmax):
        _test_attention_pool(check, refs, attention_pool)


def _test_attention_pool(check, refs, attention_pool):
    for key, what in (("pool", "d_v != d"), ("pool2", "d_v == d")):
        with check(_("matches the reference on hidden inputs ({what})").format(what=what), weight=2):
            q, k, v = refs[f"{key}.q"], refs[f"{key}.k"], refs[f"{key}.v"]
            out, w = expect_pair(attention_pool(q, k, v), "attention_pool")
            wrong_out, wrong_w = _pool_mistakes(q, k, v)
            check.close(out, refs[f"{key}.out"], "output", mistakes=wrong_out)  # first: a wrong output says more
            check.close(w, refs[f"{key}.w"], "weights", mistakes=wrong_w)
    with check("equals torch's scaled_dot_product_attention with scale=1 on fresh inputs (n=50, d=16, d_v=7)", weight=2):
        q, k, v = torch.randn(16), torch.randn(50, 16), torch.randn(50, 7)
        out, w = expect_pair(attention_pool(q, k, v), "attention_pool")
        expected = F.scaled_dot_product_attention(q[None, None], k[None], v[None], scale=1.0)[0, 0]  # (d_v,)
        wrong_out, _unused = _pool_mistakes(q, k, v)
        check.close(out, expected, "output", mistakes=wrong_out, atol=1e-4)
    with check("weights are a probability distribution over 10000 keys, even for large scores"):
        q, k, v = torch.randn(8) * 20, torch.randn(10000, 8), torch.randn(10000, 3)
        out, w = expect_pair(attention_pool(q, k, v), "attention_pool")
        check.shape(w, (10000,), "weights")
        check.true(bool(torch.isfinite(w).all()), "some weights are inf or NaN: does a large score overflow exp?")
        check.true(bool((w >= 0).all()), "some weights are negative: weights must come out of a softmax",
                   SCORES if torch.allclose(w, k @ q) else None)
        check.close(w.sum(), torch.tensor(1.0), "sum of the weights", atol=1e-4)
    with check("keeps the inputs' dtype: float64 gives float64, float16 gives float16"):
        q, k, v = torch.randn(6), torch.randn(9, 6), torch.randn(9, 4)
        for dtype in KEPT_DTYPES:
            with check.case():
                out, w = expect_pair(attention_pool(q.to(dtype), k.to(dtype), v.to(dtype)), "attention_pool")
                want_out, want_w = ref_attention_pool(q.double(), k.double(), v.double())
                what = _("{what} for inputs of dtype {dtype}")
                check.close(w, want_w.to(dtype), what.format(what=_("weights"), dtype=dtype), **HALF_TOLERANCE)
                check.close(out, want_out.to(dtype), what.format(what=_("output"), dtype=dtype), **HALF_TOLERANCE)
    with check("the output is a blend of the values: every coordinate lies between the values' min and max"):
        q, k, v = torch.randn(5), torch.randn(30, 5), torch.randn(30, 9) + 3
        out, w = expect_pair(attention_pool(q, k, v), "attention_pool")
        check.shape(out, (9,), "output for values of shape (30, 9)")
        inside = (out >= v.min(0).values - 1e-5) & (out <= v.max(0).values + 1e-5)
        check.true(bool(inside.all()), "the output is not a convex combination of the values' rows")


def test_additive_scores(check, refs, additive_scores):
    with check("matches the reference on hidden inputs (d_q != d_k != h)", weight=2):
        args = [refs[f"add.{n}"] for n in ("q", "k", "Wq", "Wk", "wv")]
        out = additive_scores(*args)
        check.close(out, refs["add.out"], "scores", mistakes=_additive_mistakes(*args))
    with check("leading batch dims: query (2, 3, d_q), keys (2, 3, n, d_k) give scores (2, 3, n)", weight=2):
        args = (torch.randn(2, 3, 4), torch.randn(2, 3, 7, 6), torch.randn(5, 4), torch.randn(5, 6), torch.randn(5))
        check.batched(additive_scores, args, (True, True, False, False, False), 2, ref_additive_scores(*args),
                      "scores", BATCH_DIMS, mistakes=_additive_mistakes(*args))
    with check("square weights (d_q = d_k = h = 5): the projections are W_q q and W_k k, not their transposes"):
        args = (torch.randn(5), torch.randn(6, 5), torch.randn(5, 5), torch.randn(5, 5), torch.randn(5))
        out = additive_scores(*args)
        check.close(out, ref_additive_scores(*args), "scores",
                    mistakes={**_additive_mistakes(*args), **_untransposed_mistakes(out, *args)})
    with check("many keys: n = 3000 fresh random keys, h = 32"):
        args = [torch.randn(10), torch.randn(3000, 12), torch.randn(32, 10), torch.randn(32, 12), torch.randn(32)]
        out = additive_scores(*args)
        check.close(out, ref_additive_scores(*args), "scores", mistakes=_additive_mistakes(*args), atol=1e-4)
    with check("the softmax weights change when the query changes"):
        k, W_q, W_k, w_v = torch.randn(6, 3), torch.randn(8, 2), torch.randn(8, 3), torch.randn(8)
        q1, q2 = torch.tensor([2.0, -1.0]), torch.tensor([-1.5, 2.5])
        s1, s2 = additive_scores(q1, k, W_q, W_k, w_v), additive_scores(q2, k, W_q, W_k, w_v)
        w1, w2 = torch.softmax(s1, -1), torch.softmax(s2, -1)
        same = torch.allclose(w1, w2, atol=1e-5)
        # Only scores of shape (n,) say "missing tanh": a trailing size-1 axis makes every softmax [1.] as well.
        named = MISSING_TANH if same and tuple(s1.shape) == (6,) else None
        check.true(not same, "two different queries give identical attention weights: the query's contribution is "
                   "the same for every key, so softmax cancels it.", named)
    with check("keeps the inputs' dtype: float64 gives float64, float16 gives float16"):
        args = [torch.randn(3), torch.randn(8, 4), torch.randn(5, 3), torch.randn(5, 4), torch.randn(5)]
        for dtype in KEPT_DTYPES:
            with check.case():
                check.close(additive_scores(*(a.to(dtype) for a in args)),
                            ref_additive_scores(*(a.double() for a in args)).to(dtype),
                            _("scores for inputs of dtype {dtype}").format(dtype=dtype), **HALF_TOLERANCE)
    with check("scores are bounded by sum(|w_v|), however large the inputs"):
        args = [torch.randn(3) * 100, torch.randn(20, 4) * 100, torch.randn(6, 3), torch.randn(6, 4), torch.randn(6)]
        out = additive_scores(*args)
        bound = float(args[4].abs().sum())
        check.shape(out, (20,), "scores")
        ok = bool((out.abs() <= bound + 1e-4).all())
        check.true(ok, "some scores exceed sum(|w_v|): each hidden unit goes through tanh, which lies in (-1, 1)",
                   None if ok else identify(out, _additive_mistakes(*args)))


def test_nadaraya_watson(check, refs, nadaraya_watson):
    """Graded on its own: a nadaraya_watson that calls the learner's softmax gets the reference one meanwhile (a
    softmax bug costs points in softmax only); the gradient check gets the course's differentiable softmax."""
    def softmax(x, dim=-1):
        return ref_softmax(x, dim)

    with standing_in(nadaraya_watson, softmax=softmax):
        _test_nadaraya_watson(check, refs, nadaraya_watson)
    with standing_in(nadaraya_watson, softmax=LocalPart("softmax")):
        with check("a bandwidth given as a tensor with requires_grad gets a finite gradient (it can be learned)"):
            inputs = {"x_query": torch.rand(6) * 4, "x_keys": torch.rand(9) * 4, "y_keys": torch.randn(9),
                      "bandwidth": torch.tensor(0.6)}
            check.gradients(nadaraya_watson, inputs, ref_nadaraya_watson, "nadaraya_watson")
            h = torch.tensor(0.05, requires_grad=True)  # tiny: a naive exp / sum is 0 / 0 for the far queries
            out = nadaraya_watson(torch.tensor([-3.0, 0.3, 9.0]), torch.rand(9) * 4, torch.randn(9), h)
            check.true(isinstance(out, torch.Tensor) and out.requires_grad,
                       "with a bandwidth tensor that requires grad, the output should require grad too: is h turned "
                       "into a Python number (float(h), h.item()) or detached on the way?")
            (grad,) = torch.autograd.grad(out.sum(), h, allow_unused=True)
            check.true(grad is not None and bool(torch.isfinite(grad).all()),
                       "the gradient with respect to a tiny bandwidth (h = 0.05) is NaN or missing: a 0 / 0 in the "
                       "forward pass (every key's exp underflows) poisons the backward pass too",
                       NW_NAIVE if grad is not None and bool(torch.isnan(grad).any()) else None)


def _test_nadaraya_watson(check, refs, nadaraya_watson):
    with check("matches the reference on hidden data (7 queries, 12 keys, h = 0.7)", weight=2):
        xq, xk, yk, h = refs["nw.xq"], refs["nw.xk"], refs["nw.yk"], refs["nw.h"]
        out = nadaraya_watson(xq, xk, yk, h)
        check.close(out, refs["nw.out"], "predictions", mistakes=_nw_mistakes(out, xq, xk, yk, h), atol=1e-5)
    with check("bandwidth as a Python float: the same predictions, of shape (m,) for m = 5 queries and n = 11 keys"):
        xq, xk, yk = torch.rand(5) * 4, torch.rand(11) * 4, torch.randn(11)
        out = nadaraya_watson(xq, xk, yk, 0.45)
        check.shape(out, (5,), "predictions")
        check.close(out, ref_nadaraya_watson(xq, xk, yk, torch.tensor(0.45)), "predictions",
                    mistakes=_nw_mistakes(out, xq, xk, yk, torch.tensor(0.45)), atol=1e-5)
    with check("a query far from every key, or a tiny bandwidth, predicts the nearest key's y (no 0 / 0 = NaN)",
               weight=3):
        xk = torch.tensor([0.0, 1.0, 2.5, 4.0, 5.5])
        yk = torch.randn(5)
        for xq, h in ((torch.tensor([-40.0, 60.0]), 1.0), (torch.tensor([0.3, 1.4, 3.2, 5.0]), 0.01)):
            with check.case():
                out = nadaraya_watson(xq, xk, yk, h)
                nearest = yk[(xq[:, None] - xk[None, :]).abs().argmin(dim=-1)]
                check.close(out, nearest, _("predictions at h = {h}").format(h=h), atol=1e-4, mistakes={
                    **_nw_mistakes(out, xq, xk, yk, torch.tensor(h), bandwidth_family=False),
                    NW_NAIVE: _nw_naive(xq, xk, yk, torch.tensor(h))})
    with check("a huge bandwidth (h = 1e4) predicts the mean of y_keys everywhere"):
        xq, xk, yk = torch.rand(6) * 5, torch.rand(10) * 5, torch.randn(10) + 2
        out = nadaraya_watson(xq, xk, yk, 1e4)
        check.close(out, yk.mean().expand(6), "predictions at h = 1e4", atol=1e-4)
    with check("keeps the inputs' dtype: float64 gives float64", weight=0.5):
        xq, xk, yk = (torch.rand(4) * 3).double(), (torch.rand(8) * 3).double(), torch.randn(8).double()
        h = torch.tensor(0.3, dtype=torch.float64)
        check.close(nadaraya_watson(xq, xk, yk, h), ref_nadaraya_watson(xq, xk, yk, h), "predictions for float64 inputs")
    with check("leaves its inputs unchanged (no in-place edits)", weight=0.5):
        xq, xk, yk, h = torch.rand(4) * 3, torch.rand(8) * 3, torch.randn(8), torch.tensor(0.5)
        before = [t.clone() for t in (xq, xk, yk, h)]
        out = nadaraya_watson(xq, xk, yk, h)
        check.true(all(torch.equal(a, b) for a, b in zip((xq, xk, yk, h), before)),
                   "nadaraya_watson changed one of its inputs in place; compute new tensors instead")
        check.close(out, ref_nadaraya_watson(*before), "predictions")


def _reference_parts():
    def softmax(x, dim=-1):
        return ref_softmax(x, dim)

    return {"softmax": softmax}


# While grading, the visible checks of a composite exercise run with these parts standing in for the learner's
# (utils.engine.checking.GradingContext), as its hidden tests do: a bug in a part costs points in that part only.
STAND_INS = {"attention_pool": _reference_parts, "nadaraya_watson": _reference_parts}

HIDDEN_TESTS = {
    "softmax": test_softmax,
    "attention_pool": test_attention_pool,
    "nadaraya_watson": test_nadaraya_watson,
    "additive_scores": test_additive_scores,
}
