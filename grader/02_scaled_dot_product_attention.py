"""Hidden tests of 02_scaled_dot_product_attention: reference implementations, the mistake catalogue, references."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils.attention_variants import PASSED_IN_PLACE_OF, attention, passed_in_place_of
from utils.grading import (
    HALF_TOLERANCE,
    KEPT_DTYPES,
    CheckFailure,
    CheckTimeout,
    LocalPart,
    Mistake,
    expect_pair,
    load_weights,
    standing_in,
)
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

NOTEBOOK = "02_scaled_dot_product_attention"
STEPS = N_("1. The equation, step by step")
WHY = N_("2. Why divide by √d_k")
MASKS = N_("3. Masks: True = may attend")
CROSS = N_("5. Self- and cross-attention")

# -- the mistake catalogue ----------------------------------------------------------------------------
# Entries that share a name are the same mistake seen from a different angle, explained for that angle.
NO_SCALE = Mistake(
    "no 1/sqrt(d_k) scaling",
    "the raw dot products went into the softmax; their spread grows like sqrt(d_k), so with realistic "
    "widths the softmax saturates into a near one-hot choice whose gradients all but vanish",
    WHY,
)
SCALE_DK = Mistake(
    "scaling by 1/d_k",
    "dividing by d_k instead of sqrt(d_k) shrinks the scores' variance to 1/d_k, so the wider the "
    "vectors, the closer every row of weights gets to a uniform average",
    WHY,
)
WIDTH_DV = Mistake(
    "scaling by sqrt(d_model) or sqrt(L)",
    "the scores were divided by the square root of d_v, the width of the values; the spread of q·k "
    "depends only on the width the dot product runs over, d_k = q.shape[-1]",
    WHY,
)
WIDTH_LK = Mistake(
    "scaling by sqrt(d_model) or sqrt(L)",
    "the scores were divided by the square root of Lk, the number of keys; how many keys there are "
    "does not change the spread of any one dot product, which depends on d_k = q.shape[-1]",
    WHY,
)
WIDTH_LQ = Mistake(
    "scaling by sqrt(d_model) or sqrt(L)",
    "the scores were divided by the square root of Lq, the number of queries (q.shape[-2]); the "
    "spread of a dot product depends on the width it runs over, d_k = q.shape[-1]",
    WHY,
)
WIDTH_DMODEL = Mistake(
    "scaling by sqrt(d_model) or sqrt(L)",
    "the scores were divided by the square root of d_model, the width of x; the dot product runs over "
    "the d_k features that W_q and W_k produce, so divide by sqrt(d_k)",
    WHY,
)
WRONG_DIM = Mistake(
    "softmax over the wrong dim",
    "the softmax normalised over the queries (dim=-2) instead of over the keys (dim=-1); each query's "
    "row of weights must be a distribution over the keys it reads",
    STEPS,
)
WRONG_DIM_LEADING = Mistake(
    "softmax over the wrong dim",
    "the softmax normalised over a leading (batch or head) axis, which is what F.softmax picks when no "
    "dim is given; normalise over the keys, dim=-1",
    STEPS,
)
WEIGHTS_K = Mistake(
    "weights @ k instead of weights @ v",
    "the weights averaged the keys instead of the values; keys only decide where to look, values are "
    "what gets read, so the output has d_v features",
    STEPS,
)
MASK_POLARITY = Mistake(
    "mask polarity inverted",
    "the scores were set to -inf where the mask is True; in this course True means 'may attend', so "
    "fill where the mask is False (~mask)",
    MASKS,
)
MASK_AFTER_SOFTMAX = Mistake(
    "mask applied after the softmax",
    "softmax over every key, then zeroing the forbidden weights and renormalising, equals masking first only "
    "while the numbers are tame: once a forbidden score is far above the allowed ones, the allowed weights "
    "underflow to 0 before the mask is applied and the row becomes 0/0. Fill forbidden scores with -inf before "
    "the softmax",
    MASKS,
)
BATCH_DIMS = Mistake(
    "leading batch dims not handled (wrong axes transposed?)",
    "one example alone (2-D q, k, v) is right, but with leading batch or head dims it breaks: k.T, k.t() or "
    "k.transpose(0, 1) swap the batch axes instead of the last two; k.transpose(-2, -1) counts from the end and "
    "works for any number of leading dims",
    STEPS,
)
PAIR_ORDER = Mistake(
    "output and weights returned in the wrong order",
    "the function returns the output first and the weights second, as its docstring says; the two came back "
    "the other way round",
    STEPS,
)
MASK_NOT_PASSED = Mistake(
    "mask not passed on",
    "forward received a mask but called scaled_dot_product_attention without it, so every key stays visible; "
    "pass it on: scaled_dot_product_attention(q, k, v, mask)",
    CROSS,
)
KEYS_FROM_X = Mistake(
    "cross-attention keys from x",
    "a context was given but the keys and values were computed from x; in cross-attention the queries "
    "come from x and the keys and values from the context",
    CROSS,
)

SHARED_QK = Mistake(
    "a projection shared between Q, K and V",
    "the keys were projected with W_q (the same layer as the queries): every score is then q·W_q-projected "
    "q, so a token's score with itself is always large and W_k is never used; keys need their own W_k",
    CROSS,
)


# What SelfAttention passed to scaled_dot_product_attention, named from what the stand-in saw (see _argument_mistake)
DERIVED_MISTAKES = PASSED_IN_PLACE_OF


# -- reference implementations (instructor side only) ------------------------------------------------
def reference_sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    divisor: float | None = None,
    softmax_dim: int = -1,
    read_keys: bool = False,
    invert_mask: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / divisor) v with switches that reproduce the catalogued mistakes."""
    return attention(q, k, v, mask, divisor=divisor, softmax_dim=softmax_dim, read_keys=read_keys,
                     invert_mask=invert_mask)


