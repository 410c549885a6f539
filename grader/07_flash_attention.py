"""Hidden tests of 07_flash_attention: blockwise references, the IO model, gradients, memory, known mistakes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from utils.attention_variants import undefined_as as _undefined_rows_as
from utils.diagnose import count_diagnosis
from utils.grading import CheckFailure, CheckTimeout, Mistake, peak_memory, standing_in
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown

NOTEBOOK = "07_flash_attention"
ONLINE = N_("3. Online softmax")
TILING = N_("4. Tiling: attention one block at a time")
LSE = N_("5. The logsumexp: what the backward pass needs")
CAUSAL = N_("6. Causal attention: skipping whole blocks")
IO = N_("7. An IO-cost model")
BACKWARD = N_("9. The backward pass: recompute, don't store")
TRITON = N_("10. The same forward pass in Triton")

# -- the catalogue of known mistakes (section names are the notebook's headings) -----------------------
SUM_NOT_RESCALED = Mistake(
    "running sum not rescaled when the max grows",
    "when a block raises the running max from m to m', the sum collected so far is a sum of exp(x - m) and "
    "must be multiplied by exp(m - m') before the new block's exp(x - m') terms are added; yours adds them "
    "to the stale sum, so rows whose max arrives late come out wrong",
    ONLINE,
)
NO_RESCALE = Mistake(
    "old output not rescaled when the max grows",
    "everything accumulated before a block that raises the running max (the sum l and the output O) was "
    "weighted with exp(s - m_old); both must be multiplied by exp(m_old - m_new) before the new block is "
    "added, otherwise early and late keys are weighted on different scales",
    TILING,
)
SUM_ONLY = Mistake(
    "sum rescaled but output not",
    "the running sum l is multiplied by exp(m_old - m_new) when the max grows, but the output accumulator O "
    "is not: O and l then disagree about the scale of the early keys, and O / l over-weights them",
    TILING,
)
CAUSAL_OFF_BY_ONE = Mistake(
    "causal block skipping off by one",
    "for the query block [q_start, q_end) the key blocks to visit are those that start before q_end (the "
    "last query of the block may see keys up to q_end - 1), the diagonal block included, with the mask "
    "applied inside it; your loop stops one block (or one key) early, so queries miss their own key or "
    "the whole diagonal block, and the first rows have nothing to attend to (0 / 0 = NaN)",
    CAUSAL,
)
TAIL_DROPPED = Mistake(
    "tail block dropped",
    "when the length is not a multiple of the block size, the last block is shorter but still there: "
    "range(0, L, block) visits it, range(0, L - block + 1, block) or L // block blocks do not, and "
    "the last keys (or queries) are silently left out",
    TILING,
)
MAX_BEFORE_MASK = Mistake(
    "forbidden scores still set the row's scale",
    "the running max must be taken after the causal mask: a future key's score, however large, must not raise m. "
    "Yours takes the block's max before masking, so when a forbidden score is about 90 or more above the allowed "
    "ones, every allowed exp(s - m) underflows to 0 in float32 and the row comes out 0 / 0",
    CAUSAL,
)
LSE_NO_MAX = Mistake(
    "logsumexp without the max",
    "the running sum l is a sum of exp(s - m), so log(l) is the logsumexp of the scores shifted by m; "
    "the logsumexp of the scores themselves is m + log(l)",
    LSE,
)
NO_ROW_TERM = Mistake(
    "softmax gradient without the row term D",
    "the softmax's Jacobian gives dS = P * (dP - D) with D = rowsum(dO * O) (= rowsum(P * dP)), one number "
    "per query; dropping D leaves dV right but dQ and dK wrong",
    BACKWARD,
)

LSE_MAX_ONLY = Mistake(
    "logsumexp as the max alone",
    "the running max m is only the largest score of the row; the logsumexp is m + log(l), where l is the running sum "
    "of exp(s - m), a number between 1 and Lk. Returning m leaves out log(l)",
    LSE,
)
GRID_UNWRITTEN = Mistake(
    "launch grid leaves parts of the output unwritten",
    "some (batch, head) slices or some query blocks of the output are right and the others are not computed at all: "
    "no program instance was launched for them, so they hold whatever the memory of torch.empty held. The grid needs "
    "one instance per query block along its first axis, triton.cdiv(Lq, BLOCK_M), and one per (batch, head) slice "
    "along its second, and each instance must find its own slice and rows from tl.program_id(0) and tl.program_id(1)",
    TRITON,
)
BLOCKS_FLOORED = Mistake(
    "query blocks counted with floor, not ceil",
    "the number of query blocks is T_r = ceil(N / B_r): when B_r does not divide N, the last query block is partial, "
    "and it still reads all of K and V. N // B_r leaves that block out, and the tiled count comes out 2Nd short",
    IO,
)
BYTES_AS_ELEMENTS = Mistake(
    "SRAM bytes counted as elements",
    "sram_bytes is a size in bytes; the SRAM holds M = sram_bytes // element_bytes numbers, and the blocks are "
    "sized from M. Counting bytes as elements makes the blocks element_bytes times too large",
    IO,
)
D_WITHOUT_O = Mistake(
    "D without the output",
    "the row term is D_i = rowsum(dO_i ∘ O_i), the gradient flowing back through each row's normalisation; "
    "rowsum(dO) alone leaves the output O out of the product",
    BACKWARD,
)
BACKWARD_UNMASKED = Mistake(
    "backward ignores the causal mask",
    "the backward pass recomputes P from q, k and the saved logsumexp, and must mask the future there as the "
    "forward did: with causal=True, keys j > i get P = 0, so they receive no gradient",
    BACKWARD,
)
NOT_NORMALISED = Mistake(
    "output not divided by the running sum",
    "after the last key block each row's accumulator holds Σ exp(s - m)·v; the output is that divided by the "
    "running sum l, acc / l, otherwise the weights do not sum to 1",
    TILING,
)
LOCAL_COLS = Mistake(
    "causal mask with tile-local key indices",
    "inside a tile the key index must be the global one, k_start + j, to compare with the global query index: "
    "counting keys from 0 in every tile leaves later blocks' future keys unmasked",
    CAUSAL,
)
MAX_STARTS_AT_ZERO = Mistake(
    "running max started at 0, not -inf",
    "the running max m must start at -inf (no score seen yet), so that the first block sets it. Started at 0, it "
    "stays 0 for a row whose scores all lie far below zero: every exp(s - 0) underflows to 0, the sum is 0 and the "
    "row comes out 0 / 0 = NaN (its logsumexp log 0 = -inf). Scores of -1e4 are rare in a random test but common "
    "after a mask or in low precision",
    ONLINE,
)
NO_MAX_SHIFT = Mistake(
    "no max-shift inside the tiles",
    "each tile's exp must be taken of s - m (the running max), not of s itself: exp(s) overflows to inf once a "
    "score passes about 88 in float32 (inf / inf = NaN) and underflows to 0 below about -100 (0 / 0 = NaN). The "
    "running max is what makes the streamed softmax safe, as the max-subtraction does in notebook 01",
    ONLINE,
)
NO_SCALE = Mistake(
    "scores not scaled by 1/sqrt(d)",
    "the scores are q . k / sqrt(d) (notebook 02): without the 1/sqrt(d) every tile's scores are sqrt(d) times "
    "too large and the softmax too peaked. Scale q (or each tile's scores) once, before the max and the exp",
    TILING,
)
SCALED_BY_D = Mistake(
    "scores scaled by 1/d instead of 1/sqrt(d)",
    "the scale is 1/sqrt(d), which keeps the scores' variance near 1 (notebook 02); 1/d shrinks them sqrt(d) "
    "times too far and flattens the softmax",
    TILING,
)
CAUSAL_DIAGONAL = Mistake(
    "causal mask hides the diagonal",
    "query i may see key i, itself: the mask forbids keys j > i, not j >= i. Hiding the diagonal takes every "
    "query's own key away, and leaves query 0 with no key at all (0 / 0)",
    CAUSAL,
)
CAUSAL_INVERTED = Mistake(
    "causal mask inverted",
    "query i may see keys j <= i (its past and itself) and must not see keys j > i; yours masks the other side, "
    "so queries see the future and not the past (the last query of a block sees nothing: 0 / 0)",
    CAUSAL,
)

NEG_INF = float("-inf")


# -- reference implementations (float64 inside; instructor side only) -----------------------------------
def reference_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).to(x.dtype)


def online_softmax_variant(x: torch.Tensor, block_size: int, *, rescale: bool = True, full_blocks: bool = False,
                           max_start: float = NEG_INF, no_shift: bool = False):
    """Streaming softmax with a mistake switched on (rescale=False, only full blocks visited, the running max
    started at `max_start` instead of -inf, or no max-shift at all: in x's own dtype, where it overflows)."""
    if no_shift:
        e = torch.exp(x)
        return e / e.sum(dim=-1, keepdim=True)
    xd = x.double()
    L = xd.shape[-1]
    m = torch.full(xd.shape[:-1], max_start, dtype=torch.float64)
    l = torch.zeros(xd.shape[:-1], dtype=torch.float64)
    stop = L - block_size + 1 if full_blocks else L
    for start in range(0, max(stop, 0), block_size):
        block = xd[..., start:start + block_size]
        m_new = torch.maximum(m, block.amax(dim=-1))
        shift = m_new.masked_fill(m_new == NEG_INF, 0.0)
        old = l * torch.exp(m - shift) if rescale else l
        l = old + torch.exp(block - shift[..., None]).sum(dim=-1)
        m = m_new
    return (torch.exp(xd - m[..., None]) / l[..., None]).to(x.dtype)


def scaled_scores(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    s = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Lq, Lk)
    if causal:
        Lq, Lk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Lq, Lk, dtype=torch.bool).triu(1), NEG_INF)  # top-left: key j <= query i
    return s


