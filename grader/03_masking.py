"""Hidden tests of 03_masking: reference masks and masked softmax, masking properties, the catalogue of mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from utils.blocks import ProbeLayer
from utils.grading import HALF_TOLERANCE, CheckFailure, Mistake, identify, standing_in
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

# Sections of the notebook that explain each mistake (their headings, verbatim).
S_BOOL = N_("2. Boolean masks: True = may attend, and how they broadcast")
S_CAUSAL = N_("3. The causal mask")
S_PAD = N_("4. Padding masks")
S_WINDOW = N_("5. Sliding-window (local) masks")
S_INF = N_("6. -inf, -1e9, and the row with nothing to attend to")
S_COMBINE = N_("7. Combining masks")
S_PROOF = N_("8. Proving a mask with gradients")

UPPER = Mistake(
    "upper vs lower triangle",
    "the mask allows keys j >= i (the upper triangle: the future) instead of j <= i; rows are queries, columns keys",
    S_CAUSAL,
)
INVERTED = Mistake(
    "inverted polarity",
    "True marks the pairs to block, but in this course True = may attend (the opposite of nn.MultiheadAttention's masks)",
    S_BOOL,
)
INVERTED_NAN = Mistake(
    "inverted polarity",
    "True marks the pairs to block, but in this course True = may attend; the rows that were fully allowed became empty (NaN)",
    S_BOOL,
)
OFF_BY_ONE_WIDE = Mistake(
    "off-by-one window",
    "each query sees window + 1 keys; the window counts the query itself, so the keys are i - window + 1 ... i",
    S_WINDOW,
)
OFF_BY_ONE_NARROW = Mistake(
    "off-by-one window",
    "each query sees window - 1 keys; the window counts the query itself, so the keys are i - window + 1 ... i",
    S_WINDOW,
)
WINDOW_BOTH_SIDES = Mistake(
    "window open on both sides",
    "the window reaches window - 1 keys into the future as well as into the past (|i - j| < window): a sliding "
    "window for a decoder is causal too, keys i - window + 1 ... i only",
    S_WINDOW,
)
MASK_NOT_APPLIED = Mistake(
    "mask not applied",
    "the output is a plain softmax of the scores: the mask changed nothing. masked_fill returns a new tensor "
    "(assign it: scores = scores.masked_fill(~mask, float('-inf'))), and the masked scores must be the ones "
    "normalised",
    S_INF,
)
CAUSAL_REPLACES_PADDING = Mistake(
    "causal mask replaces the padding mask",
    "with causal=True the mask must forbid both the future and the padded keys: combine the two with &, "
    "(B, 1, 1, Lk) & (Lq, Lk), instead of keeping only the causal one",
    S_COMBINE,
)
AFTER_SOFTMAX = Mistake(
    "masking after softmax",
    "zeroing the masked weights after a plain softmax leaves rows that no longer sum to 1; mask the scores before normalising",
    S_INF,
)
NAN_ROWS = Mistake(
    "NaN on fully masked rows",
    "a -inf fill followed by softmax gives -inf - (-inf) = NaN on a row with no allowed key; that row must be all zeros",
    S_INF,
)
MINUS_1E9 = Mistake(
    "-1e9 instead of -inf",
    "a finite fill value makes a fully masked row a uniform average over all keys, padding included, instead of all zeros",
    S_INF,
)
FORBIDDEN_SCALE = Mistake(
    "forbidden scores still set the row's scale",
    "the row maximum (or a plain softmax) was taken over every score before the mask was applied: when a forbidden "
    "score is far above the allowed ones, exp(allowed - max) underflows to 0 and the allowed keys end with no weight "
    "(or 0/0). Fill the forbidden scores with -inf first, then take the maximum over what is left",
    S_INF,
)
PAD_ONE_MORE = Mistake(
    "off-by-one length",
    "each sequence lets one pad position through: positions 0 ... length - 1 are the real tokens, so the test is "
    "position < length (a <= counts one position too many)",
    S_PAD,
)
PAD_ONE_LESS = Mistake(
    "off-by-one length",
    "each sequence loses its last real token: positions 0 ... length - 1 are the real tokens, so the test is "
    "position < length (not < length - 1, and positions start at 0)",
    S_PAD,
)
QUERY_PAD = Mistake(
    "padding on the query axis",
    "the key lengths were applied to the queries (rows) instead of the keys (columns) — the mask must be (B, 1, 1, Lk) before it spreads over queries",
    S_COMBINE,
)

SUMMED_OUTPUT = Mistake(
    "one backward of the summed output",
    "a single backward pass of layer(x).sum() gives one gradient of x's shape: the influence of each input on all "
    "outputs together (one number per input position), not on each output t. Take the gradient of every output "
    "element separately (or the whole Jacobian) and keep the rows apart",
    S_PROOF,
)
SUMMED_FEATURES = Mistake(
    "output features summed before the gradient",
    "the gradient of y[t].sum() is the sum of the Jacobian block's rows, not the block: its norm is not the block's "
    "Frobenius norm, and it can be 0 where the output does depend on the input (a softmax's or a LayerNorm's "
    "outputs sum to a constant). Differentiate each output element y[t, a]",
    S_PROOF,
)
ACCUMULATED = Mistake(
    "gradients accumulated between rows",
    ".backward() adds into x.grad, so each row also carries the gradients of the rows before it: reset x.grad "
    "(x.grad = None) before each backward, or use torch.autograd.grad, which returns the gradient instead of "
    "adding it",
    S_PROOF,
)
TRANSPOSED = Mistake(
    "rows and columns swapped",
    "entry [t, s] must be the influence of input s on output t: rows are outputs, columns inputs (so a causal "
    "layer's matrix is zero above the diagonal, not below)",
    S_PROOF,
)
ABS_SUM = Mistake(
    "sum of absolute values instead of the Frobenius norm",
    "the zero pattern is right, but the size of a Jacobian block is defined here as its Frobenius norm, the square "
    "root of the sum of the squares of its d' x d entries, not the sum of their absolute values",
    S_PROOF,
)
GRAD_LEFT = Mistake(
    "gradients left on the layer",
    ".backward() stores a gradient in the .grad of every parameter the output depends on, and a training step "
    "would later use it: use torch.autograd.grad (or torch.autograd.functional.jacobian / torch.func.jacrev), "
    "which returns gradients without storing them",
    S_PROOF,
)


# -- reference implementations (instructor side only) ------------------------------------------------
def ref_causal(L: int) -> torch.Tensor:
    return torch.ones(L, L, dtype=torch.bool).tril()


def ref_padding(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    return torch.arange(max_len)[None, :] < lengths[:, None]


def ref_window(L: int, window: int) -> torch.Tensor:
    i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
    return (j <= i) & (j > i - window)


def ref_masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def ref_build(key_lengths: torch.Tensor, Lq: int, Lk: int, causal: bool = False, upper: bool = False,
              query_axis: bool = False) -> torch.Tensor:
    """The reference (B, 1, Lq, Lk) mask; `upper` / `query_axis` give the catalogued mistakes."""
    i, j = torch.arange(Lq)[:, None], torch.arange(Lk)[None, :]
    if query_axis:
        mask = (i[None, None] < key_lengths[:, None, None, None]).expand(-1, 1, Lq, Lk)
    else:
        mask = (j[None, None] < key_lengths[:, None, None, None]).expand(-1, 1, Lq, Lk)
    if causal:
        mask = mask & ((j >= i) if upper else (j <= i))
    return mask


# -- hidden inputs ----------------------------------------------------------------------------------
CAUSAL_SIZES = (13, 7, 1)  # largest first: at L = 1 several mistakes coincide ([[False]])
PAD_LENGTHS, PAD_MAX = [4, 0, 7, 2, 9], 9
WINDOW_CASES = ((9, 3), (12, 5), (6, 1), (5, 8), (16, 4))
BUILD_CASES = (  # key_lengths, Lq, Lk, causal
    ([3, 7, 0, 5], 7, 7, True),
    ([3, 7, 0, 5], 7, 7, False),
    ([4, 2], 3, 6, True),
    ([4, 6], 5, 6, False),
    ([2, 4], 6, 4, True),
)


def _softmax_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hidden scores (B, h, Lq, Lk), a (B, 1, Lq, Lk) mask with empty rows and no full rows, an upstream gradient."""
    g = torch.Generator().manual_seed(3031)
    scores = torch.randn(2, 3, 5, 7, generator=g) * 3
    mask = torch.rand(2, 1, 5, 7, generator=g) > 0.45
    mask[..., 6] = False  # no row is all True (so inverted polarity never produces an empty row by accident)
    mask[0, 0, 1] = False  # two fully masked rows
    mask[1, 0, 4] = False
    mask[1, 0, 0, 3] = True  # and at least one row with a single allowed key
    mask[1, 0, 0, :3] = False
    mask[1, 0, 0, 4:] = False
    upstream = torch.randn(2, 3, 5, 7, generator=g)
    return scores, mask, upstream