def _implicit_softmax_dim(ndim: int) -> int:
    """The dim F.softmax chooses when none is given (torch's legacy rule)."""
    return 0 if ndim in (0, 1, 3) else 1


def sdpa_mistakes(q, k, v, mask=None, d_model=None):
    """({Mistake: wrong output}, {Mistake: wrong weights}) for every catalogued SDPA mistake."""
    args = (q, k, v, mask)
    variants = {
        NO_SCALE: reference_sdpa(*args, divisor=1.0),
        SCALE_DK: reference_sdpa(*args, divisor=float(q.shape[-1])),
        WIDTH_DV: reference_sdpa(*args, divisor=math.sqrt(v.shape[-1])),
        WIDTH_LK: reference_sdpa(*args, divisor=math.sqrt(k.shape[-2])),
        WIDTH_LQ: reference_sdpa(*args, divisor=math.sqrt(q.shape[-2])),
        WRONG_DIM: reference_sdpa(*args, softmax_dim=-2),
    }
    if d_model is not None:
        variants[WIDTH_DMODEL] = reference_sdpa(*args, divisor=math.sqrt(d_model))
    ndim = max(q.dim(), k.dim())
    if ndim >= 3:
        variants[WRONG_DIM_LEADING] = reference_sdpa(*args, softmax_dim=_implicit_softmax_dim(ndim))
    if mask is not None:
        variants[MASK_POLARITY] = reference_sdpa(*args, invert_mask=True)
    outputs = {m: out for m, (out, _w) in variants.items()}
    weights = {m: w for m, (_out, w) in variants.items()}
    outputs[WEIGHTS_K] = reference_sdpa(*args, read_keys=True)[0]
    # A variant that is NaN everywhere (the wrong dim meets a key column the mask forbids for every query) matches
    # any answer that is NaN everywhere, whatever its bug: it names nothing.
    return ({m: t for m, t in outputs.items() if bool(torch.isfinite(t).any())},
            {m: t for m, t in weights.items() if bool(torch.isfinite(t).any())})


def _linear(params: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, params[f"{name}.weight"], params.get(f"{name}.bias"))


def reference_self_attention(params, x, context=None, mask=None, *, keys_from_x=False, key_layer="W_k",
                             **switches):
    """SelfAttention.forward from a state dict (W_q.weight, W_q.bias, ...), with switches for the mistakes."""
    source = x if (context is None or keys_from_x) else context
    q, k, v = _linear(params, "W_q", x), _linear(params, key_layer, source), _linear(params, "W_v", source)
    return reference_sdpa(q, k, v, mask, **switches)


def self_attention_mistakes(params, x, context=None, mask=None):
    """Wrong (outputs, weights) for a SelfAttention: its SDPA's mistakes, plus keys read from x."""
    source = x if context is None else context
    q, k, v = _linear(params, "W_q", x), _linear(params, "W_k", source), _linear(params, "W_v", source)
    outputs, weights = sdpa_mistakes(q, k, v, mask, d_model=x.shape[-1])
    if context is not None and mask is None:
        out, w = reference_self_attention(params, x, context, keys_from_x=True)
        outputs[KEYS_FROM_X], weights[KEYS_FROM_X] = out, w
    if params["W_q.weight"].shape == params["W_k.weight"].shape:  # W_q can only stand in for W_k at the same width
        out, w = reference_self_attention(params, x, context, mask, key_layer="W_q")
        outputs[SHARED_QK], weights[SHARED_QK] = out, w
    return outputs, weights


def _random_mask(g: torch.Generator | None, *shape: int) -> torch.Tensor:
    """A boolean mask whose every row allows at least one key and forbids at least one (no empty rows either way)."""
    mask = torch.rand(*shape, generator=g) > 0.4
    mask[..., 0] = True
    mask[..., -1] = False
    return mask


def _random_params(g: torch.Generator | None, d_model: int, d_k: int, d_v: int) -> dict[str, torch.Tensor]:
    params = {}
    for name, width in (("W_q", d_k), ("W_k", d_k), ("W_v", d_v)):
        params[f"{name}.weight"] = torch.randn(width, d_model, generator=g) / math.sqrt(d_model)
        params[f"{name}.bias"] = torch.randn(width, generator=g) * 0.2
    return params


