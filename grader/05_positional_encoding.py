"""Hidden tests of 05_positional_encoding: reference encodings on unseen sizes, the offset and RoPE properties, known mistakes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from utils.grading import CheckFailure, CheckTimeout, Mistake, standing_in
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

# -- the catalogue of known mistakes (section names are the notebook's headings) -----------------------
CONCAT = Mistake(
    "concatenated instead of interleaved sin/cos",
    "your table puts every sine in the first half of the vector and every cosine in the second half; the layout "
    "asked for is interleaved (sin on even dimensions, cos on odd ones), so each pair (2i, 2i+1) is one point "
    "on a circle that a 2x2 rotation can move",
    "2. Sinusoidal encoding",
)
EXP_I = Mistake(
    "exponent i/d instead of 2i/d",
    "pair i should turn at 1/10000^(2i/d_model), with 2i the index of its even dimension; dividing i (not 2i) "
    "by d_model makes the slowest pairs turn far too fast, so the longest wavelength is about 100 instead of "
    "about 10000 (the same numbers as base 100 with the right exponent 2i/d_model)",
    "2. Sinusoidal encoding",
)
WRONG_BASE = Mistake(
    "wrong base",
    "the frequencies come from a base other than 10000 (a typo such as 1000 or 100000, or log10 where the formula "
    "needs the natural log), which changes every wavelength except the first",
    "2. Sinusoidal encoding",
)
TRANSPOSED = Mistake(
    "transposed rotation",
    "your matrix turns each pair by -k instead of +k, so it moves PE[pos] back to PE[pos - k]; redo the "
    "angle-addition formulas for one (sin, cos) pair and read off which entry gets +sin",
    "3. The offset property: a shift is a rotation",
)
DROPOUT_IN_EVAL = Mistake(
    "dropout active in eval mode",
    "model.eval() must switch dropout off: use the nn.Dropout module (it follows train() / eval()), or pass "
    "training=self.training to F.dropout. With dropout in eval mode every translation and every test is random",
    "4. The `PositionalEncoding` module",
)
DROPOUT_BEFORE_ADD = Mistake(
    "dropout before the addition",
    "in train mode every output is either PE (x dropped, the table added after) or 2x + PE: the dropout acts on x "
    "alone and the table is added afterwards, whole. The dropout regularises the sum, so it comes after the "
    "addition: dropout(x + PE[:L])",
    "4. The `PositionalEncoding` module",
)
INTERLEAVED_ROPE = Mistake(
    "interleaved-pair RoPE",
    "you rotate the neighbouring pairs (x0, x1), (x2, x3), ... as in the RoFormer paper; the convention asked "
    "for here (LLaMA, Hugging Face) pairs x_i with x_(i + d/2), the rotate_half layout. Both are rotary "
    "encodings, but a checkpoint trained with one gives wrong scores with the other",
    "6. Rotary position embedding (RoPE)",
)

POSITIONS_FROM_1 = Mistake(
    "positions counted from 1",
    "your table's row pos holds the encoding of position pos + 1: the positions run 1..max_len instead of "
    "0..max_len-1, so the first token does not get PE[0] = (0, 1, 0, 1, ...); use torch.arange(max_len)",
    "2. Sinusoidal encoding",
)
FREQ_SIGN = Mistake(
    "frequencies grow instead of shrink",
    "the exponent lost its minus sign: 10000^(2i/d) makes the pairs turn faster and faster (the last ones by "
    "thousands of radians per position) instead of slower; the speed of pair i is 10000^(-2i/d) = 1 / 10000^(2i/d)",
    "2. Sinusoidal encoding",
)
OFFSET_IGNORED = Mistake(
    "offset k ignored",
    "the angles are the speeds ω_i themselves, not k·ω_i, so the matrix moves every encoding by one position "
    "whatever k is; rotate pair i by k·ω_i",
    "3. The offset property: a shift is a rotation",
)
ROPE_NOT_ROTATION = Mistake(
    "RoPE's sign slip: not a rotation",
    "the two halves must be (x1·cos - x2·sin, x2·cos + x1·sin): one minus and one plus. With the same sign in "
    "both the pair is not rotated (its norm changes), so the scores no longer depend on m - n alone",
    "6. Rotary position embedding (RoPE)",
)
EMBEDDING_SCALED = Mistake(
    "x scaled inside the module",
    "forward must return x + PE[:L] (then dropout); multiplying x by sqrt(d_model) is the embedding layer's "
    "convention in some models, and it does not belong in this module",
    "4. The `PositionalEncoding` module",
)
ROPE_BACKWARDS = Mistake(
    "RoPE rotates by -angle",
    "the signs of the sine terms are flipped, so every pair turns clockwise, by -m·θ_i; that is the inverse "
    "rotation. Scores still depend on m - n only, but with the opposite sign of every checkpoint trained with "
    "RoPE: the first half gets x1·cos - x2·sin, the second x2·cos + x1·sin",
    "6. Rotary position embedding (RoPE)",
)
ROPE_IGNORES_POSITIONS = Mistake(
    "RoPE ignores `positions`",
    "the rotation angles come from torch.arange(L), each token's index in x, instead of the `positions` "
    "argument; with a KV cache or a shifted window the positions are not 0..L-1, and the rotation must follow them",
    "6. Rotary position embedding (RoPE)",
)

# Bases a learner might use by accident: typos, and log10 / ln mix-ups inside exp(-2i/d * log(base)).
# (Base 100 is missing on purpose: 100^(2i/d) = 10000^(i/d), so it is the EXP_I mistake and named as that.)
WRONG_BASES = (1000.0, 10.0, 100000.0, math.exp(4.0), 10.0 ** math.log(10000.0), 2.0 * math.pi * 10000.0)


# -- reference implementations (float64 inside, float32 out) ---------------------------------------------
def _freqs(d: int, base: float = 10000.0, two: float = 2.0) -> torch.Tensor:
    i = torch.arange(d // 2, dtype=torch.float64)
    return base ** (-two * i / d)  # (d/2,)


def reference_sinusoidal(max_len: int, d_model: int, base: float = 10000.0, two: float = 2.0,
                         layout: str = "interleaved", start: int = 0) -> torch.Tensor:
    positions = torch.arange(start, start + max_len, dtype=torch.float64)
    angle = positions[:, None] * _freqs(d_model, base, two)  # (max_len, d/2)
    if layout == "interleaved":
        pe = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)  # sin, cos, sin, cos, ...
    else:
        pe = torch.cat([angle.sin(), angle.cos()], dim=-1)  # all sines, then all cosines
    return pe.float()


def reference_offset_rotation(k: float, d_model: int, base: float = 10000.0, two: float = 2.0) -> torch.Tensor:
    angle = k * _freqs(d_model, base, two)
    c, s = angle.cos(), angle.sin()
    blocks = [torch.tensor([[ci, si], [-si, ci]], dtype=torch.float64) for ci, si in zip(c.tolist(), s.tolist())]
    return torch.block_diag(*blocks).float()


def reference_rope(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0, two: float = 2.0,
                   pairing: str = "half", signs: str = "-+") -> torch.Tensor:
    d = x.shape[-1]
    angle = positions.to(torch.float64)[:, None] * _freqs(d, base, two)  # (L, d/2)
    cos, sin = angle.cos(), angle.sin()
    xd = x.to(torch.float64)
    if pairing == "half":
        x1, x2 = xd[..., : d // 2], xd[..., d // 2:]
        first = x1 * cos - x2 * sin if signs[0] == "-" else x1 * cos + x2 * sin
        second = x2 * cos + x1 * sin if signs[1] == "+" else x2 * cos - x1 * sin
        out = torch.cat([first, second], dim=-1)
    elif pairing == "interleaved":
        x1, x2 = xd[..., 0::2], xd[..., 1::2]
        out = torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)
    else:  # neighbours rotated, but written back as two halves
        x1, x2 = xd[..., 0::2], xd[..., 1::2]
        out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    return out.to(x.dtype)


def _nearest(actual, candidates: list[torch.Tensor]) -> torch.Tensor:
    """The candidate closest to `actual` (so one catalogue entry can stand for several wrong bases)."""
    best, best_diff = candidates[0], math.inf
    if isinstance(actual, torch.Tensor):
        for cand in candidates:
            if cand.shape == actual.shape:
                diff = float((actual.detach().double() - cand.double()).abs().nan_to_num(nan=math.inf).max())
                if diff < best_diff:
                    best, best_diff = cand, diff
    return best


def _grown_table_float32(max_len: int, d_model: int) -> torch.Tensor:
    """FREQ_SIGN's table computed in float32, as a learner's code does: its angles reach thousands of radians,
    where float32's rounding of the angle changes the sine in the third decimal."""
    i = torch.arange(d_model // 2, dtype=torch.float32)
    angle = torch.arange(max_len, dtype=torch.float32)[:, None] * 10000.0 ** (2 * i / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)


def _table_mistakes(actual, max_len: int, d_model: int, transform=lambda pe: pe) -> dict:
    """The known wrong tables for (max_len, d_model), passed through `transform` (e.g. x + pe)."""
    return {
        CONCAT: transform(reference_sinusoidal(max_len, d_model, layout="concat")),
        EXP_I: transform(reference_sinusoidal(max_len, d_model, two=1.0)),
        WRONG_BASE: _nearest(actual, [transform(reference_sinusoidal(max_len, d_model, base=b)) for b in WRONG_BASES]),
        POSITIONS_FROM_1: transform(reference_sinusoidal(max_len, d_model, start=1)),
        FREQ_SIGN: _nearest(actual, [transform(reference_sinusoidal(max_len, d_model, two=-2.0)),
                                     transform(_grown_table_float32(max_len, d_model))]),
    }


def _raises_value_error(fn, *args) -> bool:
    try:
        fn(*args)
    except ValueError:
        return True
    return False


# -- reference tensors on inputs the learner never sees ---------------------------------------------------
SIN_SIZES = ((37, 22), (50, 256))
OFFSETS = ((5, 14), (-3, 10), (40, 32))
PE_SIZE = dict(B=3, L=11, d_model=18, max_len=40)
ROPE_SHAPE = (2, 3, 7, 12)


def make_references() -> dict[str, torch.Tensor]:
    """Inputs the learner never sees and the expected outputs; `attn references` stores them."""
    g = torch.Generator().manual_seed(5005)
    refs: dict[str, torch.Tensor] = {}
    for max_len, d_model in SIN_SIZES:
        refs[f"sinusoidal.{max_len}x{d_model}"] = reference_sinusoidal(max_len, d_model)
    for k, d_model in OFFSETS:
        refs[f"offset.{k}.{d_model}"] = reference_offset_rotation(k, d_model)
    s = PE_SIZE
    x = torch.randn(s["B"], s["L"], s["d_model"], generator=g)
    refs["pe.x"] = x
    refs["pe.out"] = x + reference_sinusoidal(s["max_len"], s["d_model"])[: s["L"]]
    x = torch.randn(*ROPE_SHAPE, generator=g)
    positions = torch.tensor([3, 0, 5, 9, 1, 2, 11])
    refs["rope.x"] = x
    refs["rope.positions"] = positions
    refs["rope.out"] = reference_rope(x, positions)
    refs["rope.out_base500"] = reference_rope(x, positions, base=500.0)
    return refs


# -- hidden tests ----------------------------------------------------------------------------------------
def test_sinusoidal_encoding(check, refs, sinusoidal_encoding):
    for max_len, d_model in SIN_SIZES:
        with check(_("matches the reference table for max_len={max_len}, d_model={d_model}").format(
                max_len=max_len, d_model=d_model), weight=2):
            out = sinusoidal_encoding(max_len, d_model)
            check.close(out, refs[f"sinusoidal.{max_len}x{d_model}"], "the table",
                        mistakes=_table_mistakes(out, max_len, d_model), atol=1e-4)
    with check("each pair (2i, 2i+1) is a point on the unit circle: sin^2 + cos^2 = 1"):
        pe = sinusoidal_encoding(13, 10).double()
        on_circle = torch.allclose(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(13, 5, dtype=torch.float64), atol=1e-4)
        halves = torch.allclose(pe[:, :5] ** 2 + pe[:, 5:] ** 2, torch.ones(13, 5, dtype=torch.float64), atol=1e-4)
        check.true(on_circle, "PE[pos, 2i]^2 + PE[pos, 2i+1]^2 is not 1 for every pos and i: dimensions 2i and "
                   "2i+1 should hold the sine and the cosine of the same angle.", CONCAT if halves else None)
    with check("float32, finite, every value in [-1, 1]"):
        pe = sinusoidal_encoding(29, 16)
        check.true(isinstance(pe, torch.Tensor) and pe.dtype == torch.float32, "the table should be a float32 tensor.")
        check.true(torch.isfinite(pe).all() and pe.abs().max() <= 1 + 1e-6, "sines and cosines lie in [-1, 1].")
    with check("position 0 is (0, 1, 0, 1, ...) for a wide table"):
        pe = sinusoidal_encoding(3, 30)
        check.close(pe[0], torch.tensor([0.0, 1.0] * 15), "PE[0]",
                    mistakes={POSITIONS_FROM_1: reference_sinusoidal(3, 30, start=1)[0]})
    with check("an odd d_model raises ValueError"):
        check.true(_raises_value_error(sinusoidal_encoding, 10, 7),
                   "sinusoidal_encoding(10, 7) should raise ValueError: the dimensions come in (sin, cos) pairs.")


def test_offset_rotation(check, refs, offset_rotation):
    for k, d_model in OFFSETS:
        with check(_("matches the reference matrix for k={k}, d_model={d_model}").format(k=k, d_model=d_model),
                   weight=2):
            M = offset_rotation(k, d_model)
            ref = refs[f"offset.{k}.{d_model}"]
            wrong = {
                TRANSPOSED: ref.T.contiguous(),
                **({OFFSET_IGNORED: reference_offset_rotation(1, d_model)} if k != 1 else {}),
                EXP_I: reference_offset_rotation(k, d_model, two=1.0),
                WRONG_BASE: _nearest(M, [reference_offset_rotation(k, d_model, base=b) for b in WRONG_BASES]),
            }
            check.close(M, ref, "M", mistakes=wrong, atol=1e-5)
    with check("PE[pos + k] = M @ PE[pos] for every pos (d_model=24, k=7, reference table)"):
        M = offset_rotation(7, 24)
        check.true(isinstance(M, torch.Tensor) and M.shape == (24, 24), "M should be a (d_model, d_model) tensor.")
        pe = reference_sinusoidal(70, 24).double()
        moved = (M.double() @ pe[7:53].T).T  # (46, 24): row j is M @ PE[7 + j]
        # PE[pos + 7] is the target; a rotation by -k lands on PE[pos - 7] instead.
        check.close(moved, pe[14:60], "M @ PE[pos] stacked over pos", mistakes={TRANSPOSED: pe[0:46]}, atol=1e-4)
    with check("negative and large offsets: M(-k) = M(k).T and M(1000) is still a rotation"):
        a, b = offset_rotation(-9, 16).double(), offset_rotation(9, 16).double()
        check.close(a, b.T.contiguous(), "M(-9)", atol=1e-5)
        big = offset_rotation(1000, 16).double()
        check.close(big @ big.T, torch.eye(16, dtype=torch.float64), "M(1000) @ M(1000).T", atol=1e-4)
    with check("returns float32", weight=0.5):
        M = offset_rotation(2, 6)
        check.true(isinstance(M, torch.Tensor) and M.dtype == torch.float32, "M should be a float32 tensor.")


def _test_PositionalEncoding(check, refs, PositionalEncoding):
    s = PE_SIZE
    with check("eval mode, dropout=0: forward(x) = x + PE[:L] (reference table, hidden sizes)", weight=2):
        module = PositionalEncoding(s["d_model"], s["max_len"], 0.0).eval()
        out = module(refs["pe.x"])
        x = refs["pe.x"]
        mistakes = _table_mistakes(out, s["max_len"], s["d_model"], transform=lambda pe: x + pe[: s["L"]])
        mistakes[EMBEDDING_SCALED] = x * math.sqrt(s["d_model"]) + reference_sinusoidal(s["max_len"], s["d_model"])[: s["L"]]
        check.close(out, refs["pe.out"], "forward(x)", mistakes=mistakes, atol=1e-4)
    with check("the table is a buffer, not a parameter, and it moves with .to()"):
        module = PositionalEncoding(10, 20, 0.0)
        check.true(len(list(module.parameters())) == 0,
                   "the module has trainable parameters; the sinusoidal table is fixed, so register it with register_buffer.")
        buffers = dict(module.named_buffers())
        check.true("pe" in buffers, "no buffer named `pe` (use self.register_buffer('pe', table)).")
        module = module.to(torch.float64)
        check.true(module.pe.dtype == torch.float64, "after .to(torch.float64) the table is not float64: is it a buffer?")
    with check("forward reads the buffer: a table supplied with load_state_dict is what gets added"):
        module = PositionalEncoding(6, 9, 0.0).eval()
        table = torch.randn(9, 6)
        module.load_state_dict({"pe": table})
        x = torch.randn(2, 4, 6)
        check.close(module(x), x + table[:4], "forward(x) after load_state_dict", atol=1e-5)
    with check("train mode, dropout=0.5: about half the entries are zeroed and the rest are (x + PE) * 2"):
        module = PositionalEncoding(32, 64, 0.5).train()
        x = torch.randn(4, 64, 32)
        out = module(x)
        expected = 2 * (x + reference_sinusoidal(64, 32))
        kept = out != 0
        frac = float(kept.float().mean())
        table = reference_sinusoidal(64, 32)
        before = frac > 0.6 and bool((((out - table).abs() < 1e-4) | ((out - table - 2 * x).abs() < 1e-4)).all())
        check.true(0.4 < frac < 0.6, "in train mode with dropout=0.5 about half of the outputs should be zero.",
                   DROPOUT_BEFORE_ADD if before else None)
        check.close(out[kept], expected[kept], "the entries dropout kept", atol=1e-4)
    with check("eval mode with dropout=0.5: no dropout at all, forward(x) = x + PE, the same on every call", weight=2):
        module = PositionalEncoding(16, 40, 0.5).eval()
        x = torch.randn(3, 11, 16)
        before = x.clone()
        first, second = module(x), module(x)
        check.true(torch.allclose(first, second), "two calls in eval mode gave different outputs.", DROPOUT_IN_EVAL)
        check.close(first, x + reference_sinusoidal(40, 16)[:11], "forward(x) in eval mode", atol=1e-4)
        check.true(torch.equal(x, before), "forward changed x in place (x += ...): return x + pe instead.")
    with check("L = max_len works, L = max_len + 1 raises a ValueError that gives both numbers"):
        module = PositionalEncoding(8, 12, 0.0).eval()
        check.shape(module(torch.zeros(1, 12, 8)), (1, 12, 8), "forward of a sequence of exactly max_len")
        check.true(_raises_value_error(module, torch.zeros(1, 13, 8)),
                   "a sequence longer than max_len should raise ValueError.")
        try:
            module(torch.zeros(1, 13, 8))
        except ValueError as error:
            said = str(error)
            check.true("12" in said and "13" in said, _(
                "the ValueError for 13 tokens with max_len=12 says {said!r}: a message that gives both numbers (the "
                "length and max_len) tells the user what to change.").format(said=said))
    with check("after the module, attention can tell word orders apart (no longer permutation-equivariant)"):
        module = PositionalEncoding(16, 32, 0.0).eval()
        x = torch.randn(1, 6, 16)
        perm = torch.tensor([3, 1, 5, 0, 2, 4])
        attend = lambda z: F.scaled_dot_product_attention(z, z, z)  # noqa: E731
        plain = torch.allclose(attend(x[:, perm]), attend(x)[:, perm], atol=1e-5)
        with_pe = torch.allclose(attend(module(x[:, perm])), attend(module(x))[:, perm], atol=1e-5)
        check.true(plain and not with_pe, "permuting the tokens of x only permuted the attention output even after "
                   "PositionalEncoding: the module does not add a different vector at each position.")


def test_apply_rope(check, refs, apply_rope):
    x, positions = refs["rope.x"], refs["rope.positions"]
    with check("matches the reference on hidden (B, h, L, d) inputs with arbitrary positions", weight=2):
        out = apply_rope(x, positions)
        mistakes = {
            INTERLEAVED_ROPE: _nearest(out, [reference_rope(x, positions, pairing=p) for p in ("interleaved", "mixed")]),
            EXP_I: reference_rope(x, positions, two=1.0),
            WRONG_BASE: _nearest(out, [reference_rope(x, positions, base=b) for b in WRONG_BASES]),
            ROPE_IGNORES_POSITIONS: reference_rope(x, torch.arange(x.shape[-2])),
            ROPE_BACKWARDS: reference_rope(x, -positions),
            ROPE_NOT_ROTATION: _nearest(out, [reference_rope(x, positions, signs=sg) for sg in ("--", "++")]),
        }
        check.close(out, refs["rope.out"], "apply_rope(x, positions)", mistakes=mistakes, atol=1e-4)
    with check("honours the base argument (base=500)"):
        check.close(apply_rope(x, positions, base=500), refs["rope.out_base500"], "apply_rope(x, positions, base=500)",
                    mistakes={ROPE_IGNORES_POSITIONS: reference_rope(x, torch.arange(x.shape[-2]), base=500),
                              ROPE_BACKWARDS: reference_rope(x, -positions, base=500)},
                    atol=1e-4)
    with check("scores depend only on m - n (fresh non-square q, k and a random shift)"):
        q, k = torch.randn(2, 3, 5, 16, dtype=torch.float64), torch.randn(2, 3, 9, 16, dtype=torch.float64)
        m, n = torch.randint(0, 50, (5,)), torch.randint(0, 50, (9,))
        shift = int(torch.randint(1, 100, ()))
        before = apply_rope(q, m) @ apply_rope(k, n).transpose(-2, -1)  # (2, 3, 5, 9)
        after = apply_rope(q, m + shift) @ apply_rope(k, n + shift).transpose(-2, -1)
        check.close(after, before, "scores after shifting both positions", atol=1e-3, rtol=1e-3)
    with check("positions travel with their tokens: permuting tokens and positions together permutes the output"):
        xx = torch.randn(2, 8, 10)
        pos = torch.arange(20, 28)
        perm = torch.randperm(8)
        check.close(apply_rope(xx[:, perm], pos[perm]), apply_rope(xx, pos)[:, perm], "apply_rope of permuted tokens",
                    atol=1e-5)
    with check("keeps the dtype and shape of x (float64, float16 and bfloat16, 2-D x of shape (L, d))"):
        for dtype in (torch.float64, torch.float16, torch.bfloat16):  # half in, half out: angles in float32, cast
            with check.case():
                xx = torch.randn(6, 8, dtype=dtype)
                out = apply_rope(xx, torch.arange(6))
                check.true(isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == (6, 8),
                           "apply_rope should return a tensor with x's shape and dtype.")


def test_PositionalEncoding(check, refs, PositionalEncoding):
    """Graded on its own: the sinusoidal_encoding it calls is the reference one (its bugs cost points there)."""
    def sinusoidal_encoding(max_len, d_model):
        return reference_sinusoidal(max_len, d_model)

    with standing_in(PositionalEncoding, sinusoidal_encoding=sinusoidal_encoding):
        _test_PositionalEncoding(check, refs, PositionalEncoding)


def _reference_table():
    def sinusoidal_encoding(max_len, d_model):
        return reference_sinusoidal(max_len, d_model)

    return {"sinusoidal_encoding": sinusoidal_encoding}


# -- name_the_rope_bug: which RoPE implementation made this output? ---------------------------------------------
NAME_ROPE_BUG = N_("Exercise 5 — name the RoPE bug")

#: The labels, as the notebook's locked cell gives them to the learner (the same strings, in the same order).
ROPE_BUGS = ("correct", "neighbour pairs", "wrong direction", "positions shifted", "wrong frequencies",
             "not a rotation", "something else")

ROPE_EXACT_COMPARE = Mistake(
    "rotated vectors compared exactly, or with too tight a tolerance",
    "outputs of every listed implementation were named 'something else', on some inputs or on all: two float32 "
    "computations of the same rotation (another order of operations, angles rounded differently, a float64 run rounded to float32) "
    "differ in the last bits, so == and torch.equal almost never hold, and torch.allclose's default atol (1e-8) is "
    "too tight for entries near 0. Compare with a tolerance well above float32's rounding and well below the gap "
    "between two implementations",
    NAME_ROPE_BUG,
)
ROPE_TOLERANCE_SCALE = Mistake(
    "a tolerance that ignores the size of x",
    "every output was recognised except on the inputs with large entries (hundreds or thousands): there float32's "
    "rounding of the angle, times the length of the vector, is far above a fixed atol such as 1e-4. A tolerance must "
    "follow the scale of the numbers compared, e.g. atol = 1e-4 * x.abs().max()",
    NAME_ROPE_BUG,
)
ROPE_BASE_DROPPED = Mistake(
    "`base` not passed on",
    "the answers are right for base = 10000 and wrong for another base: the candidates were computed with the "
    "default base (apply_rope(x, positions) without base=base), so on an input made with base 500 none of them is "
    "the implementation that made the output",
    NAME_ROPE_BUG,
)
ROPE_CORRECT_BY_DEFAULT = Mistake(
    "'correct' by default",
    "an output that none of the listed implementations made was named 'correct': 'correct' must be a match with the "
    "correct rotation like every other label, and an output that matches nothing is 'something else'",
    NAME_ROPE_BUG,
)
ROPE_FIXED_AXIS = Mistake(
    "an axis counted from the front",
    "the same numbers got different names with another number of leading dims: an axis counted from the front "
    "(x[:, 0::2], dim=1, transpose(0, 1)) moves when a batch or head axis is added. Count from the end: the pairs "
    "are in the last axis (x[..., 0::2]), the tokens in the second to last",
    NAME_ROPE_BUG,
)


def _rope_bug_output(x: torch.Tensor, positions: torch.Tensor, base: float, label: str) -> torch.Tensor:
    """What the implementation labelled `label` returns, computed in float64 and rounded to x's dtype."""
    if label == "correct":
        return reference_rope(x, positions, base)
    if label == "neighbour pairs":
        return reference_rope(x, positions, base, pairing="interleaved")
    if label == "wrong direction":
        return reference_rope(x, -positions, base)
    if label == "positions shifted":
        return reference_rope(x, positions + 1, base)
    if label == "wrong frequencies":
        return reference_rope(x, positions, base, two=1.0)
    if label == "not a rotation":
        return reference_rope(x, positions, base, signs="++")
    raise ValueError(label)


def _rope_something_else(x: torch.Tensor, positions: torch.Tensor, base: float, kind: int) -> torch.Tensor:
    """An output none of the listed implementations makes: two bugs at once, positions one too small, or the
    frequencies of base 10000 where the input asked for another base."""
    if kind == 0:  # neighbour pairs, turned the wrong way
        return reference_rope(x, -positions, base, pairing="interleaved")
    if kind == 1:  # positions one too small (m - 1)
        return reference_rope(x, positions - 1, base)
    if kind == 2:  # the base argument ignored (only used where base != 10000)
        return reference_rope(x, positions, 10000.0)
    return reference_rope(x, positions + 1, base, two=1.0)  # wrong frequencies and shifted positions


def _rope_float32_candidates(x, positions, base) -> dict[str, torch.Tensor]:
    """The listed implementations computed in float32 the plain way (angles in float32), as a learner's code does."""
    d, half = x.shape[-1], x.shape[-1] // 2
    i = torch.arange(half, dtype=torch.float32)

    def rotate(m, two=2.0, pairing="half", signs="-+"):
        angle = m.to(torch.float32)[:, None] * (base ** (-two * i / d))
        c, s = angle.cos(), angle.sin()
        if pairing == "half":
            a, b = x[..., :half], x[..., half:]
        else:
            a, b = x[..., 0::2], x[..., 1::2]
        first = a * c - b * s if signs[0] == "-" else a * c + b * s
        second = b * c + a * s
        if pairing == "half":
            return torch.cat([first, second], dim=-1)
        return torch.stack([first, second], dim=-1).flatten(-2)

    return {"correct": rotate(positions), "neighbour pairs": rotate(positions, pairing="neighbours"),
            "wrong direction": rotate(-positions), "positions shifted": rotate(positions + 1),
            "wrong frequencies": rotate(positions, two=1.0), "not a rotation": rotate(positions, signs="++")}


def _rope_separated(outputs, float32, scale: float, gap: float = 0.05, rounding: float = 1e-5) -> bool:
    """Every two outputs differ by more than `gap` * scale somewhere, and each label's float32 computation is within
    `rounding` * scale of the float64-made output (scale: the largest entry of x)."""
    labels = list(outputs)
    for n, a in enumerate(labels):
        for b in labels[n + 1:]:
            if float((outputs[a] - outputs[b]).abs().max()) <= gap * scale:
                return False
    return all(float((float32[label] - outputs[label]).abs().max()) < rounding * scale for label in float32)


#: Hidden inputs (leading dims, L, d, base, positions, scale of x, kind of "something else"): 0 to 2 leading dims,
#: d >= 4 (at d = 2 the two pairings are one), bases other than 10000, positions that do not start at 0 or are not
#: in order, and one input with entries in the thousands.
_ROPE_BUG_INPUTS = [((2, 3), 5, 8, 10000.0, "arange", 1.0, 0), ((3,), 6, 12, 500.0, "random", 1.0, 2),
                    ((), 7, 16, 10000.0, "cache", 1.0, 1), ((2,), 4, 6, 100.0, "random", 1000.0, 3),
                    ((), 5, 4, 10000.0, "random", 1.0, 0), ((2, 2), 3, 32, 50000.0, "random", 3.0, 2)]
_ROPE_COPIES = [(2,), (2, 3)]


def _rope_positions(kind: str, L: int, g) -> torch.Tensor:
    if kind == "arange":
        return torch.arange(L)
    if kind == "cache":  # a cache that continues at position 100
        return torch.arange(100, 100 + L)
    return torch.randperm(48, generator=g)[:L]  # distinct, not in order, not from 0


def _rope_bug_cases(g: torch.Generator | None = None):
    """[((x, positions, base, output), label, leading dims, family, large)] for every hidden input and label, in a
    random order; a 0-leading-dim input is also given with 1 and 2 leading dims (copies of the same numbers)."""
    cases = []
    for n, (lead, L, d, base, kind, scale, other) in enumerate(_ROPE_BUG_INPUTS):
        for _attempt in range(50):  # redraw until no two labels nearly coincide on this input
            x = torch.randn(*lead, L, d, generator=g) * scale
            positions = _rope_positions(kind, L, g)
            outputs = {label: _rope_bug_output(x, positions, base, label) for label in ROPE_BUGS[:-1]}
            outputs["something else"] = _rope_something_else(x, positions, base, other)
            size = float(x.abs().max())
            if _rope_separated(outputs, _rope_float32_candidates(x, positions, base), size):
                break
        else:
            raise RuntimeError(f"no input {_ROPE_BUG_INPUTS[n]} keeps the labels apart")  # the grader's bug
        def rounded_elsewhere(out: torch.Tensor) -> torch.Tensor:
            """`out` as another implementation's float32 rounding leaves it: a few units of float32's last place of
            the largest entry apart, so that only a comparison with a tolerance recognises it."""
            return out + torch.randn(out.shape, generator=g) * (1e-6 * size)

        for label, out in outputs.items():
            cases.append(((x, positions, base, rounded_elsewhere(out)), label, len(lead), n, scale > 100))
            if not lead:
                for copies in _ROPE_COPIES:
                    xc = x.expand(*copies, *x.shape).clone()
                    made = (_rope_something_else(xc, positions, base, other) if label == "something else"
                            else _rope_bug_output(xc, positions, base, label))
                    cases.append(((xc, positions, base, rounded_elsewhere(made)), label, len(copies), n, scale > 100))
    order = torch.randperm(len(cases), generator=g).tolist()
    return [cases[j] for j in order]


_ROPE_BUG_CHECKS = {
    "correct": N_("names a correct RoPE's output 'correct' (0 to 2 leading dims, other bases, positions not from 0), "
                  "and no other output"),
    "neighbour pairs": N_("names the output of RoPE on neighbouring pairs 'neighbour pairs', and no other output"),
    "wrong direction": N_("names the output of a rotation by -m·θ 'wrong direction', and no other output"),
    "positions shifted": N_("names the output of RoPE at positions m + 1 'positions shifted', and no other output"),
    "wrong frequencies": N_("names the output of θ_i = base^(-i/d) 'wrong frequencies', and no other output"),
    "not a rotation": N_("names the output of the same-sign formula 'not a rotation', and no other output"),
    "something else": N_("says 'something else' for outputs none of these made (two bugs at once, positions m - 1, "
                         "base 10000 where another was asked for), and only for those"),
}


def test_name_the_rope_bug(check, refs, name_the_rope_bug):
    answers = []  # (label, what the learner's function said, leading dims, family, large, base)
    errors: dict[str, BaseException] = {}
    with standing_in(name_the_rope_bug, apply_rope=_reference_rope_part()["apply_rope"]):
        for (x, positions, base, out), label, lead, family, large in _rope_bug_cases():
            inputs = (x.clone(), positions.clone(), out.clone())
            try:
                said = name_the_rope_bug(*inputs, base=base)
            except (NotImplementedError, CheckTimeout):
                raise
            except Exception as exc:  # noqa: BLE001 - one input's crash fails the checks of its label only
                errors.setdefault(label, exc)
                said = exc
            answers.append((label, said, lead, family, large, base))
            if not all(torch.equal(a, b) for a, b in zip(inputs, (x, positions, out))):
                errors.setdefault(label, CheckFailure(_(
                    "name_the_rope_bug changed its inputs in place; the caller still needs them.")))

    wrong = [(label, said, large, base) for label, said, _lead, _family, large, base in answers if said != label]
    by_content: dict[tuple[str, int], set] = {}
    for label, said, _lead, family, _large, _base in answers:
        by_content.setdefault((label, family), set()).add(said if isinstance(said, str) else type(said).__name__)
    right_at_10000 = all(said == label for label, said, _lead, _family, _large, base in answers if base == 10000.0)
    mistake = None  # the catalogued mistake that explains every wrong answer, if one does
    if any(len(said) > 1 for said in by_content.values()):
        mistake = ROPE_FIXED_AXIS
    elif wrong and all(large and said == "something else" for _label, said, large, _base in wrong):
        mistake = ROPE_TOLERANCE_SCALE
    elif wrong and right_at_10000 and any(label == "something else" and said == "correct"
                                          for label, said, _large, base in wrong if base != 10000.0):
        # computed at base 10000: the output made at base 10000 where another base was asked for is "correct" to it
        mistake = ROPE_BASE_DROPPED
    elif wrong and all(label == "something else" and said == "correct" for label, said, _large, _base in wrong):
        mistake = ROPE_CORRECT_BY_DEFAULT
    elif wrong and all(label != "something else" and said == "something else" for label, said, _l, _b in wrong) \
            and {label for label, *_rest in wrong} == set(ROPE_BUGS[:-1]):
        mistake = ROPE_EXACT_COMPARE

    def verdict(label: str) -> None:
        if label in errors:
            exc = errors[label]
            if isinstance(exc, CheckFailure):
                raise exc
            raise CheckFailure(_("name_the_rope_bug raised {error} on an output made by '{label}': {message}").format(
                error=type(exc).__name__, label=label, message=exc), mistake)
        for want, said, lead, _family, large, base in answers:
            if want != label:
                continue
            if not isinstance(said, str) or said not in ROPE_BUGS:
                raise CheckFailure(_("name_the_rope_bug returned {said!r}, which is not one of the labels in "
                                     "ROPE_BUGS.").format(said=said))
            if said == "something else" and want != "something else":
                message = _("the output of '{want}' (leading dims: {lead}, base {base}{large}) was named 'something "
                            "else', though it is within float32's rounding of that implementation: either your "
                            "version of '{want}' computes something other than the table describes, or your "
                            "comparison is too strict for numbers of this size.")
            else:
                message = _("the output of '{want}' (leading dims: {lead}, base {base}{large}) was named '{said}'.")
            check.true(said == want, message.format(
                want=want, said=said, lead=lead, base=f"{base:g}", large=_(", entries in the thousands") if large else ""),
                mistake)
        for want, said, lead, _family, _large, base in answers:  # no output of another implementation got `label`
            check.true(said != label or want == label,
                       _("the output of '{want}' (leading dims: {lead}, base {base}) was named '{said}'.").format(
                           want=want, lead=lead, base=f"{base:g}", said=said), mistake)

    for label in ROPE_BUGS:
        with check(_(_ROPE_BUG_CHECKS[label])):
            verdict(label)


def _reference_rope_part():
    def apply_rope(x, positions, base=10000):
        return reference_rope(x, positions, float(base))

    return {"apply_rope": apply_rope}


# While grading, the visible checks of a composite exercise run with these parts standing in for the learner's
# (utils.engine.checking.GradingContext), as its hidden tests do: a bug in a part costs points in that part only.
STAND_INS = {"PositionalEncoding": _reference_table, "name_the_rope_bug": _reference_rope_part}

HIDDEN_TESTS = {
    "sinusoidal_encoding": test_sinusoidal_encoding,
    "offset_rotation": test_offset_rotation,
    "PositionalEncoding": test_PositionalEncoding,
    "apply_rope": test_apply_rope,
    "name_the_rope_bug": test_name_the_rope_bug,
}