def make_references() -> dict[str, torch.Tensor]:
    """Expected outputs on inputs the learner never sees; `attn references 03_masking` stores them."""
    refs: dict[str, torch.Tensor] = {}
    for L in CAUSAL_SIZES:
        refs[f"causal_mask.L{L}"] = ref_causal(L)
    refs["padding_mask.lengths"] = torch.tensor(PAD_LENGTHS)
    refs["padding_mask.out"] = ref_padding(torch.tensor(PAD_LENGTHS), PAD_MAX)
    for L, w in WINDOW_CASES:
        refs[f"sliding_window_mask.L{L}w{w}"] = ref_window(L, w)
    scores, mask, upstream = _softmax_inputs()
    s = scores.clone().requires_grad_()
    out = ref_masked_softmax(s, mask)
    (out * upstream).sum().backward()
    refs.update({
        "masked_softmax.scores": scores, "masked_softmax.mask": mask, "masked_softmax.upstream": upstream,
        "masked_softmax.out": out.detach(), "masked_softmax.grad": s.grad,
    })
    for n, (kl, Lq, Lk, causal) in enumerate(BUILD_CASES):
        refs[f"build_attention_mask.{n}"] = ref_build(torch.tensor(kl), Lq, Lk, causal)
    return refs


# -- helpers ----------------------------------------------------------------------------------------
def _is_tensor(actual, what: str) -> torch.Tensor:
    if not isinstance(actual, torch.Tensor):
        raise CheckFailure(_("{what} should be a torch.Tensor, got {type}.").format(what=_(what),
                                                                                     type=type(actual).__name__))
    return actual.detach().cpu()