def make_references() -> dict[str, torch.Tensor]:
    """Hidden inputs and the expected outputs; `attn references 02_scaled_dot_product_attention` stores them."""
    g = torch.Generator().manual_seed(20202)
    refs: dict[str, torch.Tensor] = {}
    # scaled_dot_product_attention: B=2, h=3, Lq=5, Lk=7, d_k=8, d_v=6 (every size different).
    q = torch.randn(2, 3, 5, 8, generator=g)
    k = torch.randn(2, 3, 7, 8, generator=g)
    v = torch.randn(2, 3, 7, 6, generator=g)
    mask = _random_mask(g, 2, 1, 5, 7)  # (B, 1, Lq, Lk): broadcast over the heads
    out, weights = reference_sdpa(q, k, v)
    out_m, weights_m = reference_sdpa(q, k, v, mask)
    refs.update({"sdpa.q": q, "sdpa.k": k, "sdpa.v": v, "sdpa.mask": mask, "sdpa.out": out,
                 "sdpa.weights": weights, "sdpa.masked_out": out_m, "sdpa.masked_weights": weights_m})
    # SelfAttention(12, 8, 6): self-attention with a causal mask, and cross-attention with a longer context.
    params = _random_params(g, 12, 8, 6)
    x = torch.randn(2, 5, 12, generator=g)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    out_self, w_self = reference_self_attention(params, x, mask=causal)
    x_cross = torch.randn(2, 4, 12, generator=g)
    context = torch.randn(2, 7, 12, generator=g)
    out_cross, w_cross = reference_self_attention(params, x_cross, context)
    refs.update({f"SelfAttention.{k}": v for k, v in params.items()})
    refs.update({"SelfAttention.x": x, "SelfAttention.self_out": out_self, "SelfAttention.self_weights": w_self,
                 "SelfAttention.cross_x": x_cross, "SelfAttention.context": context,
                 "SelfAttention.cross_out": out_cross, "SelfAttention.cross_weights": w_cross})
    return refs


# -- hidden tests --------------------------------------------------------------------------------------
def _expect_value_error(fn, what: str, numbers: tuple[int, int]) -> None:
    try:
        fn()
    except ValueError as exc:
        message = str(exc)
        named = all(str(n) in message for n in numbers)
        if not named:
            raise CheckFailure(_(
                "{what} raised ValueError({message}); make the message show the shapes that disagree, so whoever reads "
                "it can see which sizes to fix.").format(what=what, message=repr(message))) from None
    except NotImplementedError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise CheckFailure(_("{what} should raise a ValueError that explains the shapes, got {error}: "
                             "{message}").format(what=what, error=type(exc).__name__, message=exc)) from None
    else:
        raise CheckFailure(_("{what} returned instead of raising ValueError.").format(what=what))