def reference_attention(q, k, v, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact answer: (output, logsumexp of the scaled, masked scores), in q's dtype."""
    s = scaled_scores(q, k, causal)
    out = torch.softmax(s, dim=-1) @ v.double()
    return out.to(q.dtype), torch.logsumexp(s, dim=-1).to(q.dtype)


def reference_attention_by_rows(q, k, v, causal: bool = False, rows: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """`reference_attention`, 128 query rows at a time (a (128, Lk) block: 4 MiB of float64 at Lk = 4096).

    The stand-in for the learner's flash_attention while FlashAttentionFunction is graded. In a live kernel it runs
    in the learner's process, where a dense reference (a 4096 x 4096 float64 matrix and its softmax, 256 MiB) would
    count against their own memory check: that is what stored 2.6 / 3 in the solution (07-W1)."""
    Lq, Lk = q.shape[-2], k.shape[-2]
    out = q.new_empty(*q.shape[:-1], v.shape[-1])
    lse = q.new_empty(q.shape[:-1])
    # float64 where values are compared; the 4096-long memory check compares only shapes, and float32 halves its time
    work = torch.float64 if Lq * Lk <= 2**20 else q.dtype
    kd, vd = k.to(work), v.to(work)
    for start in range(0, Lq, rows):
        end = min(start + rows, Lq)
        s = q[..., start:end, :].to(work) @ kd.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.arange(Lk)[None, :] > torch.arange(start, end)[:, None], NEG_INF)
        out[..., start:end, :] = (torch.softmax(s, dim=-1) @ vd).to(q.dtype)
        lse[..., start:end] = torch.logsumexp(s, dim=-1).to(q.dtype)
    return out, lse


def flash_variant(q, k, v, bq: int, bk: int, causal: bool = False, *, rescale_sum: bool = True,
                  rescale_out: bool = True, stop: str = "q_end", full_k: bool = False, full_q: bool = False,
                  lse_max: bool = True, max_before_mask: bool = False, scale: float | None = None,
                  inverted: bool = False, max_start: float = NEG_INF,
                  no_shift: bool = False, diagonal_hidden: bool = False, no_divide: bool = False,
                  local_cols: bool = False, divided: bool = False,
                  lse_sum: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The blockwise algorithm with one of the catalogued mistakes switched on (zeros where a row is skipped).

    Float64 inside, except with `max_before_mask` and `no_shift`: those show only through float32's under- and
    overflow. `stop="all"` visits every key block also when causal (no block skipping). `divided`: the output is
    divided by the running sum after every key block, and the next block rescales that quotient without multiplying
    the old sum back in (the original FlashAttention's update with its factor l_old forgotten).
    """
    in_own_dtype = max_before_mask or no_shift
    qd, kd, vd = (q, k, v) if in_own_dtype else (q.double(), k.double(), v.double())
    Lq, Lk, d = qd.shape[-2], kd.shape[-2], qd.shape[-1]
    out = torch.zeros(*qd.shape[:-1], vd.shape[-1], dtype=qd.dtype)
    lse = torch.zeros(qd.shape[:-1], dtype=qd.dtype)
    q_stop = Lq - bq + 1 if full_q else Lq
    for qs in range(0, max(q_stop, 0), bq):
        qe = min(qs + bq, Lq)
        qb = qd[..., qs:qe, :] / math.sqrt(d) if scale is None else qd[..., qs:qe, :] * scale
        m = torch.full(qb.shape[:-1], max_start, dtype=qd.dtype)
        l = torch.zeros(qb.shape[:-1], dtype=qd.dtype)
        acc = torch.zeros(*qb.shape[:-1], vd.shape[-1], dtype=qd.dtype)
        kv_stop = {"q_end": min(Lk, qe), "q_start": min(Lk, qs), "q_end-1": min(Lk, qe - 1),
                   "all": Lk}[stop] if causal else Lk
        k_stop = kv_stop - bk + 1 if full_k else kv_stop
        rows = torch.arange(qs, qe)[:, None]
        for ks in range(0, max(k_stop, 0), bk):
            ke = min(ks + bk, Lk)
            s = qb @ kd[..., ks:ke, :].transpose(-2, -1)
            block_max = s.amax(dim=-1)
            if causal:
                cols = torch.arange(0, ke - ks)[None, :] if local_cols else torch.arange(ks, ke)[None, :]
                s = s.masked_fill(cols <= rows if inverted else cols >= rows if diagonal_hidden else cols > rows,
                                  NEG_INF)
            if no_shift:  # exp of the raw scores: no running max at all
                p = torch.exp(s)
                l = l + p.sum(dim=-1)
                acc = acc + p @ vd[..., ks:ke, :]
                continue
            m_new = torch.maximum(m, block_max if max_before_mask else s.amax(dim=-1))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new[..., None])
            l = (alpha * l if rescale_sum else l) + p.sum(dim=-1)
            acc = (alpha[..., None] * acc if rescale_out else acc) + p @ vd[..., ks:ke, :]
            if divided:
                acc = acc / l[..., None]
            m = m_new
        out[..., qs:qe, :] = acc if no_divide or divided else acc / l[..., None]
        lse[..., qs:qe] = m if not lse_sum else (m + torch.log(l)) if lse_max and not no_shift else torch.log(l)
    return out.to(q.dtype), lse.to(q.dtype)


def reference_hbm_traffic(N: int, d: int, sram_bytes: int, element_bytes: int = 4, *, ceil: bool = True):
    M = sram_bytes // element_bytes
    rows = M // (4 * d)
    if rows < 1:
        raise ValueError("SRAM too small")
    blocks = -(-N // rows) if ceil else N // rows
    standard = 4 * N * d + 4 * N * N
    tiled = N * d + 2 * N * d * blocks + N * d + N
    return standard, tiled


def reference_grads(q, k, v, grad_out, causal: bool, *, row_term: bool = True, d_without_o: bool = False,
                    backward_unmasked: bool = False):
    """(dq, dk, dv) of sum(attention(q, k, v) * grad_out), in float64, cast back to q's dtype. The switches give
    the catalogued backward mistakes: no row term D, D = rowsum(dO) (O left out), and a backward that recomputes P
    from the saved logsumexp without the causal mask."""
    qd, kd, vd = (t.detach().double() for t in (q, k, v))
    g = grad_out.detach().double()
    s = scaled_scores(qd, kd, causal)
    p = torch.softmax(s, dim=-1)
    o = p @ vd
    if backward_unmasked:
        p = torch.exp(scaled_scores(qd, kd, False) - torch.logsumexp(s, dim=-1, keepdim=True))
    dv = p.transpose(-2, -1) @ g
    dp = g @ vd.transpose(-2, -1)
    D = (g * (1.0 if d_without_o else o)).sum(dim=-1, keepdim=True) if row_term else 0.0
    ds = p * (dp - D) / math.sqrt(qd.shape[-1])
    dq, dk = ds @ kd, ds.transpose(-2, -1) @ qd
    return tuple(t.to(q.dtype) for t in (dq, dk, dv))


# -- helpers -----------------------------------------------------------------------------------------------
def _nearest(actual: Any, candidates: list[torch.Tensor]) -> torch.Tensor:
    """The candidate closest to `actual` (one catalogue entry standing for several ways to make a mistake)."""
    best, best_diff = candidates[0], (math.inf, math.inf)
    if isinstance(actual, torch.Tensor):
        a = actual.detach().double()
        for cand in candidates:
            if cand.shape == actual.shape and cand.dtype == actual.dtype:
                c = cand.double()
                # entries that disagree first (-inf = -inf agrees, where a plain difference would be NaN), then by how much
                apart = ~torch.isclose(a, c, rtol=1e-4, atol=1e-5, equal_nan=True)
                gap = float((a - c).abs()[apart].nan_to_num(nan=math.inf).max()) if bool(apart.any()) else 0.0
                diff = (int(apart.sum()), gap)
                if diff < best_diff:
                    best, best_diff = cand, diff
    return best


def _pair(result: Any, what: str) -> tuple[Any, Any]:
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailure(_("{what} should return a tuple (output, logsumexp), got {type}.").format(
            what=what, type=type(result).__name__))
    return result


def _flash_mistakes(actual: Any, q, k, v, bq, bk, causal, part: int) -> dict[Mistake, torch.Tensor]:
    """The known wrong outputs (part 0) or logsumexps (part 1) for these inputs and block sizes."""
    run = lambda **kw: flash_variant(q, k, v, bq, bk, causal, **kw)[part]  # noqa: E731
    wrong = {
        NO_RESCALE: run(rescale_sum=False, rescale_out=False),
        SUM_ONLY: run(rescale_out=False),
        TAIL_DROPPED: _nearest(actual, [run(full_k=True), run(full_q=True), run(full_k=True, full_q=True)]),
    }
    d = q.shape[-1]
    if d > 1:  # at d = 1 the three scales coincide
        wrong[NO_SCALE] = run(scale=1.0)
        wrong[SCALED_BY_D] = run(scale=1.0 / d)
    if causal:
        wrong[CAUSAL_OFF_BY_ONE] = _nearest(actual, [run(stop="q_start"), run(stop="q_end-1")])
        wrong[MAX_BEFORE_MASK] = run(max_before_mask=True)
        wrong[CAUSAL_INVERTED] = _nearest(actual, [run(inverted=True), run(inverted=True, stop="all")])
        wrong[CAUSAL_DIAGONAL] = run(diagonal_hidden=True)
        wrong[LOCAL_COLS] = run(local_cols=True)
    if part == 0:
        wrong[NOT_NORMALISED] = run(no_divide=True)
    if part == 1:
        wrong[LSE_NO_MAX] = run(lse_max=False)
        wrong[LSE_MAX_ONLY] = run(lse_sum=False)
    found = {m: t for m, t in ((m, _undefined_rows_as(actual, t)) for m, t in wrong.items()) if t is not None}
    # These two predict their NaN rows exactly (0 / 0 and inf / inf, -inf and inf in the logsumexp): kept as they are.
    found[MAX_STARTS_AT_ZERO] = run(max_start=0.0)
    found[NO_MAX_SHIFT] = run(no_shift=True)
    return found




# -- name_the_flash_bug: which tiled attention made this output? ------------------------------------------------
NAME_FLASH_BUG = N_("Exercise 3 — name the flash bug")

#: The labels, as the notebook's locked cell gives them to the learner (the same strings, in the same order).
FLASH_BUGS = ("correct", "sum not rescaled", "output not rescaled", "divided every block", "mask after max",
              "causal stop off by one", "something else")

#: How each label's output is made (through `flash_variant`'s switches); "something else" is made below.
_FLASH_SWITCHES = {
    "correct": {},
    "sum not rescaled": {"rescale_sum": False},
    "output not rescaled": {"rescale_out": False},
    "divided every block": {"divided": True},
    "mask after max": {"max_before_mask": True},  # in float32: the bug shows only through underflow
    "causal stop off by one": {"stop": "q_start"},  # range(i) instead of range(i + 1): the diagonal block skipped
}

FLASH_EXACT_COMPARE = Mistake(
    "outputs compared exactly, or with too tight a tolerance",
    "outputs that one of the listed implementations made were not recognised: the outputs were computed in float64 "
    "and rounded to float32, so your float32 reproduction of the same loop differs in the last bits, and == or "
    "torch.equal almost never hold. Compare with a tolerance well above float32's rounding and well below the gap "
    "between two implementations, e.g. atol=1e-4",
    NAME_FLASH_BUG,
)
NAN_NEVER_EQUAL = Mistake(
    "NaN compared as a number",
    "the outputs with NaN rows were not recognised. A row that saw no key at all, or whose every weight underflowed to "
    "0, comes out 0 / 0 = NaN, and NaN equals nothing, not even NaN: torch.allclose(a, b) is False wherever both are "
    "NaN unless you pass equal_nan=True",
    NAME_FLASH_BUG,
)
NO_UNDERFLOW = Mistake(
    "'mask after max' reproduced without float32's underflow",
    "taking a tile's max before the mask changes only the scale m: in exact arithmetic, or in float64, the output is "
    "still right. The bug shows only in the inputs' own dtype, float32, when a future key in the diagonal tile scores "
    "so far above the allowed ones that every allowed exp(s - m) underflows to 0 (the row comes out 0 / 0). Reproduce "
    "it in float32, with the max taken before the mask",
    NAME_FLASH_BUG,
)
RESCALES_SWAPPED = Mistake(
    "'sum not rescaled' and 'output not rescaled' swapped",
    "the two rescaling bugs were mixed up: 'sum not rescaled' multiplies the output accumulator by exp(m - m_new) but "
    "not the running sum l; 'output not rescaled' rescales l but not the accumulator",
    NAME_FLASH_BUG,
)
FLASH_CORRECT_BY_DEFAULT = Mistake(
    "'correct' by default",
    "an output that none of the listed implementations made was named 'correct': 'correct' must be a match with the "
    "correct tiled attention like every other label, and an output that matches nothing is 'something else'",
    NAME_FLASH_BUG,
)


def _flash_bug_output(q, k, v, causal: bool, block_size: int, label: str) -> torch.Tensor:
    """What the implementation labelled `label` returns: float64 inside and rounded to float32 (as another
    implementation's float32 output differs from the learner's in the last bits), float32 for "mask after max"."""
    return flash_variant(q, k, v, block_size, block_size, causal, **_FLASH_SWITCHES[label])[0]


def _flash_something_else(q, k, v, causal: bool, block_size: int, kind: int) -> torch.Tensor:
    """An output none of the labels makes: both rescalings forgotten, a scale of 1/d, or the mask forgotten."""
    if kind == 0:
        return flash_variant(q, k, v, block_size, block_size, causal, rescale_sum=False, rescale_out=False)[0]
    if kind == 1:
        return flash_variant(q, k, v, block_size, block_size, causal, scale=1.0 / q.shape[-1])[0]
    return flash_variant(q, k, v, block_size, block_size, False)[0]


def _tiled32(q, k, v, causal: bool, bs: int, label: str) -> torch.Tensor:
    """A learner's likely reproduction of `label`: the plain float32 loop."""
    Lq, Lk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    out = q.new_zeros(*q.shape[:-1], v.shape[-1])
    for qs in range(0, Lq, bs):
        qe = min(qs + bs, Lq)
        qb = q[..., qs:qe, :] / math.sqrt(d)
        m = q.new_full(qb.shape[:-1], NEG_INF)
        l = q.new_zeros(qb.shape[:-1])
        acc = q.new_zeros(*qb.shape[:-1], v.shape[-1])
        stop = min(Lk, qs if label == "causal stop off by one" else qe) if causal else Lk
        rows = torch.arange(qs, qe)[:, None]
        for ks in range(0, stop, bs):
            ke = min(ks + bs, Lk)
            s = qb @ k[..., ks:ke, :].transpose(-2, -1)
            before = s.amax(dim=-1)
            if causal:
                s = s.masked_fill(torch.arange(ks, ke)[None, :] > rows, NEG_INF)
            m_new = torch.maximum(m, before if label == "mask after max" else s.amax(dim=-1))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s - m_new[..., None])
            l = (l if label == "sum not rescaled" else alpha * l) + p.sum(dim=-1)
            acc = (acc if label == "output not rescaled" else alpha[..., None] * acc) + p @ v[..., ks:ke, :]
            if label == "divided every block":
                acc = acc / l[..., None]
            m = m_new
        out[..., qs:qe, :] = acc if label == "divided every block" else acc / l[..., None]
    return out


def _apart(a: torch.Tensor, b: torch.Tensor, gap: float) -> bool:
    """Two outputs differ by more than `gap` somewhere (NaN where the other is a number counts as apart)."""
    if a.shape != b.shape:
        return True
    na, nb = torch.isnan(a), torch.isnan(b)
    if not torch.equal(na, nb):
        return True
    return bool(((a - b).abs()[~na] > gap).any())


#: Hidden cases (leading dims, Lq, Lk, d, d_v, causal, block size, extreme): "extreme" inputs put a future key of
#: the diagonal tile 140 or more above the allowed ones (exact scores), where "mask after max" comes out 0 / 0.
_FLASH_BUG_SHAPES = [((2,), 10, 13, 8, 6, False, 4, False), ((), 12, 12, 8, 8, True, 3, False),
                     ((2, 2), 9, 9, 16, 8, True, 4, False), ((1,), 14, 7, 8, 4, False, 3, False),
                     ((), 12, 12, 16, 8, True, 4, True), ((2,), 11, 11, 16, 6, True, 4, True)]


def _flash_bug_inputs(lead, Lq, Lk, d, dv, extreme: bool):
    if not extreme:
        return torch.randn(*lead, Lq, d) * 1.5, torch.randn(*lead, Lk, d) * 1.5, torch.randn(*lead, Lk, dv)
    # integer entries and d = 16 (scale 1/4): the scores are exact in float32; each later key scores about 70 more
    q = torch.randint(-3, 4, (*lead, Lq, d)).float()
    k = torch.randint(-3, 4, (*lead, Lk, d)).float()
    q[..., 0] = 4.0
    k[..., 0] = 70.0 * torch.arange(Lk)
    return q, k, torch.randn(*lead, Lk, dv)


def _flash_bug_cases() -> list[tuple[tuple, str, bool]]:
    """[((q, k, v, causal, block_size, output), label, output has NaN)] for every hidden shape and every label that
    shows there, in a random order. Inputs are redrawn until the labels' outputs are at least 0.05 apart and a plain
    float32 reproduction of each lies within 1e-5 of it; a label whose bug cannot show on an input (the causal ones
    without a mask, "mask after max" without an extreme score) is left out there: its output is the correct one."""
    cases = []
    for i, (lead, Lq, Lk, d, dv, causal, bs, extreme) in enumerate(_FLASH_BUG_SHAPES):
        wanted = ["correct", "sum not rescaled", "output not rescaled", "divided every block"]
        if causal:
            wanted += ["causal stop off by one"]
        if extreme:  # the newest allowed key outweighs the rest by e^70: only the mask's bugs stand apart
            wanted = ["correct", "causal stop off by one", "mask after max"]
        kind = 2 if extreme else i % (3 if causal else 2)
        for _attempt in range(50):
            q, k, v = _flash_bug_inputs(lead, Lq, Lk, d, dv, extreme)
            outputs = {label: _flash_bug_output(q, k, v, causal, bs, label) for label in wanted}
            outputs["something else"] = _flash_something_else(q, k, v, causal, bs, kind)
            labels = list(outputs)
            separated = all(_apart(outputs[a], outputs[b], 0.05) for j, a in enumerate(labels) for b in labels[j + 1:])
            reproduced = all(not _apart(_tiled32(q, k, v, causal, bs, label), outputs[label], 1e-5) for label in wanted)
            if separated and reproduced:
                break
        else:
            raise RuntimeError(f"no input of shape {_FLASH_BUG_SHAPES[i]} keeps the labels apart")  # the grader's bug
        for label, out in outputs.items():
            cases.append(((q, k, v, causal, bs, out), label, bool(torch.isnan(out).any())))
    order = torch.randperm(len(cases)).tolist()
    return [cases[j] for j in order]


def test_name_the_flash_bug(check, refs, name_the_flash_bug):
    answers = []  # (label, what the learner's function said, whether the output has NaN, causal)
    errors: dict[str, BaseException] = {}
    for (q, k, v, causal, bs, out), label, has_nan in _flash_bug_cases():
        inputs = (q.clone(), k.clone(), v.clone(), causal, bs, out.clone())
        try:
            said = name_the_flash_bug(*inputs)
        except (NotImplementedError, CheckTimeout):
            raise
        except Exception as exc:  # noqa: BLE001 - one input's crash fails the checks of its label only
            errors.setdefault(label, exc)
            said = exc
        answers.append((label, said, has_nan, causal))
        if not all(isinstance(a, torch.Tensor) and torch.equal(a.nan_to_num(), b.nan_to_num())  # NaN rows: NaN
                   for a, b in zip((inputs[0], inputs[1], inputs[2], inputs[5]), (q, k, v, out), strict=True)):
            errors.setdefault("changed", CheckFailure(_(
                "name_the_flash_bug changed its inputs in place; the caller still needs them.")))

    wrong = [(label, said, has_nan) for label, said, has_nan, _causal in answers if said != label]
    with_nan = {i for i, (_label, _said, has_nan, _causal) in enumerate(answers) if has_nan}
    wrong_at = {i for i, (label, said, _n, _c) in enumerate(answers) if said != label}
    mistake = None
    if wrong and all({label, said} == {"sum not rescaled", "output not rescaled"} for label, said, _n in wrong):
        mistake = RESCALES_SWAPPED
    elif wrong and all(label == "something else" and said == "correct" for label, said, _n in wrong):
        mistake = FLASH_CORRECT_BY_DEFAULT
    elif wrong and all(label == "mask after max" and said in ("something else", "correct") for label, said, _n in wrong) \
            and all(said != "mask after max" for label, said, _n, _c in answers if label == "mask after max"):
        mistake = NO_UNDERFLOW
    elif wrong and with_nan and wrong_at == with_nan and all(said == "something else" for _l, said, _n in wrong):
        mistake = NAN_NEVER_EQUAL
    elif wrong and all(label != "something else" and said == "something else" for label, said, _n in wrong) \
            and all(label == "something else" or causal or said != label for label, said, _n, causal in answers):
        mistake = FLASH_EXACT_COMPARE  # every output made in float64 missed, the non-causal ones included

    def verdict(label: str, text: str) -> None:
        if label in errors:
            exc = errors[label]
            raise CheckFailure(_("name_the_flash_bug raised {error} on an output made by '{label}': {message}").format(
                error=type(exc).__name__, label=label, message=exc), mistake)
        for want, said, _has_nan, causal in answers:
            if want != label:
                continue
            if not isinstance(said, str) or said not in FLASH_BUGS:
                raise CheckFailure(_("name_the_flash_bug returned {said!r}, which is not one of the labels in "
                                     "FLASH_BUGS.").format(said=said))
            check.true(said == want, text.format(said=said, causal=causal), mistake)
        for want, said, _has_nan, causal in answers:  # a constant answer earns nothing: no other output gets `label`
            check.true(said != label or want == label,
                       _("the output of '{want}' (causal={causal}) was named '{said}'.").format(
                           want=want, causal=causal, said=said), mistake)

    with check("names the correct tiled attention's output 'correct', and no other output", weight=2):
        verdict("correct", _("a correct attention's output (causal={causal}) was named '{said}'."))
    with check("names the output of a loop that forgets to rescale the running sum 'sum not rescaled'"):
        verdict("sum not rescaled", _("the output of a loop that does not rescale its running sum l (causal={causal}) "
                                      "was named '{said}'."))
    with check("names the output of a loop that forgets to rescale the output accumulator 'output not rescaled'"):
        verdict("output not rescaled", _("the output of a loop that does not rescale its output accumulator "
                                         "(causal={causal}) was named '{said}'."))
    with check("names the output of a loop that divides after every block 'divided every block'"):
        verdict("divided every block", _("the output of a loop that divides by l after every key block "
                                         "(causal={causal}) was named '{said}'."))
    with check("names 'mask after max': float32, a future key scoring far above the allowed ones in the diagonal tile"):
        verdict("mask after max", _("the output of a loop that takes each tile's max before the causal mask, on "
                                    "inputs where that underflows in float32 (causal={causal}), was named '{said}'."))
    with check("names the output of a causal loop that skips the diagonal block 'causal stop off by one'"):
        verdict("causal stop off by one", _("the output of a causal loop that stops one key block early "
                                            "(causal={causal}) was named '{said}'."))
    with check("says 'something else' for outputs none of these made (two bugs at once, a scale of 1/d, the mask "
               "forgotten), and only for those"):
        verdict("something else", _("an output that none of the listed implementations makes (causal={causal}) was "
                                    "named '{said}'."))
    with check("leaves its inputs unchanged", weight=0.5):
        if "changed" in errors:
            raise errors["changed"]
        said_all = {said if isinstance(said, str) else None for _label, said, _n, _c in answers}
        if len(said_all) == 1 and None not in said_all:  # a constant answer earns nothing, not even this half point
            raise CheckFailure(_("name_the_flash_bug returned '{said}' for every output: the label must come from "
                                 "comparing the output with what each implementation makes.").format(
                said=said_all.pop()))


def _kernel_peak(owner: Any, action: Callable[[], Any]) -> int:
    """Peak resident memory added while `action` runs, in the process that holds `owner` (the learner's)."""
    worker = getattr(owner, "_attn_worker", None)  # set only on the grader's proxies for the learner's objects
    if worker is not None:
        before = worker.reset_peak()
        action()
        return max(0, worker.status_kib("VmHWM") - before) * 1024
    return peak_memory(action)[1]  # a live kernel: the tensors allocated meanwhile (its history does not count)


def _allow(check: Any, seconds: float) -> None:
    """Give this exercise more wall-clock time while grading (a live Checker has no such limit to raise)."""
    extend = getattr(check, "set_time_limit", None)
    if extend is not None:
        extend(seconds)


# -- reference tensors on inputs the learner never sees ---------------------------------------------------
SOFTMAX_BLOCKS = (1, 4, 7, 40)
FLASH_CASES = (  # name, (B, h, Lq, Lk, d, d_v), block_size_q, block_size_k, causal
    ("a", (2, 3, 21, 13, 16, 12), 4, 5, False),
    ("b", (2, 2, 19, 19, 8, 8), 8, 3, True),
    ("c", (1, 2, 11, 26, 8, 6), 3, 4, True),
)


def make_references() -> dict[str, torch.Tensor]:
    """Inputs the learner never sees and the expected outputs; `attn references` stores them."""
    g = torch.Generator().manual_seed(7007)
    refs: dict[str, torch.Tensor] = {}
    x = torch.randn(3, 5, 23, generator=g) * 6
    x[0, 0, 17:] += 40.0  # this row's max arrives in its last blocks
    refs["online_softmax.x"] = x
    refs["online_softmax.out"] = reference_softmax(x)
    for name, (B, h, Lq, Lk, d, dv), _bq, _bk, causal in FLASH_CASES:
        q = torch.randn(B, h, Lq, d, generator=g) * 2
        k = torch.randn(B, h, Lk, d, generator=g) * 2
        v = torch.randn(B, h, Lk, dv, generator=g)
        out, lse = reference_attention(q, k, v, causal)
        refs.update({f"flash.{name}.q": q, f"flash.{name}.k": k, f"flash.{name}.v": v,
                     f"flash.{name}.out": out, f"flash.{name}.lse": lse})
    return refs


# -- hidden tests ------------------------------------------------------------------------------------------
def _softmax_mistakes(x: torch.Tensor, b: int) -> dict[Mistake, torch.Tensor]:
    return {SUM_NOT_RESCALED: online_softmax_variant(x, b, rescale=False),
            TAIL_DROPPED: online_softmax_variant(x, b, full_blocks=True),
            MAX_STARTS_AT_ZERO: online_softmax_variant(x, b, max_start=0.0),
            NO_MAX_SHIFT: online_softmax_variant(x, b, no_shift=True)}


def extreme_rows(n_rows: int, L: int) -> torch.Tensor:
    """(n_rows, L) float32 scores: rows far below zero (about -1e4), far above (+1e4) and near 0, in turn.

    A running max started at 0 leaves the low rows 0 / 0; no max-shift overflows the high ones. Each row's spread
    is a few units, so its softmax is far from one-hot, and x - max is exact in float32 (nearby numbers)."""
    level = torch.tensor([-1e4, 1e4, 0.0]).repeat(n_rows)[:n_rows, None]
    return level + torch.randn(n_rows, L) * 3


def _scale_rtol(x: torch.Tensor) -> float:
    """A relative tolerance for softmax outputs that follows the inputs' magnitude: float32 holds an entry near 1e4
    only to about 1e-3, so a correct answer that forms x - logsumexp(x) (a running log-sum-exp with torch.logaddexp)
    is off by that much in the exponent, a relative error of that size in each probability."""
    finite = x[torch.isfinite(x)]
    top = float(finite.abs().max()) if finite.numel() else 0.0
    return max(1e-5, 4 * torch.finfo(x.dtype).eps * top)


def test_online_softmax(check, refs, online_softmax):
    x = refs["online_softmax.x"]
    for b in SOFTMAX_BLOCKS:
        with check(_("matches torch.softmax on hidden (3, 5, 23) inputs, block_size={b}").format(b=b),
                   weight=2 if b == 4 else 1):
            check.close(online_softmax(x, b), refs["online_softmax.out"], f"online_softmax(x, {b})",
                        lambda: _softmax_mistakes(x, b), atol=1e-6)
    with check("fresh inputs: every block size from 1 to beyond the length, a max that arrives late"):
        x = torch.randn(2, 11) * 3
        x[1, -1] = 30.0
        for b in (1, 2, 3, 5, 10, 11, 12, 100):
            with check.case():
                check.close(online_softmax(x, b), reference_softmax(x), f"online_softmax(x, {b})",
                            lambda: _softmax_mistakes(x, b), atol=1e-6)
    with check("no overflow: scores around 1000 and -1000"):
        x = torch.randn(4, 9) + torch.tensor([[1000.0], [-1000.0], [0.0], [500.0]])
        check.close(online_softmax(x, 4), reference_softmax(x), "online_softmax(x, 4)",
                    lambda: _softmax_mistakes(x, 4), atol=1e-6, rtol=_scale_rtol(x))
    with check("rows of scores far below zero (about -1e4) and far above (+1e4): the running max starts at -inf",
               weight=2):
        x = extreme_rows(6, 13)
        x[3:, -2:] += 8.0  # these rows' max arrives in the last block
        for b in (4, 13):
            with check.case():
                check.close(online_softmax(x, b), reference_softmax(x), f"online_softmax(x, {b})",
                            lambda: _softmax_mistakes(x, b), atol=1e-6, rtol=_scale_rtol(x))
    with check("-inf entries (masked) get probability 0, also when a whole first block is -inf"):
        x = torch.randn(3, 10)
        x[0, :4] = NEG_INF
        x[1, ::3] = NEG_INF
        x[2, 5:] = NEG_INF
        check.close(online_softmax(x, 4), reference_softmax(x), "online_softmax(x, 4)", atol=1e-6)
    with check("keeps the dtype: float64 in, float64 out"):
        x = torch.randn(5, 6, dtype=torch.float64)
        out = online_softmax(x, 4)
        check.close(out, torch.softmax(x, -1), "online_softmax(float64 x, 4)", atol=1e-12, rtol=1e-10)


def extreme_qkv(B: int, h: int, Lq: int, Lk: int, d: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v whose scaled scores are exact in float32: rows of queries score about -1e4, +1e4 and 0 in turn.

    Integer entries and d = 16 (scale 1/4, a power of two) keep every product and sum exact, so float32 and the
    float64 reference see the same scores; feature 0 sets each query row's level, the others a spread of tens."""
    q = torch.randint(-3, 4, (B, h, Lq, d)).float()
    k = torch.randint(-3, 4, (B, h, Lk, d)).float()
    k[..., 0] = 100.0
    q[..., 0] = torch.tensor([-400.0, 400.0, 0.0]).repeat(Lq)[:Lq]  # 400 * 100 / 4 = 1e4
    return q, k, torch.randn(B, h, Lk, d)


def test_flash_attention(check, refs, flash_attention):
    _allow(check, 60)  # a Python loop over blocks, at Lq = Lk = 4096 in the memory check (slow on a busy machine)
    for name, _sizes, bq, bk, causal in FLASH_CASES:
        q, k, v = refs[f"flash.{name}.q"], refs[f"flash.{name}.k"], refs[f"flash.{name}.v"]
        label = (_("hidden (B, h, Lq, Lk) = {shape}, blocks ({bq}, {bk}), causal") if causal else
                 _("hidden (B, h, Lq, Lk) = {shape}, blocks ({bq}, {bk})")).format(
            shape=tuple(q.shape[:2]) + (q.shape[-2], k.shape[-2]), bq=bq, bk=bk)
        with check(_("output matches the reference: {label}").format(label=label), weight=2):
            out, _lse = _pair(flash_attention(q, k, v, bq, bk, causal), "flash_attention")
            check.close(out, refs[f"flash.{name}.out"], "output",
                        lambda: _flash_mistakes(out, q, k, v, bq, bk, causal, 0), atol=1e-5)
        with check(_("logsumexp matches torch.logsumexp of the scaled scores: {label}").format(label=label)):
            _out, lse = _pair(flash_attention(q, k, v, bq, bk, causal), "flash_attention")
            check.close(lse, refs[f"flash.{name}.lse"], "logsumexp",
                        lambda: _flash_mistakes(lse, q, k, v, bq, bk, causal, 1), atol=1e-5)
    fresh = (  # (B, h, Lq, Lk, d, d_v), bq, bk, causal
        ((1, 2, 9, 9, 8, 8), 1, 1, False),
        ((1, 2, 9, 9, 8, 8), 1, 1, True),
        ((2, 1, 17, 17, 16, 16), 3, 5, True),
        ((2, 1, 14, 29, 8, 4), 4, 6, True),
        ((2, 1, 29, 14, 8, 4), 6, 4, True),
        ((1, 3, 20, 12, 8, 8), 64, 64, True),
        ((1, 3, 20, 12, 8, 8), 64, 64, False),
        ((2, 2, 32, 48, 16, 8), 16, 16, False),
    )
    for (B, h, Lq, Lk, d, dv), bq, bk, causal in fresh:
        label = (_("Lq={Lq}, Lk={Lk}, blocks ({bq}, {bk}), causal") if causal else
                 _("Lq={Lq}, Lk={Lk}, blocks ({bq}, {bk})")).format(Lq=Lq, Lk=Lk, bq=bq, bk=bk)
        with check(_("fresh inputs, {label}: output and logsumexp").format(label=label)):
            q, k, v = torch.randn(B, h, Lq, d) * 2, torch.randn(B, h, Lk, d) * 2, torch.randn(B, h, Lk, dv)
            out, lse = _pair(flash_attention(q, k, v, bq, bk, causal), "flash_attention")
            exp_out, exp_lse = reference_attention(q, k, v, causal)
            check.close(out, exp_out, "output", lambda: _flash_mistakes(out, q, k, v, bq, bk, causal, 0), atol=1e-5)
            check.close(lse, exp_lse, "logsumexp", lambda: _flash_mistakes(lse, q, k, v, bq, bk, causal, 1),
                        atol=1e-5)
    with check("equals torch's F.scaled_dot_product_attention (3-D inputs, causal, non-divisible blocks)"):
        q, k, v = torch.randn(3, 23, 16), torch.randn(3, 23, 16), torch.randn(3, 23, 16)
        out, _lse = _pair(flash_attention(q, k, v, 5, 7, True), "flash_attention")
        check.close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), "output", atol=1e-5)
    with check("large scores (q and k times 30): no overflow, no NaN"):
        q, k, v = torch.randn(1, 12, 8) * 30, torch.randn(1, 12, 8) * 30, torch.randn(1, 12, 8)
        out, lse = _pair(flash_attention(q, k, v, 4, 4, False), "flash_attention")
        exp_out, exp_lse = reference_attention(q, k, v)
        check.close(out, exp_out, "output", atol=1e-4)
        check.close(lse, exp_lse, "logsumexp", atol=1e-3)
    with check("query rows whose scores all lie far below zero (-1e4) or far above (+1e4): running max from -inf",
               weight=2):
        for (B, h, Lq, Lk), bq, bk, causal in (((1, 2, 12, 14), 4, 5, False), ((2, 1, 11, 11), 3, 4, True)):
            with check.case():
                q, k, v = extreme_qkv(B, h, Lq, Lk)
                out, lse = _pair(flash_attention(q, k, v, bq, bk, causal), "flash_attention")
                exp_out, exp_lse = reference_attention(q, k, v, causal)
                check.close(out, exp_out, "output", lambda: _flash_mistakes(out, q, k, v, bq, bk, causal, 0),
                            atol=1e-5)
                check.close(lse, exp_lse, "logsumexp", lambda: _flash_mistakes(lse, q, k, v, bq, bk, causal, 1),
                            atol=1e-5)
    with check("causal, the future keys' scores hundreds above the allowed ones: the mask acts before the max",
               weight=2):
        B, h, L, d = 2, 2, 13, 8
        q, k, v = torch.randn(B, h, L, d), torch.randn(B, h, L, d), torch.randn(B, h, L, d)
        q[..., 0] = 4.0
        k[..., 0] = 25.0 * torch.arange(L)  # each later key scores about 35 more: 3 keys ahead is 100+ above
        out, lse = _pair(flash_attention(q, k, v, 4, 4, True), "flash_attention")
        exp_out, exp_lse = reference_attention(q, k, v, True)
        check.close(out, exp_out, "output", lambda: _flash_mistakes(out, q, k, v, 4, 4, True, 0), atol=1e-4)
        check.close(lse, exp_lse, "logsumexp", lambda: _flash_mistakes(lse, q, k, v, 4, 4, True, 1), atol=1e-4)
    with check("keeps the dtype: float64 in, float64 out (output and logsumexp)"):
        q, k, v = (torch.randn(2, 10, 8, dtype=torch.float64) for _ in range(3))
        out, lse = _pair(flash_attention(q, k, v, 3, 4, True), "flash_attention")
        exp_out, exp_lse = reference_attention(q, k, v, True)
        check.close(out, exp_out, "output", atol=1e-10, rtol=1e-8)
        check.close(lse, exp_lse, "logsumexp", atol=1e-10, rtol=1e-8)
    with check("never materialises an Lq x Lk matrix: peak memory at Lq = Lk = 4096 (blocks of 512)", weight=2):
        N, d = 4096, 16
        q, k, v = (torch.randn(1, N, d) for _ in range(3))
        result, peak = peak_memory(flash_attention, q, k, v, 512, 512, True)
        out, _lse = _pair(result, "flash_attention")
        check.shape(out, (1, N, d), "output")
        full = N * N * 4  # one float32 (Lq, Lk) matrix: 64 MiB
        # Resident memory also holds allocator leftovers (tens of MiB with two threads); one whole matrix is the line.
        check.true(peak < full, _("flash_attention(q, k, v, 512, 512, causal=True) at Lq = Lk = {N} raised the "
                                  "process's peak memory by {peak} MiB; one {N} x {N} float32 matrix is {full} MiB and "
                                  "a tiled pass needs only a few (512 x 512) blocks. Is a full score matrix, a full "
                                  "mask or a full-size temporary built somewhere?").format(
                       N=N, peak=f"{peak / 2**20:.0f}", full=f"{full / 2**20:.0f}"))


def test_hbm_traffic(check, refs, hbm_traffic):
    cases = (  # N, d, sram_bytes, element_bytes (None: the default, 4)
        (1024, 64, 4 * 4 * 64 * 16, None),  # 16 query rows per block, 64 blocks
        (1000, 64, 4 * 4 * 64 * 16, None),  # 62.5 blocks: the last one is partial
        (4096, 128, 192 * 1024, 2),  # A100's shared memory per SM, fp16
        (300, 32, 2**20, None),  # SRAM larger than the whole problem: one block
        (7, 3, 4 * 4 * 3 * 2, None),
    )
    for N, d, sram, eb in cases:
        with check(f"hbm_traffic({N}, {d}, {sram}" + (f", element_bytes={eb})" if eb else ")")):
            got = hbm_traffic(N, d, sram) if eb is None else hbm_traffic(N, d, sram, element_bytes=eb)
            expected = reference_hbm_traffic(N, d, sram, eb or 4)
            check.true(isinstance(got, tuple) and len(got) == 2, "hbm_traffic should return (standard, tiled).")
            standard, tiled = got
            blocks = -(-N // ((sram // (eb or 4)) // (4 * d)))
            check.true(standard == expected[0], _("standard = {standard} is not the model's count of elements read "
                                                  "and written (Q, K read; S written, read; P written, read with V; O "
                                                  "written).").format(standard=standard),
                       diagnosis=count_diagnosis(standard, expected[0], {_("N·d (one N × d matrix)"): N * d,
                                                                          _("N² (one N × N matrix)"): N * N}))
            floor = reference_hbm_traffic(N, d, sram, eb or 4, ceil=False)[1]
            as_elements = reference_hbm_traffic(N, d, sram * (eb or 4), eb or 4)[1]  # M = sram_bytes elements
            check.equal(tiled, expected[1], _("tiled = {tiled} is not the model's count for these sizes.").format(
                tiled=tiled), {BLOCKS_FLOORED: floor, BYTES_AS_ELEMENTS: as_elements},
                        count_diagnosis(tiled, expected[1], {
                            _("N·d (one N × d matrix)"): N * d, _("N (one number per row, e.g. the logsumexp)"): N,
                            _("N·d·T_r (an N × d matrix once per query block)"): N * d * blocks}))
    with check("grows like N^2 d^2 / M: doubling N quadruples the tiled traffic's N^2 part, doubling M halves it"):
        base = hbm_traffic(8192, 64, 2**17)[1] - 2 * 8192 * 64 - 8192  # 2Nd * T_r: K and V, once per query block
        check.true(hbm_traffic(16384, 64, 2**17)[1] - 2 * 16384 * 64 - 16384 == 4 * base,
                   "doubling N should multiply the re-read part of the tiled traffic by 4.")
        check.true(hbm_traffic(8192, 64, 2**18)[1] - 2 * 8192 * 64 - 8192 == base // 2,
                   "doubling the SRAM should halve the re-read part of the tiled traffic.")
    with check("an SRAM too small for one query row of Q, O, K and V raises ValueError"):
        try:
            hbm_traffic(1024, 64, 4 * 64 * 4 - 4)
            raised = False
        except ValueError:
            raised = True
        check.true(raised, "hbm_traffic(1024, 64, 1020) should raise ValueError: 255 float32 elements of SRAM "
                   "cannot hold one row each of Q, O, K and V (4 * 64 elements).")


#: What a failing gradient's comparison calls it, by which of (dq, dk, dv) are right: the gradients share the tiles of
#: P (all three) and dS (dq and dk), so the right ones say where the wrong one goes wrong.
_GRADIENT_WHATS = {
    (False, True, True): (N_("dq (dk and dv are right, so P and dS are: look at dq's own sum, dS K / sqrt(d) over the "
                             "key blocks, added into its query block's rows)"), "dk", "dv"),
    (True, False, True): ("dq", N_("dk (dq and dv are right, so P and dS are: look at dk's own sum, dS^T Q / sqrt(d) "
                                   "over the query blocks, added into its key block's rows)"), "dv"),
    (True, True, False): ("dq", "dk", N_("dv (dq and dk are right, so P is: look at dv's own sum, P^T dO over the query "
                                         "blocks, added into its key block's rows)")),
    (False, False, True): (N_("dq (dv is right, so the tiles of P are; dq and dk are both wrong, so dS is: "
                              "dS = P * (dP - D), with dP = dO V^T and the row term D = rowsum(dO * O))"), "dk", "dv"),
    (False, False, False): (N_("dq (dq, dk and dv are all wrong: look first at what they share, each tile "
                               "P = exp(S - LSE), with S scaled and masked as in the forward pass)"), "dk", "dv"),
}


def _gradient_whats(grads: list[Any], expected: tuple[torch.Tensor, ...]) -> tuple[str, str, str]:
    right = tuple(isinstance(g, torch.Tensor) and g.shape == e.shape and bool(torch.allclose(
        g.detach().double(), e.double(), atol=1e-4, rtol=1e-3)) for g, e in zip(grads, expected, strict=True))
    return _GRADIENT_WHATS.get(right, ("dq", "dk", "dv"))


def _test_FlashAttentionFunction(check, refs, FlashAttentionFunction):
    _allow(check, 120)  # 4096-long forward and backward loops: tens of seconds on a busy 2-core machine
    cases = (  # (B, h, Lq, Lk, d, d_v), causal, bq, bk
        ((1, 2, 12, 12, 8, 8), False, 4, 4),
        ((2, 1, 13, 21, 8, 6), True, 4, 5),
        ((2, 1, 21, 13, 8, 6), True, 5, 3),
        ((1, 1, 7, 7, 4, 4), True, 1, 1),
        ((1, 2, 10, 9, 8, 8), False, 32, 32),
    )
    for (B, h, Lq, Lk, d, dv), causal, bq, bk in cases:
        label = (_("Lq={Lq}, Lk={Lk}, blocks ({bq}, {bk}), causal") if causal else
                 _("Lq={Lq}, Lk={Lk}, blocks ({bq}, {bk})")).format(Lq=Lq, Lk=Lk, bq=bq, bk=bk)
        with check(_("forward output and dq, dk, dv equal autograd through the plain formula: {label}").format(
                label=label), weight=2):
            q = (torch.randn(B, h, Lq, d) * 2).requires_grad_()
            k = (torch.randn(B, h, Lk, d) * 2).requires_grad_()
            v = torch.randn(B, h, Lk, dv).requires_grad_()
            out = FlashAttentionFunction.apply(q, k, v, causal, bq, bk)
            exp_out, _exp_lse = reference_attention(q.detach(), k.detach(), v.detach(), causal)
            if isinstance(out, torch.Tensor) and out.shape == exp_out.shape and not torch.allclose(
                    out.detach(), exp_out, atol=1e-5, rtol=1e-4):
                raise CheckFailure(_("the forward output is wrong (does forward call your flash_attention? fix that "
                                     "exercise first), so the gradients cannot be right either."))
            check.close(out, exp_out, "forward output", atol=1e-5)
            check.true(out.requires_grad, "the output does not require grad: return it from forward as computed "
                       "(not detached), and call FlashAttentionFunction.apply, not forward.")
            grad = torch.randn_like(out)
            out.backward(grad)
            expected = reference_grads(q, k, v, grad, causal)
            wrong = {NO_ROW_TERM: reference_grads(q, k, v, grad, causal, row_term=False),
                     D_WITHOUT_O: reference_grads(q, k, v, grad, causal, d_without_o=True)}
            if causal:
                wrong[BACKWARD_UNMASKED] = reference_grads(q, k, v, grad, causal, backward_unmasked=True)
            whats = _gradient_whats([t.grad for t in (q, k, v)], expected)
            for i, (name, t, e) in enumerate(zip(("dq", "dk", "dv"), (q, k, v), expected)):
                check.true(t.grad is not None,
                           _("{name} is None: backward must return a gradient for q, k and v.").format(name=name))
                check.close(t.grad, e, whats[i], {m: w[i] for m, w in wrong.items() if not torch.equal(w[i], e)},
                            atol=1e-4, rtol=1e-3)
    with check("backward recomputes blockwise: peak memory at Lq = Lk = 4096 (blocks of 512)", weight=2):
        N, d = 4096, 16
        q, k, v = (torch.randn(1, N, d).requires_grad_() for _ in range(3))
        apply = FlashAttentionFunction.apply
        out, peak_fwd = peak_memory(apply, q, k, v, False, 512, 512)
        check.shape(out, (1, N, d), "forward output")
        full = N * N * 4
        check.true(peak_fwd < full, _("the forward pass raised the peak memory by {peak} MiB (one {N} x {N} float32 "
                                      "matrix is {full} MiB): save q, k, v, the output and the logsumexp, never the "
                                      "attention matrix.").format(peak=f"{peak_fwd / 2**20:.0f}", N=N,
                                                                  full=f"{full / 2**20:.0f}"))
        peak_bwd = _kernel_peak(FlashAttentionFunction, lambda: out.backward(torch.randn(1, N, d)))
        check.true(peak_bwd < full, _("the backward pass raised the peak memory by {peak} MiB (one {N} x {N} float32 "
                                      "matrix is {full} MiB): recompute P block by block from the saved logsumexp "
                                      "instead of building the whole matrix.").format(peak=f"{peak_bwd / 2**20:.0f}",
                                                                                      N=N, full=f"{full / 2**20:.0f}"))
        check.true(q.grad is not None and q.grad.shape == q.shape, "no gradient for q came back.")


def _triton_mistakes(actual: Any, q, k, v, causal) -> dict[Mistake, torch.Tensor]:
    """Known wrong outputs for the block sizes a kernel is likely to use (the grader cannot see yours)."""
    sizes = (16, 32, 64, 128)
    run = lambda b, **kw: flash_variant(q, k, v, b, b, causal, **kw)[0]  # noqa: E731
    wrong = {
        NO_RESCALE: _nearest(actual, [run(b, rescale_sum=False, rescale_out=False) for b in sizes]),
        SUM_ONLY: _nearest(actual, [run(b, rescale_out=False) for b in sizes]),
    }
    d = q.shape[-1]
    if d > 1:
        wrong[NO_SCALE] = run(16, scale=1.0)  # any block size: the answer does not depend on it
        wrong[SCALED_BY_D] = run(16, scale=1.0 / d)
    if causal:
        wrong[CAUSAL_OFF_BY_ONE] = _nearest(actual, [run(b, stop=s) for b in sizes for s in ("q_start", "q_end-1")])
        wrong[CAUSAL_INVERTED] = _nearest(actual, [run(b, inverted=True) for b in sizes]
                                          + [run(16, inverted=True, stop="all")])
    wrong = {m: t for m, t in ((m, _undefined_rows_as(actual, t)) for m, t in wrong.items()) if t is not None}
    wrong[MAX_STARTS_AT_ZERO] = run(16, max_start=0.0)
    wrong[NO_MAX_SHIFT] = run(16, no_shift=True)
    return wrong


def _unwritten(out: Any, expected: torch.Tensor) -> bool:
    """Whole (batch, head) slices, or the same trailing query rows of every slice, right and the rest wrong: parts
    of the output no program instance wrote (only asked of non-causal inputs, where every row reads every key block,
    so that a rescaling bug cannot leave whole slices or a block of rows exact)."""
    if not isinstance(out, torch.Tensor) or out.shape != expected.shape or out.dim() < 2:
        return False
    a = out.detach().double().reshape(-1, *out.shape[-2:])
    e = expected.double().reshape(-1, *expected.shape[-2:])
    row_ok = torch.isclose(a, e, atol=1e-4, rtol=1e-3).all(dim=-1)  # (slices, Lq)
    if bool(row_ok.all()) or not bool(row_ok.any()):
        return False
    whole = row_ok.all(dim=-1) | (~row_ok).all(dim=-1)
    if bool(whole.all()):
        return True  # some slices entirely right, the others entirely wrong
    first_bad = (~row_ok).int().argmax(dim=-1)  # the first wrong row of each slice
    tail = torch.arange(row_ok.shape[-1])[None, :] >= first_bad[:, None]
    return bool((first_bad == first_bad[0]).all()) and int(first_bad[0]) > 0 and bool(torch.equal(~row_ok, tail))


def test_flash_attention_triton(check, refs, flash_attention_triton):
    _allow(check, 30)  # Triton's interpreter runs every program instance in numpy
    cases = (  # shape of q, Lk, causal
        ((1, 2, 64, 32), 64, False),
        ((2, 1, 37, 16), 29, False),
        ((1, 2, 48, 16), 48, True),
        ((1, 1, 40, 32), 70, True),
        ((1, 1, 70, 16), 40, True),
    )
    for shape, Lk, causal in cases:
        *lead, Lq, d = shape
        label = (_("matches the reference: q {shape}, Lk={Lk}, causal") if causal else
                 _("matches the reference: q {shape}, Lk={Lk}")).format(shape=tuple(shape), Lk=Lk)
        with check(label, weight=2 if shape[2] in (37, 40) else 1):
            q, k, v = torch.randn(*shape), torch.randn(*lead, Lk, d), torch.randn(*lead, Lk, d)
            out = flash_attention_triton(q, k, v, causal)
            expected = reference_attention(q, k, v, causal)[0]
            if not causal and _unwritten(out, expected):
                raise CheckFailure(_("parts of the output are right and others were never computed: whole (batch, "
                                     "head) slices, or the same query blocks of every slice. Does the grid launch "
                                     "one program instance per query block and per slice?"), GRID_UNWRITTEN)
            check.close(out, expected, "output", lambda: _triton_mistakes(out, q, k, v, causal), atol=1e-4, rtol=1e-3)
    with check("query rows whose scores all lie far below zero (-1e4) or far above (+1e4): running max from -inf",
               weight=2):
        for Lq, Lk, causal in ((21, 35, False), (30, 30, True)):
            with check.case():
                q, k, v = extreme_qkv(1, 2, Lq, Lk)
                out = flash_attention_triton(q, k, v, causal)
                check.close(out, reference_attention(q, k, v, causal)[0], "output",
                            lambda: _triton_mistakes(out, q, k, v, causal), atol=1e-4, rtol=1e-3)
    with check("a head size that is not a power of two (d = 24) and 3-D inputs (B, L, d)"):
        q, k, v = torch.randn(2, 33, 24), torch.randn(2, 33, 24), torch.randn(2, 33, 24)
        out = flash_attention_triton(q, k, v, True)
        check.close(out, reference_attention(q, k, v, True)[0], "output", atol=1e-4, rtol=1e-3)


def test_FlashAttentionFunction(check, refs, FlashAttentionFunction):
    """Graded on its own: the flash_attention its forward calls is the reference one (its bugs cost points there)."""
    def flash_attention(q, k, v, block_size_q=16, block_size_k=16, causal=False):
        return reference_attention_by_rows(q, k, v, causal)

    with standing_in(FlashAttentionFunction, flash_attention=flash_attention):
        _test_FlashAttentionFunction(check, refs, FlashAttentionFunction)


HIDDEN_TESTS = {
    "online_softmax": test_online_softmax,
    "flash_attention": test_flash_attention,
    "name_the_flash_bug": test_name_the_flash_bug,
    "hbm_traffic": test_hbm_traffic,
    "FlashAttentionFunction": test_FlashAttentionFunction,
    "flash_attention_triton": test_flash_attention_triton,
}