def _same_mask(check, actual, expected: torch.Tensor, what: str, mistakes: dict | None = None) -> None:
    """Compare masks by value as 0/1 integers, whatever their dtype (dtype has its own check), naming a known mistake."""
    actual = _is_tensor(actual, what)
    wrong = {m: t.long() for m, t in (mistakes or {}).items() if not torch.equal(t, expected)}
    check.close(actual.long(), expected.long(), what, mistakes=wrong, atol=0, rtol=0)


def _bool_dtype(check, actual, what: str) -> None:
    actual = _is_tensor(actual, what)
    check.true(actual.dtype == torch.bool, _("{what} should have dtype torch.bool (True = may attend), got "
                                             "{dtype}.").format(what=_(what), dtype=actual.dtype))


def _usable_mask(actual, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """The learner's mask as a bool tensor of `shape`, ready to use in attention."""
    actual = _is_tensor(actual, what)
    if tuple(actual.shape) != tuple(shape):
        raise CheckFailure(_("{what} has shape {got}, expected {want}.").format(what=_(what), got=tuple(actual.shape),
                                                                                want=tuple(shape)))
    return actual.bool()


def _influence(mask: torch.Tensor, L: int, d: int = 4) -> torch.Tensor:
    """(L, L) matrix |d y_t / d x_s| for a self-attention layer masked with `mask` (reference masked softmax)."""
    g = torch.Generator().manual_seed(77)
    W_q, W_k, W_v = (torch.randn(d, d, generator=g) for _ in range(3))
    x = torch.randn(L, d, generator=g)

    def layer(x: torch.Tensor) -> torch.Tensor:
        q, k, v = x @ W_q, x @ W_k, x @ W_v
        return ref_masked_softmax(q @ k.T / math.sqrt(d), mask) @ v

    return torch.autograd.functional.jacobian(layer, x).norm(dim=(1, 3))


def _attend(x: torch.Tensor, mask: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
    """Reference masked attention with fixed projections: x (B, Lq, d), context (B, Lk, d) -> (B, Lq, d)."""
    d = x.shape[-1]
    g = torch.Generator().manual_seed(5)
    W_q, W_k, W_v = (torch.randn(d, d, generator=g) for _ in range(3))
    ctx = x if context is None else context
    q, k, v = x @ W_q, ctx @ W_k, ctx @ W_v
    return ref_masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(d), mask) @ v


# -- hidden tests -----------------------------------------------------------------------------------
def test_causal_mask(check, refs, causal_mask):
    with check("matches the reference on hidden sizes, L = 1 included", weight=2):
        for L in CAUSAL_SIZES:
            with check.case():
                expected = refs[f"causal_mask.L{L}"]
                _same_mask(check, causal_mask(L), expected, f"causal_mask({L})", {UPPER: expected.T, INVERTED: ~expected})
    with check("dtype is torch.bool for any L", weight=0.5):
        _bool_dtype(check, causal_mask(11), "causal_mask(11)")
    with check("no information flows from the future (gradients)"):
        L = 9
        m = _usable_mask(causal_mask(L), (L, L), f"causal_mask({L})")
        future = _influence(m, L).triu(diagonal=1)
        check.true(
            bool((future == 0).all()),
            "with your mask, an output has a non-zero gradient with respect to a later input: information flows from the future.",
            identify(m.long(), {UPPER: ref_causal(L).T.long(), INVERTED: (~ref_causal(L)).long()}),
        )
    with check("every output still depends on every earlier input (gradients)"):
        L = 9
        m = _usable_mask(causal_mask(L), (L, L), f"causal_mask({L})")
        past = _influence(m, L)[ref_causal(L)]
        check.true(bool((past > 0).all()), "with your mask, some output does not depend on an earlier input (or itself): too much is masked.")


def test_padding_mask(check, refs, padding_mask):
    lengths = refs["padding_mask.lengths"]
    with check("matches the reference on hidden lengths (0 and max_len included)", weight=2):
        expected = refs["padding_mask.out"]
        _same_mask(check, padding_mask(lengths.clone(), PAD_MAX), expected, N_("padding_mask on hidden lengths"),
                   {INVERTED: ~expected, PAD_ONE_MORE: ref_padding(lengths + 1, PAD_MAX),
                    PAD_ONE_LESS: ref_padding(lengths - 1, PAD_MAX)})
    with check("dtype torch.bool, shape (B, max_len) when max_len exceeds every length"):
        m = padding_mask(torch.tensor([1, 3]), 12)
        _bool_dtype(check, m, "padding_mask([1, 3], 12)")
        check.shape(m, (2, 12), "padding_mask([1, 3], 12)")
    with check("appending padding leaves the real tokens' outputs unchanged"):
        g = torch.Generator().manual_seed(11)
        lens = torch.tensor([3, 5, 1])
        x5 = torch.randn(3, 5, 6, generator=g)
        x9 = torch.cat([x5, 10 * torch.randn(3, 4, 6, generator=g)], dim=1)
        m5 = _usable_mask(padding_mask(lens.clone(), 5), (3, 5), "padding_mask([3, 5, 1], 5)")
        m9 = _usable_mask(padding_mask(lens.clone(), 9), (3, 9), "padding_mask([3, 5, 1], 9)")
        out5, out9 = _attend(x5, m5[:, None, :]), _attend(x9, m9[:, None, :])[:, :5]
        real = ref_padding(lens, 5)
        check.true(
            torch.allclose(out5[real], out9[real], atol=1e-5),
            "with your mask, appending pad tokens changed the outputs of real tokens: queries can still attend to pad keys.",
            identify(m5.long(), {INVERTED: (~ref_padding(lens, 5)).long(), PAD_ONE_MORE: ref_padding(lens + 1, 5).long(),
                                 PAD_ONE_LESS: ref_padding(lens - 1, 5).long()}),
        )


def test_sliding_window_mask(check, refs, sliding_window_mask):
    with check("matches the reference on hidden (L, window) pairs", weight=2):
        for L, w in WINDOW_CASES:
            with check.case():
                expected = refs[f"sliding_window_mask.L{L}w{w}"]
                i, j = torch.arange(L)[:, None], torch.arange(L)[None, :]
                mistakes = {OFF_BY_ONE_WIDE: ref_window(L, w + 1), UPPER: expected.T, INVERTED: ~expected,
                            WINDOW_BOTH_SIDES: (i - j).abs() < w}
                if w > 1:
                    mistakes[OFF_BY_ONE_NARROW] = ref_window(L, w - 1)
                _same_mask(check, sliding_window_mask(L, w), expected, f"sliding_window_mask({L}, {w})", mistakes)
    with check("dtype is torch.bool", weight=0.5):
        _bool_dtype(check, sliding_window_mask(7, 2), "sliding_window_mask(7, 2)")
    with check("outputs depend only on the window's inputs (gradients)"):
        L, w = 10, 3
        m = _usable_mask(sliding_window_mask(L, w), (L, L), f"sliding_window_mask({L}, {w})")
        infl = _influence(m, L)
        band = ref_window(L, w)
        mistake = identify(m.long(), {OFF_BY_ONE_WIDE: ref_window(L, w + 1).long(), OFF_BY_ONE_NARROW: ref_window(L, w - 1).long(),
                                      UPPER: band.T.long(), INVERTED: (~band).long()})
        check.true(bool((infl[~band] == 0).all()), "with your mask, an output depends on an input outside its window (too old, or in the future).", mistake)
        check.true(bool((infl[band] > 0).all()), "with your mask, an output does not depend on every input inside its window.", mistake)
    with check("window < 1 raises ValueError"):
        for bad in (0, -3):
            try:
                sliding_window_mask(5, bad)
            except ValueError:
                continue
            raise CheckFailure(_("sliding_window_mask(5, {window}) should raise ValueError: a window must contain at "
                                 "least the query itself.").format(window=bad))


def test_masked_softmax(check, refs, masked_softmax):
    scores, mask, upstream = refs["masked_softmax.scores"], refs["masked_softmax.mask"], refs["masked_softmax.upstream"]
    catalogue = {
        NAN_ROWS: torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1),
        MINUS_1E9: torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1),
        AFTER_SOFTMAX: torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0),
        INVERTED: ref_masked_softmax(scores, ~mask),
        INVERTED_NAN: torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1),
        MASK_NOT_APPLIED: torch.softmax(scores, dim=-1),
    }
    with check("matches the reference on hidden (B, h, Lq, Lk) scores with a (B, 1, Lq, Lk) mask", weight=2):
        out = masked_softmax(scores.clone(), mask.clone())
        check.close(out, refs["masked_softmax.out"], "masked_softmax(hidden scores, hidden mask)", mistakes=catalogue)
    with check("a key the mask forbids gets exactly zero weight, in every row that has an allowed key"):
        out = _is_tensor(masked_softmax(scores.clone(), mask.clone()), "weights")
        check.shape(out, tuple(scores.shape), "weights")
        allowed = mask.any(-1, keepdim=True).expand_as(out)  # rows with something to attend to
        leaked = (out.nan_to_num(nan=1.0) * ~mask).abs().where(allowed, torch.zeros(())).sum(-1)  # (B, h, Lq)
        rows = leaked > 0
        check.true(not rows.any(),
                   _("in {n} of {rows} rows, keys the mask forbids get weight (up to {largest} of a row): a forbidden "
                     "key must get exactly 0. Give its score -inf before the softmax (multiplying the scores by the "
                     "mask makes them 0, and exp(0) is not 0).").format(
                       n=int(rows.sum()), rows=int(allowed[..., 0].sum()), largest=f"{float(leaked.max()):.2f}"))
    with check("fully masked rows are exactly zero, with no NaN"):
        out = _is_tensor(masked_softmax(scores.clone(), mask.clone()), "weights")
        empty = ~mask.any(-1).expand(2, 3, 5)
        rows = out[empty]
        check.true(not torch.isnan(rows).any(), "a fully masked row contains NaN.", NAN_ROWS)
        check.true(bool((rows == 0).all()), "a fully masked row should be all zeros (the query attends to nothing).",
                   identify(rows, {MINUS_1E9: torch.full_like(rows, 1 / 7), INVERTED: ref_masked_softmax(scores, ~mask)[empty]}))
    with check("gradients match the reference and are finite"):
        s = scores.clone().requires_grad_()
        out = masked_softmax(s, mask.clone())
        (out * upstream).sum().backward()
        check.true(s.grad is not None, "no gradient reached the scores: is the result detached from them?")
        check.true(torch.isfinite(s.grad).all(), "the gradient with respect to the scores contains NaN or inf.", NAN_ROWS)
        check.close(s.grad, refs["masked_softmax.grad"], "gradient with respect to the scores", atol=1e-5)
    with check("a forbidden key whose score is far above the allowed ones (+120) still gets no weight", weight=2):
        g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
        m = torch.rand(3, 5, 7, generator=g) > 0.4
        m[..., int(torch.randint(0, 7, (1,), generator=g))] = True  # every row keeps at least one allowed key
        s = torch.randn(3, 5, 7, generator=g) + 120.0 * (~m)
        e = torch.exp(s - s.amax(dim=-1, keepdim=True)) * m
        total = e.sum(dim=-1, keepdim=True)
        check.close(masked_softmax(s, m), ref_masked_softmax(s, m), "weights with forbidden scores 120 above the rest",
                    mistakes={FORBIDDEN_SCALE: e / torch.where(total > 0, total, torch.ones_like(total)),
                              AFTER_SOFTMAX: torch.softmax(s, dim=-1).masked_fill(~m, 0.0)})
    with check("an all-True mask gives torch.softmax, also for scores near 1000"):
        g = torch.Generator().manual_seed(8)
        s = torch.randn(4, 6, 9, generator=g) * 5 + 1000
        check.close(masked_softmax(s, torch.ones(9, dtype=torch.bool)), torch.softmax(s, dim=-1), "weights with nothing masked")
    with check("(Lq, Lk) and (B, 1, 1, Lk) masks broadcast over (B, h, Lq, Lk) scores"):
        g = torch.Generator().manual_seed(9)
        s = torch.randn(3, 2, 6, 4, generator=g)
        causal = ref_causal(6)[:, :4]
        check.close(masked_softmax(s, causal), ref_masked_softmax(s, causal), "weights with a (Lq, Lk) mask",
                    mistakes={NAN_ROWS: torch.softmax(s.masked_fill(~causal, float("-inf")), -1),
                              AFTER_SOFTMAX: torch.softmax(s, -1).masked_fill(~causal, 0.0)})
        keys = ref_padding(torch.tensor([4, 1, 0]), 4)[:, None, None, :]
        check.close(masked_softmax(s, keys), ref_masked_softmax(s, keys), "weights with a (B, 1, 1, Lk) mask",
                    mistakes={NAN_ROWS: torch.softmax(s.masked_fill(~keys, float("-inf")), -1),
                              MINUS_1E9: torch.softmax(s.masked_fill(~keys, -1e9), -1),
                              AFTER_SOFTMAX: torch.softmax(s, -1).masked_fill(~keys, 0.0)})
    with check("a row whose allowed scores are all far below zero (around -2000) still puts all its weight on them"):
        g = torch.Generator().manual_seed(11)
        m = torch.rand(4, 9, generator=g) > 0.5
        m[:, 0] = True  # every row keeps an allowed key
        s = torch.randn(4, 9, generator=g) - 2000.0
        check.close(masked_softmax(s, m), ref_masked_softmax(s, m), "weights with every score near -2000",
                    mistakes={AFTER_SOFTMAX: torch.softmax(s, dim=-1).masked_fill(~m, 0.0),
                              MASK_NOT_APPLIED: torch.softmax(s, dim=-1)})
    with check("float16 scores give float16 weights, right to float16's precision"):
        g = torch.Generator().manual_seed(12)
        s = torch.randn(3, 4, 8, generator=g) * 4
        m = torch.rand(3, 4, 8, generator=g) > 0.3
        m[..., 0] = True
        check.close(masked_softmax(s.half(), m), ref_masked_softmax(s.double(), m).half(),
                    "weights for float16 scores", **HALF_TOLERANCE)
    with check("keeps float64 and leaves the scores unchanged"):
        g = torch.Generator().manual_seed(10)
        s = torch.randn(5, 8, generator=g, dtype=torch.float64)
        m = torch.rand(5, 8, generator=g) > 0.3
        before = s.clone()
        out = _is_tensor(masked_softmax(s, m), "weights")
        check.true(out.dtype == torch.float64,
                   _("float64 scores should give float64 weights, got {dtype}.").format(dtype=out.dtype))
        check.true(torch.equal(s, before), "masked_softmax modified the scores in place (masked_fill_?): use the out-of-place version so the caller's scores survive.")