def test_scaled_dot_product_attention(check, refs, scaled_dot_product_attention):
    def compare(q, k, v, mask, out_ref, w_ref, what, **tol):
        args = (q.clone(), k.clone(), v.clone())
        result = scaled_dot_product_attention(*args) if mask is None else scaled_dot_product_attention(*args, mask=mask.clone())
        out, weights = expect_pair(result, "scaled_dot_product_attention")
        if (isinstance(out, torch.Tensor) and isinstance(weights, torch.Tensor) and out_ref.shape != w_ref.shape
                and out.shape == w_ref.shape and weights.shape == out_ref.shape):
            raise CheckFailure(_("the first tensor returned has the weights' shape {first} and the second the "
                                 "output's {second} ({what}).").format(first=tuple(out.shape),
                                                                       second=tuple(weights.shape), what=what),
                               PAIR_ORDER)
        check.close(out, out_ref, _("output ({what})").format(what=what), lambda: sdpa_mistakes(q, k, v, mask)[0],
                    **tol)
        check.close(weights, w_ref, _("weights ({what})").format(what=what), lambda: sdpa_mistakes(q, k, v, mask)[1],
                    **tol)

    def against_torch(lead, Lq, Lk, d_k, d_v, mask_kind, scale=1.0, **tol):
        q = torch.randn(*lead, Lq, d_k) * scale
        k = torch.randn(*lead, Lk, d_k) * scale
        v = torch.randn(*lead, Lk, d_v)
        if mask_kind == "padding":  # (..., 1, Lk): the same keys for every query
            mask = _random_mask(None, *lead[:-1], 1, 1, Lk) if lead else _random_mask(None, 1, Lk)
        elif mask_kind == "pattern":  # (Lq, Lk): the same pattern for every batch element and head
            mask = _random_mask(None, Lq, Lk)
        else:
            mask = None
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        _out, w_ref = reference_sdpa(q, k, v, mask)
        if lead and mask is None:
            def output(q, k, v):
                return expect_pair(scaled_dot_product_attention(q.clone(), k.clone(), v.clone()),
                                   "scaled_dot_product_attention")[0]

            check.batched(output, (q, k, v), (True, True, True), len(lead), expected,
                          _("output (q {q}, k {k}, v {v})").format(q=tuple(q.shape), k=tuple(k.shape),
                                                                   v=tuple(v.shape)), BATCH_DIMS,
                          mistakes=lambda: sdpa_mistakes(q, k, v)[0], **tol)
        compare(q, k, v, mask, expected, w_ref, _("q {q}, k {k}, v {v}, mask {mask}, compared with torch's").format(
            q=tuple(q.shape), k=tuple(k.shape), v=tuple(v.shape), mask=None if mask is None else tuple(mask.shape)),
            **tol)

    q, k, v, mask = (refs[f"sdpa.{n}"] for n in ("q", "k", "v", "mask"))
    with check("matches the reference on hidden inputs (B=2, h=3, Lq=5, Lk=7, d_k=8, d_v=6), no mask", weight=2):
        compare(q, k, v, None, refs["sdpa.out"], refs["sdpa.weights"], _("hidden input"))
    with check("matches the reference on the same inputs with a boolean (B, 1, Lq, Lk) mask", weight=2):
        compare(q, k, v, mask, refs["sdpa.masked_out"], refs["sdpa.masked_weights"], _("hidden input with a mask"))
    with check("equals torch.nn.functional.scaled_dot_product_attention on fresh non-square inputs, 0 to 3 leading dims"):
        for lead, Lq, Lk, d_k, d_v in [((3, 4), 9, 6, 16, 10), ((2,), 11, 13, 32, 20), ((), 4, 7, 5, 3),
                                       ((2, 2, 3), 3, 5, 12, 7)]:
            with check.case():
                against_torch(lead, Lq, Lk, d_k, d_v, None)
    with check("equals torch's with masks that broadcast: key padding (B, 1, 1, Lk) and a (Lq, Lk) pattern"):
        against_torch((3, 2), 6, 9, 16, 10, "padding")
        against_torch((2, 4), 5, 7, 12, 20, "pattern")
    with check("equals torch's on a larger input (B=2, h=4, Lq=300, Lk=333, d_k=64, d_v=48) with a mask"):
        against_torch((2, 4), 300, 333, 64, 48, "pattern", atol=2e-5)
    with check("large scores (entries of q and k around ±30) neither overflow nor give NaN"):
        against_torch((2,), 6, 8, 16, 12, None, scale=30.0, atol=1e-4)
    with check("a forbidden key whose score is far above the allowed ones still gets no weight", weight=2):
        # Positive queries: every query scores the forbidden keys high. Alternate rows are far enough above the
        # allowed scores (about 50) that the allowed weights stay normal floats, or so far (about 170) that they are
        # exactly 0; never in between, where they would be subnormal, with so few bits that renormalising them
        # (mask applied after the softmax) gives a different answer for every rounding of exp.
        base = torch.tensor([0.35, 1.5, 0.35, 1.5, 0.35]).view(5, 1)
        q3 = torch.rand(2, 3, 5, 8) * 0.2 + base
        k3, v3 = torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
        keys = torch.rand(7) > 0.5
        allowed = int(torch.randint(0, 7, (1,)))
        keys[allowed] = True  # at least one allowed key
        if keys.all():  # and at least one forbidden (1 draw in 128 allowed all 7: then no mistake here could show)
            keys[(allowed + 1) % 7] = False
        k3[..., ~keys, :] = 40.0  # scores of forbidden keys: 40 to 180 above the allowed ones
        m3 = keys.expand(5, 7)
        _out3, w3 = reference_sdpa(q3, k3, v3, m3)
        after = torch.softmax(q3 @ k3.transpose(-2, -1) / math.sqrt(8), dim=-1) * m3
        after = after / after.sum(dim=-1, keepdim=True)  # 0 / 0 where every allowed weight underflowed
        out, weights = expect_pair(scaled_dot_product_attention(q3.clone(), k3.clone(), v3.clone(), mask=m3.clone()),
                                   "scaled_dot_product_attention")
        what = _("forbidden scores far above the allowed ones")
        check.close(out, F.scaled_dot_product_attention(q3, k3, v3, attn_mask=m3),
                    _("output ({what})").format(what=what),
                    lambda: {**sdpa_mistakes(q3, k3, v3, m3)[0], MASK_AFTER_SOFTMAX: after @ v3}, atol=1e-4)
        check.close(weights, w3, _("weights ({what})").format(what=what),
                    lambda: {**sdpa_mistakes(q3, k3, v3, m3)[1], MASK_AFTER_SOFTMAX: after}, atol=1e-4)
    with check("gradients reach q, k and v as they do through the reference (nothing detached)"):
        g_mask = _random_mask(None, 2, 4, 6)
        check.gradients(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=g_mask.clone()),
                        {"q": torch.randn(2, 4, 8), "k": torch.randn(2, 6, 8), "v": torch.randn(2, 6, 5)},
                        lambda q, k, v: reference_sdpa(q, k, v, g_mask), "scaled_dot_product_attention")
    with check("keeps the inputs' dtype: float64 gives float64, float16 gives float16 (output and weights)"):
        q, k, v, m = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5), _random_mask(None, 2, 4, 6)
        for dtype in KEPT_DTYPES:
            with check.case():
                out, w = expect_pair(scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), mask=m.clone()),
                                     "scaled_dot_product_attention")
                want_out, want_w = reference_sdpa(q.double(), k.double(), v.double(), m)
                what = _("{what} for inputs of dtype {dtype}")
                check.close(out, want_out.to(dtype), what.format(what=_("output"), dtype=dtype), **HALF_TOLERANCE)
                check.close(w, want_w.to(dtype), what.format(what=_("weights"), dtype=dtype), **HALF_TOLERANCE)
    with check("leaves its inputs unchanged (no in-place edits of q, k, v or mask)", weight=0.5):
        q2, k2, v2 = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 5)
        m2 = _random_mask(None, 2, 4, 6)
        copies = [t.clone() for t in (q2, k2, v2, m2)]
        scaled_dot_product_attention(q2, k2, v2, mask=m2)
        for name, before, after in zip(("q", "k", "v", "mask"), copies, (q2, k2, v2, m2)):
            check.true(torch.equal(before, after),
                       _("{name} was changed in place; the caller still needs it.").format(name=name))
    with check("mismatched shapes raise ValueError naming them: d_k of q vs k, and Lk of k vs v"):
        _expect_value_error(
            lambda: scaled_dot_product_attention(torch.randn(2, 4, 13), torch.randn(2, 6, 11), torch.randn(2, 6, 5)),
            _("q with d_k = 13 and k with d_k = 11"), (13, 11))
        _expect_value_error(
            lambda: scaled_dot_product_attention(torch.randn(2, 4, 8), torch.randn(2, 17, 8), torch.randn(2, 19, 5)),
            _("k with Lk = 17 and v with Lk = 19"), (17, 19))