def test_build_attention_mask(check, refs, build_attention_mask):
    """Graded on its own: the masks of the earlier exercises that it may call are the reference ones meanwhile."""
    def causal_mask(L):
        return ref_causal(L)

    def padding_mask(lengths, max_len):
        return ref_padding(lengths, max_len)

    def sliding_window_mask(L, window):
        return ref_window(L, window)

    with standing_in(build_attention_mask, causal_mask=causal_mask, padding_mask=padding_mask,
                     sliding_window_mask=sliding_window_mask):
        _test_build_attention_mask(check, refs, build_attention_mask)


def _test_build_attention_mask(check, refs, build_attention_mask):
    with check("matches the reference on hidden batches (causal or not, Lq != Lk included)", weight=2):
        for n, (kl, Lq, Lk, causal) in enumerate(BUILD_CASES):
            with check.case():
                expected = refs[f"build_attention_mask.{n}"]
                lengths = torch.tensor(kl)
                mistakes = {INVERTED: ~expected, QUERY_PAD: ref_build(lengths, Lq, Lk, causal, query_axis=True)}
                if causal:
                    mistakes[UPPER] = ref_build(lengths, Lq, Lk, causal, upper=True)
                    i, j = torch.arange(Lq)[:, None], torch.arange(Lk)[None, :]
                    mistakes[CAUSAL_REPLACES_PADDING] = (j <= i).expand(len(kl), 1, Lq, Lk)
                what = _("build_attention_mask(key_lengths of {n} sequences, Lq={Lq}, Lk={Lk}, "
                         "causal={causal})").format(n=len(kl), Lq=Lq, Lk=Lk, causal=causal)
                _same_mask(check, build_attention_mask(lengths, Lq, Lk, causal=causal), expected, what, mistakes)
    with check("dtype is torch.bool", weight=0.5):  # Lq <= Lk: a bug with Lq > Lk fails the check above, not this one
        _bool_dtype(check, build_attention_mask(torch.tensor([2, 3]), 3, 4, causal=True), "build_attention_mask(...)")
    with check("used in F.scaled_dot_product_attention, equals is_causal=True when nothing is padded"):
        g = torch.Generator().manual_seed(21)
        q, k, v = (torch.randn(2, 3, 6, 4, generator=g) for _ in range(3))
        m = _usable_mask(build_attention_mask(torch.tensor([6, 6]), 6, 6, causal=True), (2, 1, 6, 6), "build_attention_mask([6, 6], 6, 6, causal=True)")
        check.close(F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                    F.scaled_dot_product_attention(q, k, v, is_causal=True), "attention output with your mask")
    with check("appending padding leaves the real tokens' outputs unchanged (causal self-attention)"):
        g = torch.Generator().manual_seed(22)
        lens = torch.tensor([4, 6, 2])
        x6 = torch.randn(3, 6, 5, generator=g)
        x10 = torch.cat([x6, 10 * torch.randn(3, 4, 5, generator=g)], dim=1)
        m6 = _usable_mask(build_attention_mask(lens.clone(), 6, 6, causal=True), (3, 1, 6, 6), "build_attention_mask(..., 6, 6, causal=True)")
        m10 = _usable_mask(build_attention_mask(lens.clone(), 10, 10, causal=True), (3, 1, 10, 10), "build_attention_mask(..., 10, 10, causal=True)")
        real = ref_padding(lens, 6)
        out6, out10 = _attend(x6, m6[:, 0]), _attend(x10, m10[:, 0])[:, :6]
        check.true(torch.allclose(out6[real], out10[real], atol=1e-5),
                   "with your mask, appending pad tokens changed the outputs of real tokens.",
                   identify(m6.long(), {INVERTED: (~ref_build(lens, 6, 6, True)).long(),
                                        QUERY_PAD: ref_build(lens, 6, 6, True, query_axis=True).long()}))
    with check("cross-attention: padding the keys leaves the outputs unchanged"):
        g = torch.Generator().manual_seed(23)
        lens = torch.tensor([5, 2])
        x = torch.randn(2, 3, 5, generator=g)
        ctx5 = torch.randn(2, 5, 5, generator=g)
        ctx8 = torch.cat([ctx5, 10 * torch.randn(2, 3, 5, generator=g)], dim=1)
        m5 = _usable_mask(build_attention_mask(lens.clone(), 3, 5), (2, 1, 3, 5), "build_attention_mask(..., Lq=3, Lk=5)")
        m8 = _usable_mask(build_attention_mask(lens.clone(), 3, 8), (2, 1, 3, 8), "build_attention_mask(..., Lq=3, Lk=8)")
        check.true(torch.allclose(_attend(x, m5[:, 0], ctx5), _attend(x, m8[:, 0], ctx8), atol=1e-5),
                   "with your mask, padding the keys changed the outputs: queries can still attend to pad keys.",
                   identify(m5.long(), {INVERTED: (~ref_build(lens, 3, 5)).long(),
                                        QUERY_PAD: ref_build(lens, 3, 5, query_axis=True).long()}))


def ref_jacobian(layer, x: torch.Tensor) -> torch.Tensor:
    """(L, d', L, d): d layer(x)[t, a] / d x[s, b]."""
    return torch.autograd.functional.jacobian(layer, x)


def ref_influence(jac: torch.Tensor) -> torch.Tensor:
    """(L, L): [t, s] = Frobenius norm of the (d', d) block d y[t] / d x[s]."""
    return jac.norm(dim=(1, 3))


def _influence_mistakes(jac: torch.Tensor) -> dict[Mistake, torch.Tensor]:
    """What each catalogued mistake of `influence` returns, from the reference Jacobian (L, d', L, d)."""
    L, d_out, _L, d = jac.shape
    summed = jac.sum(dim=(0, 1)).norm(dim=-1)  # (L,): one backward of y.sum()
    accumulated = jac.reshape(L * d_out, L, d).cumsum(dim=0).reshape(L, d_out, L, d)  # x.grad never reset
    expected = ref_influence(jac)
    outputs = {TRANSPOSED: expected.T, ABS_SUM: jac.abs().sum(dim=(1, 3)), SUMMED_FEATURES: jac.sum(dim=1).norm(dim=-1),
               SUMMED_OUTPUT: summed.expand(L, L), ACCUMULATED: ref_influence(accumulated)}
    return {m: out for m, out in outputs.items() if not torch.allclose(out, expected, atol=1e-5, rtol=1e-4)}