def _build(cls, d_model: int, d_k: int, d_v: int):
    module = cls(d_model, d_k, d_v)
    if not isinstance(module, nn.Module):
        raise CheckFailure(_("{what} should be an nn.Module, got {type}.").format(what="SelfAttention",
                                                                                  type=type(module).__name__))
    return module


def _load(module, params: dict[str, torch.Tensor]) -> None:
    load_weights(module, params, N_("W_q and W_k = nn.Linear(d_model, d_k) and W_v = nn.Linear(d_model, d_v), with "
                                    "their biases (nn.Linear's default)"))


def _self_attention_params(refs) -> dict[str, torch.Tensor]:
    return {k.removeprefix("SelfAttention."): v for k, v in refs.items() if k.startswith("SelfAttention.W_")}


def _argument_mistake(params, x, context, calls) -> Mistake | None:
    """The mistake in what SelfAttention passed to scaled_dot_product_attention (seen by the stand-in), if any."""
    if len(calls) != 1:
        return None
    inputs = {"x": x} if context is None else {"x": x, "context": context}
    candidates = {(name, where): _linear(params, name, t) for where, t in inputs.items() for name in ("W_q", "W_k", "W_v")}
    source = "x" if context is None else "context"
    q, k, v, _mask = calls[0]
    found = passed_in_place_of({"queries": q, "keys": k, "values": v}, candidates,
                               {"queries": ("W_q", "x"), "keys": ("W_k", source), "values": ("W_v", source)})
    if found is None:
        return None
    # the two that the catalogue already names (and names the same way when the attention is written inline)
    return {"keys and values from x, not from the context": KEYS_FROM_X,
            "keys made with W_q, not W_k": SHARED_QK}.get(found[0]) or Mistake(found[0], found[1], CROSS,
                                                                            words=found[2])


def _test_self_attention(check, refs, SelfAttention, calls):
    def compare(module, params, x, context, mask, out_ref, w_ref, what, **tol):
        kwargs = {}
        if context is not None:
            kwargs["context"] = context
        if mask is not None:
            kwargs["mask"] = mask
        calls.clear()
        try:
            with torch.no_grad():
                out, weights = expect_pair(module(x, **kwargs), "SelfAttention.forward")
        except (NotImplementedError, CheckTimeout, CheckFailure):
            raise
        except Exception:
            named = _argument_mistake(params, x, context, calls)
            if named is None:
                raise
            raise CheckFailure(_("SelfAttention.forward ({what}) passed scaled_dot_product_attention tensors it could "
                                 "not combine.").format(what=what), named) from None
        named = _argument_mistake(params, x, context, calls)
        if mask is not None and len(calls) == 1 and calls[0][3] is None:
            named = MASK_NOT_PASSED

        def wrong(i):
            found = self_attention_mistakes(params, x, context, mask)[i]
            return {named: (out, weights)[i], **found} if named else found
        check.close(out, out_ref, _("output ({what})").format(what=what), lambda: wrong(0), **tol)
        check.close(weights, w_ref, _("weights ({what})").format(what=what), lambda: wrong(1), **tol)

    params = _self_attention_params(refs)
    with check("supplied weights reproduce stored outputs: self-attention with a causal mask (B=2, L=5, d_model=12, d_k=8, d_v=6)", weight=2):
        module = _build(SelfAttention, 12, 8, 6)
        _load(module, params)
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        compare(module, params, refs["SelfAttention.x"], None, causal, refs["SelfAttention.self_out"],
                refs["SelfAttention.self_weights"], _("hidden self-attention input"))
    with check("supplied weights reproduce stored outputs: cross-attention, x of length 4, context of length 7", weight=2):
        module = _build(SelfAttention, 12, 8, 6)
        _load(module, params)
        compare(module, params, refs["SelfAttention.cross_x"], refs["SelfAttention.context"], None,
                refs["SelfAttention.cross_out"], refs["SelfAttention.cross_weights"],
                _("hidden cross-attention input"))
    with check("matches nn.Linear + torch's scaled_dot_product_attention: cross-attention with a key-padding mask"):
        B, Lq, Lk, d_model, d_k, d_v = 3, 6, 9, 16, 4, 10
        fresh = _random_params(None, d_model, d_k, d_v)
        module = _build(SelfAttention, d_model, d_k, d_v)
        _load(module, fresh)
        x, context = torch.randn(B, Lq, d_model), torch.randn(B, Lk, d_model)
        mask = _random_mask(None, B, 1, Lk)  # (B, 1, Lk): padding on the context's keys
        q, k, v = _linear(fresh, "W_q", x), _linear(fresh, "W_k", context), _linear(fresh, "W_v", context)
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        _out, w_ref = reference_sdpa(q, k, v, mask)
        compare(module, fresh, x, context, mask, expected, w_ref,
                _("fresh cross-attention input, compared with torch's"))
    with check("context=None is self-attention: the same result as passing context=x"):
        module = _build(SelfAttention, 10, 6, 3)
        _load(module, _random_params(None, 10, 6, 3))
        x = torch.randn(2, 7, 10)
        with torch.no_grad():
            out_none, w_none = expect_pair(module(x), "SelfAttention.forward")
            out_x, w_x = expect_pair(module(x, context=x), "SelfAttention.forward")
        check.close(out_none, out_x, "output with context=None vs context=x")
        check.close(w_none, w_x, "weights with context=None vs context=x")