# (kind, L, d, d_out): a causal attention, a full one, a leaky one (mask off by one) and a per-position MLP whose
# outputs sum to 1 (so the gradient of y[t].sum() is 0 there); largest and most discriminating first.
INFLUENCE_CASES = (("leaky", 7, 4, 3), ("causal", 6, 3, 5), ("full", 5, 4, 4), ("per_position", 6, 3, 4))


def _probe(ProbeLayer_, kind: str, L: int, d: int, d_out: int, dtype: torch.dtype = torch.float32):
    """The hidden layer twice, with the same weights: where the learner's code runs, and here for the reference."""
    seed = int(torch.randint(0, 2**31 - 1, (1,)))
    return (ProbeLayer_(kind, d=d, d_out=d_out, seed=seed, dtype=dtype),
            ProbeLayer(kind, d=d, d_out=d_out, seed=seed, dtype=dtype), torch.randn(L, d, dtype=dtype))


def _influence_of(influence, layer, x: torch.Tensor, L: int):
    """The learner's matrix, refusing the one shape that names a mistake by itself: (L,) is one summed backward."""
    out = influence(layer, x.clone())
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (L,):
        raise CheckFailure(_("influence returned shape {got}, one number per input position: expected an (L, L) "
                             "matrix, one row per output position.").format(got=(L,)), SUMMED_OUTPUT)
    return out


def test_influence(check, refs, influence, ProbeLayer_):
    with check("matches the reference on hidden layers (causal, full, leaky attention, a per-position MLP)", weight=2):
        for kind, L, d, d_out in INFLUENCE_CASES:
            with check.case():
                remote, local, x = _probe(ProbeLayer_, kind, L, d, d_out)
                jac = ref_jacobian(local, x)
                what = _("influence on a hidden {kind} layer, L={L}, d={d}, d'={d_out}").format(
                    kind=kind, L=L, d=d, d_out=d_out)
                check.close(_influence_of(influence, remote, x, L), ref_influence(jac), what,
                            mistakes=lambda jac=jac: _influence_mistakes(jac), atol=1e-5, rtol=1e-4)
    with check("exact zeros where an output does not depend on an input, and only there (causal, leaky, per-position)"):
        for kind, L, d, d_out in INFLUENCE_CASES[:2] + INFLUENCE_CASES[3:]:
            with check.case():
                remote, local, x = _probe(ProbeLayer_, kind, L, d, d_out)
                expected = ref_influence(ref_jacobian(local, x)) > 1e-6
                out = _is_tensor(_influence_of(influence, remote, x, L), "influence")
                check.shape(out, (L, L), "influence")
                got = out.abs() > 1e-6  # the reference's non-zero entries are of order 0.1 to 1
                mistake = identify(got.long(), {TRANSPOSED: expected.T.long()})
                check.true(bool((got | expected).eq(expected).all()),
                           _("on a hidden {kind} layer your matrix is non-zero where the output does not depend on "
                             "the input (row t = output, column s = input).").format(kind=kind), mistake)
                check.true(bool((got & expected).eq(expected).all()),
                           _("on a hidden {kind} layer your matrix is 0 where the output does depend on the input.")
                           .format(kind=kind), mistake or (SUMMED_FEATURES if kind == "per_position" else None))
    with check("leaves the layer without .grad on its parameters", weight=0.5):
        remote, local, x = _probe(ProbeLayer_, "causal", 5, 3, 3)
        influence(remote, x)
        # each parameter read as an attribute, so that its .grad comes back with it
        left = [name for name, _p in local.named_parameters() if getattr(remote, name).grad is not None]
        check.true(not left, _("after influence(layer, x) the layer's parameters {names} have a .grad: your function "
                               "ran .backward() and left gradients behind.").format(names=", ".join(left)), GRAD_LEFT)
    with check("float64 inputs give a float64 matrix", weight=0.5):
        remote, local, x = _probe(ProbeLayer_, "causal", 4, 3, 2, dtype=torch.float64)
        out = _is_tensor(influence(remote, x), "influence")
        check.true(out.dtype == torch.float64,
                   _("a float64 layer and x should give a float64 matrix, got {dtype}.").format(dtype=out.dtype))
    with check("works on a layer whose input already requires grad, and on a single position (L = 1)", weight=0.5):
        remote, local, x = _probe(ProbeLayer_, "full", 1, 3, 2)
        check.close(influence(remote, x.clone().requires_grad_(True)), ref_influence(ref_jacobian(local, x)),
                    "influence for L = 1", atol=1e-5, rtol=1e-4)


def _reference_masks():
    def causal_mask(L):
        return ref_causal(L)

    def padding_mask(lengths, max_len):
        return ref_padding(lengths, max_len)

    def sliding_window_mask(L, window):
        return ref_window(L, window)

    return {"causal_mask": causal_mask, "padding_mask": padding_mask, "sliding_window_mask": sliding_window_mask}


# While grading, the visible checks of a composite exercise run with these parts standing in for the learner's
# (utils.engine.checking.GradingContext), as its hidden tests do: a bug in a part costs points in that part only.
STAND_INS = {"build_attention_mask": _reference_masks}

HIDDEN_TESTS = {
    "causal_mask": test_causal_mask,
    "padding_mask": test_padding_mask,
    "sliding_window_mask": test_sliding_window_mask,
    "masked_softmax": test_masked_softmax,
    "build_attention_mask": test_build_attention_mask,
    "influence": test_influence,
}