def _gradients_reach_the_projections(check, SelfAttention):
    with check("gradients reach W_q, W_k and W_v (nothing detached, nothing under no_grad)"):
        module = _build(SelfAttention, 8, 4, 5)
        x, context = torch.randn(2, 3, 8), torch.randn(2, 6, 8)
        out, weights = expect_pair(module(x, context=context), "SelfAttention.forward")
        (out.square().sum() + weights.square().sum()).backward()
        for name in ("W_q", "W_k", "W_v"):
            grad = getattr(module, name).weight.grad
            check.true(grad is not None and bool(grad.abs().sum() > 0),
                       _("{name}.weight received no gradient: is its output detached or computed under no_grad, or "
                         "is another projection used where {name} belongs?").format(name=name))


V_WIDTH = Mistake(
    "W_v sized d_k instead of d_v",
    "the values have their own width d_v, which may differ from d_k: W_v = nn.Linear(d_model, d_v), so the output "
    "is (B, Lq, d_v)",
    CROSS,
)


def test_self_attention(check, refs, SelfAttention):
    """Graded on its own: the scaled_dot_product_attention it calls is the reference one (its bugs cost points there)."""
    calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]] = []

    def sdpa(q, k, v, mask=None):
        calls.append((q, k, v, mask))
        return reference_sdpa(q, k, v, mask)

    with check("W_v maps d_model to d_v (here d_k = 8, d_v = 6), W_q and W_k to d_k"):
        module = _build(SelfAttention, 12, 8, 6)
        widths = {name: getattr(getattr(module, name, None), "out_features", None) for name in ("W_q", "W_k", "W_v")}
        check.true(widths == {"W_q": 8, "W_k": 8, "W_v": 6},
                   _("out_features of W_q, W_k, W_v are {widths}, expected 8, 8 and 6 for SelfAttention(12, 8, "
                     "6).").format(widths=widths),
                   V_WIDTH if widths == {"W_q": 8, "W_k": 8, "W_v": 8} else None)
    with standing_in(SelfAttention, scaled_dot_product_attention=sdpa):
        _test_self_attention(check, refs, SelfAttention, calls)
    # Gradients must flow through the attention: the course's runs in the learner's process for this check.
    with standing_in(SelfAttention, scaled_dot_product_attention=LocalPart("attention")):
        _gradients_reach_the_projections(check, SelfAttention)


# -- name_the_bug: which implementation made this output? ----------------------------------------------------
NAME_BUG = N_("Exercise 2 — name the bug")

#: The labels, as the notebook's locked cell gives them to the learner (the same strings, in the same order).
BUGS = ("correct", "no scaling", "scaled by d_k", "softmax over the queries", "weights times keys", "something else")

#: How each label's output is made (through `attention`'s switches); "something else" is made below.
_LABEL_SWITCHES = {
    "correct": {},
    "no scaling": {"divisor": 1.0},
    "scaled by d_k": {"divisor": None},  # filled with float(d_k) per input
    "softmax over the queries": {"softmax_dim": -2},
    "weights times keys": {"read_keys": True},
}

EXACT_COMPARE = Mistake(
    "outputs compared exactly, or with too tight a tolerance",
    "outputs that one of the listed implementations made were not recognised: two float32 computations of the same "
    "formula (another order of operations, another kernel, a float64 run rounded to float32) differ in the last "
    "bits, so == and torch.equal almost never hold, and torch.allclose's default atol (1e-8) is too tight for "
    "entries near 0. Compare with a tolerance well above float32's rounding and well below the gap between two "
    "implementations, e.g. atol=1e-4",
    NAME_BUG,
)
SCALES_SWAPPED = Mistake(
    "'no scaling' and 'scaled by d_k' swapped",
    "the output of the unscaled attention was named 'scaled by d_k' and the 1/d_k one 'no scaling': the two "
    "implementations were mixed up. No scaling divides by 1 (the raw q·k, sharp weights); 'scaled by d_k' divides by "
    "d_k instead of sqrt(d_k) (weights closer to uniform)",
    NAME_BUG,
)
CORRECT_BY_DEFAULT = Mistake(
    "'correct' by default",
    "an output that none of the listed implementations made was named 'correct': 'correct' must be a match with the "
    "correct attention like every other label, and an output that matches nothing is 'something else'",
    NAME_BUG,
)
FIXED_AXIS = Mistake(
    "an axis counted from the front",
    "the answers are right for inputs with one number of leading dims and wrong for another: an axis counted from "
    "the front (dim=0 or dim=1, k.T, transpose(0, 1)) moves when a batch or head axis is added. Count from the "
    "end: the queries are dim=-2, the keys' last two axes are transpose(-2, -1)",
    NAME_BUG,
)


def _bug_output(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, label: str) -> torch.Tensor:
    """What the implementation labelled `label` returns, computed in float64 and rounded to float32 (as another
    implementation's float32 output would differ from the learner's in the last bits)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    switches = dict(_LABEL_SWITCHES[label])
    if label == "scaled by d_k":
        switches["divisor"] = float(q.shape[-1])
    return attention(q64, k64, v64, **switches)[0].to(q.dtype)


def _something_else(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kind: int) -> torch.Tensor:
    """An output that none of the listed implementations makes: two of the bugs at once, or the scores divided by
    sqrt(Lk) (the number of keys, not the width)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    if kind == 0:  # no scaling and weights times keys together
        return attention(q64, k64, v64, divisor=1.0, read_keys=True)[0].to(q.dtype)
    if kind == 1:  # softmax over the queries, and no scaling
        return attention(q64, k64, v64, divisor=1.0, softmax_dim=-2)[0].to(q.dtype)
    return attention(q64, k64, v64, divisor=math.sqrt(k.shape[-2]))[0].to(q.dtype)


def _separated(outputs: dict[str, torch.Tensor], float32: dict[str, torch.Tensor], gap: float = 0.05,
               rounding: float = 1e-5) -> bool:
    """Every two outputs of the same shape differ by more than `gap` somewhere, and each label's float32 computation
    (the learner's likely one) is within `rounding` of the float64-made output: any tolerance between the two works."""
    labels = list(outputs)
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if outputs[a].shape == outputs[b].shape and float((outputs[a] - outputs[b]).abs().max()) <= gap:
                return False
    return all(float((float32[label] - outputs[label]).abs().max()) < rounding for label in float32)


def _float32_candidates(q, k, v) -> dict[str, torch.Tensor]:
    """The listed implementations computed in float32, the plain way."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1)
    return {"correct": torch.softmax(scores / math.sqrt(d_k), dim=-1) @ v,
            "no scaling": torch.softmax(scores, dim=-1) @ v,
            "scaled by d_k": torch.softmax(scores / d_k, dim=-1) @ v,
            "softmax over the queries": torch.softmax(scores / math.sqrt(d_k), dim=-2) @ v,
            "weights times keys": torch.softmax(scores / math.sqrt(d_k), dim=-1) @ k}


#: Hidden shapes (leading dims, Lq, Lk, d_k, d_v): 0 to 2 leading dims, d_k never 1 (where 1/d_k = 1/sqrt(d_k)),
#: d_v = d_k in some (the shape cannot tell "weights times keys" there), one query alone in one; and which
#: "something else" each gets (`_something_else`'s kind: sqrt(Lk) only where Lk is far from d_k, 1 and d_k²).
_BUG_SHAPES = [((2, 3), 6, 5, 4, 4, 0), ((3,), 4, 9, 16, 16, 2), ((), 5, 7, 8, 6, 1), ((2,), 1, 6, 8, 5, 0),
               ((2, 2), 7, 11, 32, 32, 1), ((), 3, 10, 2, 2, 2)]
#: Leading dims a 2-D input is also given with, copied (the same numbers): a right answer cannot depend on them.
_COPIES = [(2,), (2, 3)]


def _bug_cases(g: torch.Generator | None = None) -> list[tuple[tuple[torch.Tensor, ...], str, int, int]]:
    """[((q, k, v, output), label, number of leading dims, family)] for every hidden shape and label, in a random
    order; the cases of one family hold the same numbers with 0, 1 or 2 leading dims (copies of a 2-D input)."""
    cases = []
    for i, (lead, Lq, Lk, d_k, d_v, kind) in enumerate(_BUG_SHAPES):
        for _attempt in range(50):  # redraw until no two labels nearly coincide on this input
            q = torch.randn(*lead, Lq, d_k, generator=g)
            k = torch.randn(*lead, Lk, d_k, generator=g)
            v = torch.randn(*lead, Lk, d_v, generator=g)
            outputs = {label: _bug_output(q, k, v, label) for label in _LABEL_SWITCHES}
            outputs["something else"] = _something_else(q, k, v, kind)
            if _separated(outputs, _float32_candidates(q, k, v)):
                break
        else:
            raise RuntimeError(f"no input of shape {_BUG_SHAPES[i]} keeps the labels apart")  # the grader's bug
        for label, out in outputs.items():
            cases.append(((q, k, v, out), label, len(lead), i))
            if not lead:
                for copies in _COPIES:
                    copied = tuple(t.expand(*copies, *t.shape).clone() for t in (q, k, v))
                    made = _something_else(*copied, kind) if label == "something else" else _bug_output(*copied, label)
                    cases.append(((*copied, made), label, len(copies), i))
    order = torch.randperm(len(cases), generator=g).tolist()
    return [cases[j] for j in order]


def test_name_the_bug(check, refs, name_the_bug):
    answers = []  # (label, what the learner's function said, leading dims, family)
    errors: dict[str, BaseException] = {}
    with standing_in(name_the_bug, scaled_dot_product_attention=_reference_parts()["scaled_dot_product_attention"]):
        for (q, k, v, out), label, lead, family in _bug_cases():
            inputs = (q.clone(), k.clone(), v.clone(), out.clone())
            try:
                said = name_the_bug(*inputs)
            except (NotImplementedError, CheckTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - one input's crash fails the checks of its label only
                errors.setdefault(label, exc)
                said = exc
            answers.append((label, said, lead, family))
            if not all(torch.equal(a, b) for a, b in zip(inputs, (q, k, v, out))):
                errors.setdefault("changed", CheckFailure(_(
                    "name_the_bug changed its inputs in place; the caller still needs them.")))

    wrong = [(label, said) for label, said, _lead, _family in answers if said != label]
    said_labels = {said if isinstance(said, str) else None for _label, said, _lead, _family in answers}
    by_content: dict[tuple[str, int], set] = {}
    for label, said, _lead, family in answers:
        by_content.setdefault((label, family), set()).add(said if isinstance(said, str) else type(said).__name__)
    # the catalogued mistake that explains every wrong answer, if one does
    mistake = None
    missed = [label != "something else" and said == "something else" for label, said in wrong]
    fell_through = [said == "correct" for _label, said in wrong]  # nothing matched, and the default was "correct"
    if any(len(said) > 1 for said in by_content.values()):
        mistake = FIXED_AXIS  # the same numbers got different names with another number of leading dims
    elif wrong and all({label, said} == {"no scaling", "scaled by d_k"} for label, said in wrong):
        mistake = SCALES_SWAPPED
    elif wrong and all(label == "something else" and said == "correct" for label, said in wrong):
        mistake = CORRECT_BY_DEFAULT
    elif wrong and (all(missed) or (all(fell_through) and len(said_labels) == 1)):
        mistake = EXACT_COMPARE

    def verdict(label: str, text: str) -> None:
        if label in errors:
            exc = errors[label]
            raise CheckFailure(_("name_the_bug raised {error} on an output made by '{label}': {message}").format(
                error=type(exc).__name__, label=label, message=exc), mistake)
        for want, said, lead, _family in answers:
            if want != label:
                continue
            if not isinstance(said, str) or said not in BUGS:
                raise CheckFailure(_("name_the_bug returned {said!r}, which is not one of the labels in BUGS.").format(
                    said=said))
            message = text
            if said == "something else" and want != "something else":  # the output is within 1e-5 of `want`'s
                message = _("the output of '{want}' (leading dims: {lead}) was named 'something else', though it is within "
                         "1e-5 of that implementation computed in float32: a comparison that finds no match there is "
                         "too strict.")
            check.true(said == want, message.format(said=said, lead=lead, want=want), mistake)

    def only(label: str) -> None:
        """No output of another implementation was given `label`."""
        for want, said, lead, _family in answers:
            check.true(said != label or want == label,
                       _("the output of '{want}' (leading dims: {lead}) was named '{said}'.").format(
                           want=want, lead=lead, said=said), mistake)

    with check("names a correct attention's output 'correct' (several shapes, 0 to 2 leading dims), and no other"):
        verdict("correct", _("a correct attention's output (leading dims: {lead}) was named '{said}'."))
        only("correct")
    with check("names the output of attention without the 1/sqrt(d_k) 'no scaling'"):
        verdict("no scaling", _("the output of attention without scaling (leading dims: {lead}) was named '{said}'."))
    with check("names the output of attention divided by d_k instead of sqrt(d_k) 'scaled by d_k'"):
        verdict("scaled by d_k", _("the output of attention divided by d_k (leading dims: {lead}) was named '{said}'."))
    with check("names the output of a softmax over the queries (dim=-2) 'softmax over the queries'"):
        verdict("softmax over the queries",
                _("the output of a softmax over the queries (leading dims: {lead}) was named '{said}'."))
    with check("names 'weights times keys', also where d_v = d_k and the shape cannot tell"):
        verdict("weights times keys", _("the output of weights @ k (leading dims: {lead}) was named '{said}'."))
    with check("says 'something else' for outputs none of these made (two bugs at once, a divisor of sqrt(Lk)), "
               "and only for those"):
        verdict("something else", _("an output that none of the listed implementations makes (leading dims: {lead}) "
                                    "was named '{said}'."))
        only("something else")
    with check("leaves its inputs unchanged", weight=0.5):
        if "changed" in errors:
            raise errors["changed"]


def _reference_parts():
    def scaled_dot_product_attention(q, k, v, mask=None):
        return reference_sdpa(q, k, v, mask)

    return {"scaled_dot_product_attention": scaled_dot_product_attention}


# While grading, the visible checks of a composite exercise run with these parts standing in for the learner's.
STAND_INS = {"name_the_bug": _reference_parts, "SelfAttention": _reference_parts}

HIDDEN_TESTS = {
    "scaled_dot_product_attention": test_scaled_dot_product_attention,
    "name_the_bug": test_name_the_bug,
    "SelfAttention": test_self_attention,
}
