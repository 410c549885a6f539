"""Generic diagnosis of a wrong tensor: what simple transformation of the expected one the answer is.

`diagnose(actual, expected)` is tried by `Checker.close` when an output is wrong and no catalogued mistake of the
exercise matches. It knows nothing about the exercise: it asks whether the answer is the expected tensor with axes
swapped, permuted along one axis, scaled or shifted by a constant, its logarithm or exponential, its softmax (or the
scores before it), normalised along another axis, scaled row by row, right on some rows only, of the wrong dtype or
shape but with the right values (up to the coarser dtype's rounding), reduced over one of its axes, its pieces
added instead of concatenated, or non-finite where the expected is finite. It answers with one sentence that says
where to look, or None.

A wrong name is worse than none: a diagnosis is returned only when it explains *every* entry of the answer within
the comparison's tolerance, on tensors large enough that a coincidence is unlikely. It never quotes an expected value
(only shapes, axes, positions and the constant that relates the two tensors).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from fractions import Fraction

import torch

from .failures import _

__all__ = ["count_diagnosis", "diagnose"]

_MIN_ENTRIES = 4  # below this, too many transformations coincide to name one
_MAX_ENTRIES = 1 << 21  # above this, diagnosing costs more than it tells (memory checks use huge tensors)
_MAX_PERMUTED = 64  # longest axis searched for a permutation (the search is quadratic in it)


def diagnose(actual: torch.Tensor, expected: torch.Tensor, *, rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    """One sentence saying how `actual` relates to `expected`, when a simple transformation explains all of it."""
    if not isinstance(actual, torch.Tensor) or not isinstance(expected, torch.Tensor):
        return None
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    if e.numel() < _MIN_ENTRIES or a.numel() == 0 or max(a.numel(), e.numel()) > _MAX_ENTRIES:
        return None
    if a.dtype == torch.bool or e.dtype == torch.bool:
        return _diagnose_bool(a, e)
    if _is_01(a) and _is_01(e) and not a.is_floating_point() and not e.is_floating_point():
        return _diagnose_bool(a.bool(), e.bool())  # masks compared as 0/1 integers
    if a.is_complex() or e.is_complex():
        return None
    ad, ed = a.double(), e.double()

    def close(x: torch.Tensor, y: torch.Tensor) -> bool:
        return x.shape == y.shape and bool(torch.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True).all())

    if a.shape != e.shape:
        return _diagnose_shape(ad, ed, close)
    if not bool(torch.isfinite(ad).all()) and bool(torch.isfinite(ed).all()):
        return _diagnose_nonfinite(ad)
    if a.dtype != e.dtype and (close(ad, ed) or _rounded(a, e, ad, ed, rtol, atol)):
        if close(ad, ed):
            return _("the values are right but the dtype is {got}, not {want}: look for a constant or a tensor created "
                     "without dtype= (torch.tensor of Python floats is float32, numpy gives float64), or a .to() left "
                     "out.").format(got=a.dtype, want=e.dtype)
        return _("the values are right (to the precision of {coarser}) but the dtype is {got}, not {want}: look for a "
                 "constant or a tensor created without dtype= (torch.tensor of Python floats is float32, numpy gives "
                 "float64), or a .to() left out.").format(coarser=_coarser(a.dtype, e.dtype), got=a.dtype, want=e.dtype)
    if _is_degenerate(ed):
        return None
    for test in (lambda: _transposed(ad, ed, close), lambda: _permuted(ad, ed, close), lambda: _scaled(ad, ed, close),
                 lambda: _shifted(ad, ed, close, atol), lambda: _log_or_exp(ad, ed, close),
                 lambda: _softmax_related(ad, ed, close), lambda: _normalised_elsewhere(ad, ed),
                 lambda: _zero_rows(ad, ed, close), lambda: _rows_scaled(ad, ed, close),
                 lambda: _some_rows(ad, ed, rtol, atol)):
        message = test()
        if message:
            return message
    return None


# -- shapes ---------------------------------------------------------------------------------------------------------
def _diagnose_shape(ad: torch.Tensor, ed: torch.Tensor, close, masks: bool = False) -> str | None:
    got, want = tuple(ad.shape), tuple(ed.shape)
    if ad.numel() == ed.numel() and ed.ndim <= 5:
        for perm in itertools.permutations(range(ed.ndim)):
            if perm != tuple(range(ed.ndim)) and tuple(want[p] for p in perm) == got and close(ad, ed.permute(perm)):
                moved = [i for i, p in enumerate(perm) if p != i]
                return _("your output holds the expected values with its axes in another order (shape {got}, expected "
                         "{want}; axes {axes} are out of place): look for a transpose or permute that is missing or in "
                         "the wrong place, or a view/reshape where the axes had to be moved.").format(
                    got=got, want=want, axes=", ".join(map(str, moved)))
        if close(ad.reshape(want), ed):
            if [d for d in got if d != 1] == [d for d in want if d != 1]:
                return _("your values are right but the shape is {got} instead of {want}: {axes} (keepdim=True, "
                         "unsqueeze or squeeze?).").format(got=got, want=want, axes=_unit_axes(got, want))
            return _("your output has the expected values in the expected order but shape {got} instead of {want}: a "
                     "view or reshape to the wrong shape.").format(got=got, want=want)
    try:
        common = torch.broadcast_shapes(ad.shape, ed.shape)
    except RuntimeError:
        common = None
    broadcast = common is not None and close(ad.expand(common), ed.expand(common))
    message = _("your values are right once broadcast, but the shape is {got} instead of {want}: a dimension of size 1 "
                "is missing or extra (keepdim=True, unsqueeze or squeeze?).").format(got=got, want=want)
    # Where the answer has size 1 and the expected tensor is constant along that axis, "n - 1 entries missing" is also
    # true, but a missing expand (or a keepdim) is what explains it; where the answer is the longer one, its extra
    # entries are the likelier story (a first update stored twice, a start token kept).
    if broadcast and ad.ndim == ed.ndim and all(a == 1 for a, e in zip(got, want) if a != e):
        return message
    # A broadcast also explains an axis "taken at its first entry" where the expected tensor is constant along it,
    # and says better what to do (expand, or keep the size-1 axis).
    if masks:  # a mask's row or sum equals another row by chance too often for "reduced over an axis" to be news
        return _extra_or_missing_edge(ad, ed, close) or (message if broadcast else None)
    return (_extra_or_missing_edge(ad, ed, close) or (message if broadcast else None) or _reduced_axis(ad, ed, close)
            or _pieces_added(ad, ed, close))


def _unit_axes(got: tuple[int, ...], want: tuple[int, ...]) -> str:
    """Which axes of size 1 are missing or extra, by position: 'the axis of size 1 at position 1 of the expected
    shape is missing'. Shapes that equal each other once their 1s are dropped."""
    def where(short: tuple[int, ...], long: tuple[int, ...]) -> list[int] | None:
        positions, i = [], 0
        for j, d in enumerate(long):
            if i < len(short) and short[i] == d:
                i += 1
            elif d == 1:
                positions.append(j)
            else:
                return None
        return positions if i == len(short) else None

    missing, extra = where(got, want), where(want, got)
    if len(got) < len(want) and missing:
        axes = ", ".join(map(str, missing))
        if len(missing) > 1:
            return _("the axis of size 1 at positions {axes} of the expected shape is missing (an axis the result must "
                     "keep, e.g. for heads or queries to broadcast over)").format(axes=axes)
        return _("the axis of size 1 at position {axes} of the expected shape is missing (an axis the result must "
                 "keep, e.g. for heads or queries to broadcast over)").format(axes=axes)
    if len(got) > len(want) and extra:
        axes = ", ".join(map(str, extra))
        if len(extra) > 1:
            return _("your output has an extra axis of size 1 at positions {axes}").format(axes=axes)
        return _("your output has an extra axis of size 1 at position {axes}").format(axes=axes)
    return _("a dimension of size 1 is missing or extra")


def _reduced_axis(ad: torch.Tensor, ed: torch.Tensor, close) -> str | None:
    """The answer lacks one axis of the expected tensor, and is that tensor summed, averaged, or taken at its first
    or last entry along it: an axis reduced away (a sum over heads, a mean over the batch, x[0] where x was meant)."""
    if ad.ndim != ed.ndim - 1:
        return None
    for axis in range(ed.ndim):
        n = ed.shape[axis]
        if n < 2 or tuple(ad.shape) != tuple(ed.shape[:axis] + ed.shape[axis + 1:]):
            continue
        for how, reduced in ((_("your output is the expected one summed over axis {axis} (size {n}), so that axis is "
                                "missing (shape {got}, expected {want}): look for a sum, mean or index that removes an "
                                "axis the result must keep."), ed.sum(axis)),
                             (_("your output is the expected one averaged over axis {axis} (size {n}), so that axis is "
                                "missing (shape {got}, expected {want}): look for a sum, mean or index that removes an "
                                "axis the result must keep."), ed.mean(axis)),
                             (_("your output is the expected one taken at the first entry of axis {axis} (size {n}), "
                                "so that axis is missing (shape {got}, expected {want}): look for a sum, mean or "
                                "index that removes an axis the result must keep."), ed.select(axis, 0)),
                             (_("your output is the expected one taken at the last entry of axis {axis} (size {n}), so "
                                "that axis is missing (shape {got}, expected {want}): look for a sum, mean or index "
                                "that removes an axis the result must keep."), ed.select(axis, -1))):
            if ad.numel() >= _MIN_ENTRIES and close(ad, reduced):
                return how.format(axis=axis, n=n, got=tuple(ad.shape), want=tuple(ed.shape))
    return None


def _one_differing_axis(ad: torch.Tensor, ed: torch.Tensor) -> int | None:
    """The one axis along which two tensors of the same rank differ in length, or None."""
    if ad.ndim != ed.ndim:
        return None
    differ = [i for i in range(ed.ndim) if ad.shape[i] != ed.shape[i]]
    return differ[0] if len(differ) == 1 else None


def _pieces_added(ad: torch.Tensor, ed: torch.Tensor, close) -> str | None:
    """One axis of the expected tensor is k times as long as the answer's, and the answer is the sum (or mean) of its
    k pieces: pieces added (or averaged) where they should be concatenated, e.g. heads summed instead of merged."""
    axis = _one_differing_axis(ad, ed)
    if axis is None:
        return None
    m, n = ad.shape[axis], ed.shape[axis]
    if m < 1 or n % m or n == m or ad.numel() < _MIN_ENTRIES:
        return None
    k = n // m
    lead, tail = tuple(ed.shape[:axis]), tuple(ed.shape[axis + 1:])
    side_by_side = ed.reshape(lead + (k, m) + tail)  # pieces [0:m], [m:2m], ...
    interleaved = ed.reshape(lead + (m, k) + tail)  # entries i*k .. i*k+k-1 belong together
    for pieces, dim in ((side_by_side, axis), (interleaved, axis + 1)):
        for how, combined in ((_("your output is the expected one with the {k} pieces of size {m} along axis {axis} "
                                 "added together (shape {got}, expected {want}): pieces combined where they should be "
                                 "concatenated side by side (torch.cat, or a reshape that merges two axes)."),
                               pieces.sum(dim)),
                              (_("your output is the expected one with the {k} pieces of size {m} along axis {axis} "
                                 "averaged (shape {got}, expected {want}): pieces combined where they should be "
                                 "concatenated side by side (torch.cat, or a reshape that merges two axes)."),
                               pieces.mean(dim))):
            if close(ad, combined):
                return how.format(k=k, m=m, axis=axis, got=tuple(ad.shape), want=tuple(ed.shape))
    return None


def _extra_or_missing_edge(ad: torch.Tensor, ed: torch.Tensor, close) -> str | None:
    """Shapes that differ along one axis only, where dropping the answer's first or last entries (or the expected
    one's) leaves equal tensors: an extra or a missing position at one end (a <bos> kept, a last step lost)."""
    axis = _one_differing_axis(ad, ed)
    if axis is None:
        return None
    n_a, n_e = ad.shape[axis], ed.shape[axis]
    long, short, extra = (ad, ed, True) if n_a > n_e else (ed, ad, False)
    k = abs(n_a - n_e)
    for end, piece in (("start", long.narrow(axis, k, short.shape[axis])), ("end", long.narrow(axis, 0, short.shape[axis]))):
        if short.numel() >= _MIN_ENTRIES and close(piece, short):
            message = {
                (True, "start"): _("your output is right except for {k} extra entries at the start of axis {axis} "
                                   "(shape {got}, expected {want}): look for a start token kept, a first or last "
                                   "position dropped, or a range that is off by one."),
                (True, "end"): _("your output is right except for {k} extra entries at the end of axis {axis} (shape "
                                 "{got}, expected {want}): look for a start token kept, a first or last position "
                                 "dropped, or a range that is off by one."),
                (False, "start"): _("your output is right except for {k} entries missing at the start of axis {axis} "
                                    "(shape {got}, expected {want}): look for a start token kept, a first or last "
                                    "position dropped, or a range that is off by one."),
                (False, "end"): _("your output is right except for {k} entries missing at the end of axis {axis} "
                                  "(shape {got}, expected {want}): look for a start token kept, a first or last "
                                  "position dropped, or a range that is off by one."),
            }[extra, end] if k != 1 else {
                (True, "start"): _("your output is right except for 1 extra entry at the start of axis {axis} (shape "
                                   "{got}, expected {want}): look for a start token kept, a first or last position "
                                   "dropped, or a range that is off by one."),
                (True, "end"): _("your output is right except for 1 extra entry at the end of axis {axis} (shape "
                                 "{got}, expected {want}): look for a start token kept, a first or last position "
                                 "dropped, or a range that is off by one."),
                (False, "start"): _("your output is right except for 1 entry missing at the start of axis {axis} "
                                    "(shape {got}, expected {want}): look for a start token kept, a first or last "
                                    "position dropped, or a range that is off by one."),
                (False, "end"): _("your output is right except for 1 entry missing at the end of axis {axis} (shape "
                                  "{got}, expected {want}): look for a start token kept, a first or last position "
                                  "dropped, or a range that is off by one."),
            }[extra, end]
            return message.format(k=k, axis=axis, got=tuple(ad.shape), want=tuple(ed.shape))
    return None


# -- non-finite values ----------------------------------------------------------------------------------------------
def _diagnose_nonfinite(ad: torch.Tensor) -> str:
    bad = ~torch.isfinite(ad)
    kind = "NaN" if bool(torch.isnan(ad).any()) else "inf"
    if ad.ndim >= 2:
        rows = bad.reshape(-1, ad.shape[-1]).any(-1)
        full = bool((bad.reshape(-1, ad.shape[-1]).all(-1) == rows).all())
        if full:
            message = _("your output has {kind} in {n} of {rows} rows ({positions}), whole rows, where every "
                        "expected value is finite: look for a row with nothing to attend to (softmax of all -inf is "
                        "0/0), an exp that overflows, or one that underflows to 0 across a whole row (a max taken over "
                        "more than that row?) before a division by the sum.")
        else:
            message = _("your output has {kind} in {n} of {rows} rows ({positions}), some entries of them, where every "
                        "expected value is finite: look for a row with nothing to attend to (softmax of all -inf is "
                        "0/0), an exp that overflows, or one that underflows to 0 across a whole row (a max taken over "
                        "more than that row?) before a division by the sum.")
        return message.format(kind=kind, n=int(rows.sum()), rows=rows.numel(), positions=_positions(rows))
    return _("your output has {kind} at {n} of {total} positions ({positions}) where every expected value is finite: "
             "look for an exp that overflows or a division by 0.").format(
        kind=kind, n=int(bad.sum()), total=ad.numel(), positions=_positions(bad))


# -- dtype ----------------------------------------------------------------------------------------------------------
_ROUNDING_ULPS = 4  # relative error, in units of the coarser dtype's eps, that still counts as "the same, rounded"


def _rounded(a: torch.Tensor, e: torch.Tensor, ad: torch.Tensor, ed: torch.Tensor, rtol: float, atol: float) -> bool:
    """Both floating point, and equal within the rounding of the coarser of the two dtypes: the values were computed
    right and then stored in (or computed at) the other precision, e.g. float64 work written into a float32 buffer.
    The comparison's own tolerance may be tighter than that rounding (float64 checks ask for 1e-10)."""
    if not (a.is_floating_point() and e.is_floating_point()):
        return False
    eps = max(torch.finfo(a.dtype).eps, torch.finfo(e.dtype).eps)
    finite = ed[torch.isfinite(ed)]
    scale = float(finite.abs().max()) if finite.numel() else 0.0
    tol_r, tol_a = max(rtol, _ROUNDING_ULPS * eps), max(atol, eps * scale)  # atol: one unit of the largest value
    return bool(torch.isclose(ad, ed, rtol=tol_r, atol=tol_a, equal_nan=True).all())


def _coarser(x: torch.dtype, y: torch.dtype) -> torch.dtype:
    return x if torch.finfo(x).eps >= torch.finfo(y).eps else y


# -- same shape -----------------------------------------------------------------------------------------------------
def _is_degenerate(ed: torch.Tensor) -> bool:
    """A constant expected tensor: scaling, shifting and permuting it say nothing."""
    finite = ed[torch.isfinite(ed)]
    return finite.numel() < _MIN_ENTRIES or bool((finite == finite.flatten()[0]).all())


def _transposed(ad, ed, close) -> str | None:
    for i, j in itertools.combinations(range(ed.ndim), 2):
        if ed.shape[i] == ed.shape[j] > 1 and close(ad, ed.transpose(i, j)):
            return _("your output is the expected one with axes {i} and {j} swapped (a transpose): check which axis is "
                     "which — e.g. queries are rows and keys are columns of the score matrix.").format(i=i, j=j)
    return None


def _permuted(ad, ed, close) -> str | None:
    for dim in range(ed.ndim):
        n = ed.shape[dim]
        if not 2 <= n <= _MAX_PERMUTED:
            continue
        order = _match_slices(ad, ed, dim, close)
        if order is None or order == list(range(n)):
            continue
        if len(set(order)) != n:  # several slices equal: the order is ambiguous
            continue
        shown = ", ".join(map(str, order[:8])) + (", ..." if n > 8 else "")
        hint = _interleave_hint(order)
        if dim == ed.ndim - 2:
            message = _("your output has the right rows, in a different order: position i holds what belongs at "
                        "[{order}]{hint}. Look at how that axis is split, merged or indexed.")
        elif dim == ed.ndim - 1:
            message = _("your output has the right columns, in a different order: position i holds what belongs at "
                        "[{order}]{hint}. Look at how that axis is split, merged or indexed.")
        else:
            message = _("your output has the right entries along axis {dim}, in a different order: position i holds "
                        "what belongs at [{order}]{hint}. Look at how that axis is split, merged or indexed.")
        return message.format(dim=dim, order=shown, hint=hint)
    return None


def _match_slices(ad, ed, dim, close) -> list[int] | None:
    """For each slice of `ad` along `dim`, the index of the nearest matching slice of `ed`, or None.

    Nearest, not first: two slices can both be within tolerance (a sinusoidal table's slowest cosines are all ~1),
    and the first would then be claimed twice and the order called ambiguous."""
    a_slices = ad.unbind(dim)
    e_slices = ed.unbind(dim)
    order = []
    for a_slice in a_slices:
        matches = [j for j, e_slice in enumerate(e_slices) if close(a_slice, e_slice)]
        if not matches:
            return None
        order.append(min(matches, key=lambda j: float((a_slice - e_slices[j]).abs().nan_to_num(nan=0.0).max())))
    return order


def _interleave_hint(order: list[int]) -> str:
    n = len(order)
    for k in range(2, n):
        if n % k == 0:
            groups, size = k, n // k
            # actual[i] = expected[(i % groups) * size + i // groups]: two axes merged in the opposite order
            if order == [(i % groups) * size + i // groups for i in range(n)]:
                return _(" — two axes of sizes {size} and {groups} merged in the opposite order (e.g. heads and "
                         "features interleaved instead of side by side)").format(size=size, groups=groups)
    if order == list(reversed(range(n))):
        return _(" — the whole axis reversed")
    if n % 2 == 0 and order == [i ^ 1 for i in range(n)]:
        return _(" — the two entries of every neighbouring pair exchanged (e.g. sin and cos, or x and y, swapped)")
    shift = (order[0]) % n
    if all(order[i] == (i + shift) % n for i in range(n)):
        return _(" — shifted by {shift} positions (a roll)").format(shift=shift)
    return ""


def _scaled(ad, ed, close) -> str | None:
    norm = float((ed * ed).sum())
    if norm == 0.0 or not math.isfinite(norm):
        return None
    c = float((ad * ed).sum()) / norm
    if not math.isfinite(c) or abs(c - 1.0) < 1e-3 or abs(c) < 1e-12 or not close(ad, c * ed):
        return None
    name = _factor_name(c)
    if name is None:  # no constant a learner writes: more likely a sum that divides everything
        return _("your output is the expected one multiplied by about {factor} everywhere: look for a normalising sum "
                 "that misses or double-counts some terms, or a scale factor applied in the wrong place.").format(
            factor=f"{c:.4g}")
    return _("your output is the expected one multiplied by {factor} everywhere: look for a scale factor that is "
             "missing, applied twice or inverted (√d_k? a sign?).").format(factor=name)


def _factor_name(c: float) -> str | None:
    """The factor as a learner would write it: 2, −1, 8 = √64, 1/√10, or None (no such constant: 'about 3.7')."""
    sign = "−" if c < 0 else ""
    m = abs(c)
    candidates = []  # (value, name, whether the name is a whole number or its inverse)
    for k in range(1, 4097):
        as_root = f" = √{k * k}" if 1 < k and k * k <= 65536 else ""  # 8 is also √64 (√d_k with d_k = 64)
        candidates += [(k, f"{k}{as_root}", True), (1 / k, f"1/{k}" + as_root.replace("√", "1/√"), True)]
        if math.isqrt(k) ** 2 != k:
            candidates += [(math.sqrt(k), f"√{k}", False), (1 / math.sqrt(k), f"1/√{k}", False)]
    for value, name, whole in candidates:
        if abs(m - value) <= 1e-4 * value:
            return f"{sign}{name}" + ("" if whole else f" (≈ {c:.4g})")
    return None


def _shifted(ad, ed, close, atol) -> str | None:
    c = float((ad - ed).mean())
    if not math.isfinite(c) or abs(c) <= 10 * atol or not close(ad, ed + c):
        return None
    return _("your output is the expected one plus a constant {c} everywhere: look for a term added once too often or "
             "left out.").format(c=f"{c:.4g}")


def _log_or_exp(ad, ed, close) -> str | None:
    """The answer is log(expected) (log-probabilities where probabilities were asked for) or exp(expected)."""
    if bool((ed > 0).all()) and close(ad, ed.log()):
        return _("your output is the logarithm of the expected one: log-probabilities (a log-softmax, or the log of a "
                 "sum subtracted) where the probabilities themselves were asked for — divide by the sum instead, or "
                 "exponentiate.")
    if bool((ed.abs() < 80).all()) and close(ad, ed.exp()):
        return _("your output is the exponential of the expected one: an exp (or a softmax's numerator) applied to "
                 "values that should be returned as they are, or a log left out.")
    return None


def _softmax_related(ad, ed, close) -> str | None:
    """The answer is the softmax of the expected tensor along some axis (a softmax applied once too often, weights
    returned where scores were asked for), or the expected tensor is the softmax of the answer (the softmax, the
    normalisation into weights, is missing: the scores are returned)."""
    for dim in reversed(range(ed.ndim)):
        if ed.shape[dim] < 2:
            continue
        axis = _("the last axis") if dim == ed.ndim - 1 else _("axis {dim}").format(dim=dim)
        if close(ad, torch.softmax(ed, dim)):
            return _("your output is the softmax (along {axis}) of the expected one: a softmax is applied where raw "
                     "scores (or an already normalised result) should be returned.").format(axis=axis)
        if bool(torch.isfinite(ad).all()) and _sums_to_one(ed, dim) and close(torch.softmax(ad, dim), ed):
            return _("your output gives the expected one after a softmax along {axis}: it is the scores before the "
                     "softmax. The normalisation into weights that sum to 1 (the softmax) is missing.").format(
                axis=axis)
    return None


def _sums_to_one(t: torch.Tensor, dim: int) -> bool:
    return bool((t >= 0).all()) and bool(torch.isclose(t.sum(dim), torch.ones((), dtype=t.dtype), atol=1e-4, rtol=0).all())


def _normalised_elsewhere(ad, ed) -> str | None:
    """The expected tensor is a distribution along one axis (non-negative, sums to 1), the answer is one along
    another axis and not along that one: the softmax or the normalisation runs over the wrong axis."""
    right = [d for d in range(ed.ndim) if ed.shape[d] > 1 and _sums_to_one(ed, d)]
    if len(right) != 1:
        return None
    want = right[0]
    if _sums_to_one(ad, want):
        return None
    other = [d for d in range(ad.ndim) if d != want and ad.shape[d] > 1 and _sums_to_one(ad, d)]
    if not other:
        return None
    name = {ed.ndim - 1: _("the last axis"), ed.ndim - 2: _("the second-to-last axis")}
    return _("your output sums to 1 along {got} (axis {got_dim}) instead of {want} (axis {want_dim}): the softmax or "
             "normalisation runs over the wrong axis (dim=...). Each query's weights over the keys should sum to "
             "1.").format(got=name.get(other[0], _("axis {dim}").format(dim=other[0])), got_dim=other[0],
                          want=name.get(want, _("axis {dim}").format(dim=want)), want_dim=want)


def _rows_scaled(ad, ed, close) -> str | None:
    """Each row of the answer is the expected row times a factor of its own, and the factors differ: a division by
    a per-row sum (or max) that is missing, applied twice, or taken over the wrong terms."""
    if ed.ndim < 2 or ed.shape[-1] < 2:
        return None
    rows_a, rows_e = ad.reshape(-1, ed.shape[-1]), ed.reshape(-1, ed.shape[-1])
    if rows_e.shape[0] < 3:
        return None
    norms = (rows_e * rows_e).sum(-1)
    if bool((norms == 0).any()):
        return None
    factors = (rows_a * rows_e).sum(-1) / norms
    if not bool(torch.isfinite(factors).all()) or bool((factors.abs() < 1e-9).any()):
        return None
    if not close(rows_a, factors[:, None] * rows_e):
        return None
    if float(factors.max() - factors.min()) <= 1e-3 * float(factors.abs().max()):
        return None  # one factor for every row: _scaled's case
    return _("each row of your output is the expected row times a factor of its own (from {low} to {high}): a per-row "
             "normalisation — a division by the row's sum, as a softmax does — is missing, done twice, or taken over "
             "the wrong terms.").format(low=f"{float(factors.min()):.3g}", high=f"{float(factors.max()):.3g}")


def _zero_rows(ad, ed, close) -> str | None:
    """Rows that are exactly zero where the expected row is a distribution over several keys (a softmax's weights),
    every other row right: nothing survived the row's exp (it underflowed: scores far below zero with no row maximum
    subtracted) or its mask. Said only of such rows: a zero row of a matrix that is no distribution has other causes."""
    if ed.ndim < 1 or ed.shape[-1] < 2:
        return None
    rows_a, rows_e = ad.reshape(-1, ed.shape[-1]), ed.reshape(-1, ed.shape[-1])
    zero = (rows_a == 0).all(-1) & (rows_e != 0).any(-1)
    if not bool(zero.any()) or not close(rows_a[~zero], rows_e[~zero]):
        return None
    lost = rows_e[zero]
    if not (bool((lost >= 0).all()) and bool(((lost > 0).sum(-1) >= 2).all())
            and bool(torch.isclose(lost.sum(-1), torch.ones(()).double(), atol=1e-3).all())):
        return None
    return _("{n} of {rows} rows of your output are all zeros where the expected row is not ({positions}): did every "
             "entry of those rows vanish in exp? Scores far below zero (below about -100 in float32) give exp(score) "
             "= 0 unless the row's own maximum is subtracted first (the maximum of that row's allowed scores, not 0, a "
             "clamp or one maximum for the whole tensor); or were all their keys masked?").format(
        n=int(zero.sum()), rows=zero.numel(), positions=_positions(zero))


def _some_rows(ad, ed, rtol, atol) -> str | None:
    if ed.ndim < 2:
        return None
    rows_a = ad.reshape(-1, ed.shape[-1])
    rows_e = ed.reshape(-1, ed.shape[-1])
    ok = torch.isclose(rows_a, rows_e, rtol=rtol, atol=atol, equal_nan=True).all(-1)
    n_ok = int(ok.sum())
    if n_ok == 0 or n_ok == ok.numel() or ok.numel() < 3:
        return None
    wrong = ~ok
    bad = wrong.nonzero().flatten().tolist()
    empty = (rows_e == 0).all(-1)
    entries = ~torch.isclose(rows_a, rows_e, rtol=rtol, atol=atol, equal_nan=True)  # (rows, columns): wrong entries
    bad_columns = entries.any(0)
    # Wrong exactly where (two or more) wrong rows meet wrong columns, with right columns too: the mistake lives in the columns
    # (a frequency, a feature, a pair of 05's sinusoid), and the right rows are those it cannot show in (position 0).
    if len(bad) >= 2 and 2 <= int(bad_columns.sum()) < bad_columns.numel() \
            and bool((entries == (wrong[:, None] & bad_columns)).all()):
        return _("your output is right in {n_ok} of {rows} rows and in {n_cols} of {cols} columns ({columns}), and "
                 "wrong wherever a wrong row meets a wrong column: the mistake depends on the column (the feature, the "
                 "frequency, the pair), and the right rows are those where it cannot show (a position 0, an angle "
                 "0): look at what your code computes per column.").format(
                     n_ok=n_ok, rows=ok.numel(), n_cols=int((~bad_columns).sum()), cols=bad_columns.numel(),
                     columns=_positions(~bad_columns))
    # Said only where the rows show it: a line about masked rows under a check without masks sends the learner off.
    if bool(empty.any()) and bool((wrong == empty).all()):
        hint = _("they are exactly the rows that should be all zeros (a query with nothing it may attend to, or a "
                 "padded position): what does your code give a row like that?")
    elif bad == list(range(bad[0], ok.numel())):
        hint = _("every row from index {start} on is wrong and every row before it right: look at what your code "
                 "does differently from there on (a boundary, an off-by-one length)").format(start=bad[0])
    else:
        hint = _("look at what the wrong rows have in common, and what your code does with them")
    return _("{n_ok} of {rows} rows of your output are right and {n_wrong} wrong ({positions}): {hint}.").format(
        n_ok=n_ok, rows=ok.numel(), n_wrong=len(bad), positions=_positions(wrong), hint=hint)


# -- booleans -------------------------------------------------------------------------------------------------------
def _diagnose_bool(a: torch.Tensor, e: torch.Tensor) -> str | None:
    if a.dtype != torch.bool:
        if a.shape == e.shape and bool((a.double() == e.double()).all()):
            return _("the entries are right but the dtype is {dtype}, not torch.bool: return a boolean mask.").format(
                dtype=a.dtype)
        return None
    if e.dtype != torch.bool:
        return None
    if a.shape != e.shape:
        return _diagnose_shape(a.double(), e.double(), lambda x, y: x.shape == y.shape and bool((x == y).all()),
                               masks=True)
    if bool((a == ~e).all()):
        return _("every entry of your mask is the opposite of the expected one: in this course True means "
                 "'may attend'; flip the mask (~mask) or the comparison.")
    if e.ndim >= 2:
        for i, j in itertools.combinations(range(e.ndim), 2):
            if e.shape[i] == e.shape[j] > 1 and bool((a == e.transpose(i, j)).all()):
                return _("your mask is the expected one transposed (axes {i} and {j} swapped): rows are queries, "
                         "columns are keys.").format(i=i, j=j)
        diff = a != e
        if e.shape[-1] == e.shape[-2]:
            n = e.shape[-1]
            eye = torch.eye(n, dtype=torch.bool).expand_as(e)
            if bool((diff == eye).all()):
                return _("your mask differs from the expected one exactly on the diagonal: may a position attend to "
                         "itself?")
            for k in range(-(n - 1), n):
                if k == 0:
                    continue
                off = torch.diag(torch.ones(n - abs(k), dtype=torch.bool), k).expand_as(e)
                if bool((diff == off).all()):
                    message = {
                        (False, True): _("your mask differs from the expected one on exactly one diagonal (keys {n} "
                                         "position after the query): an off-by-one in a window or causal boundary."),
                        (False, False): _("your mask differs from the expected one on exactly one diagonal (keys {n} "
                                          "position before the query): an off-by-one in a window or causal boundary."),
                        (True, True): _("your mask differs from the expected one on exactly one diagonal (keys {n} "
                                        "positions after the query): an off-by-one in a window or causal boundary."),
                        (True, False): _("your mask differs from the expected one on exactly one diagonal (keys {n} "
                                         "positions before the query): an off-by-one in a window or causal boundary."),
                    }[abs(k) > 1, k > 0]
                    return message.format(n=abs(k))
    return None


def _is_01(t: torch.Tensor) -> bool:
    return not t.is_complex() and bool(((t == 0) | (t == 1)).all())


def _positions(flags: torch.Tensor) -> str:
    """Readable positions of True entries: 'the first', 'the last', 'indices 0, 3, 5', ..."""
    flat = flags.flatten()
    idx = flat.nonzero().flatten().tolist()
    n = flat.numel()
    if idx == [0]:
        return _("the first")
    if idx == [n - 1]:
        return _("the last")
    if flags.ndim > 1:
        coords = [tuple(int(v) for v in torch.unravel_index(torch.tensor(i), flags.shape)) for i in idx[:6]]
        return _("at {positions}").format(positions=", ".join(map(str, coords)) + (", ..." if len(idx) > 6 else ""))
    return _("indices {indices}").format(indices=", ".join(map(str, idx[:8])) + (", ..." if len(idx) > 8 else ""))


# -- counts ---------------------------------------------------------------------------------------------------------
def count_diagnosis(got: object, expected: int, terms: Mapping[str, int]) -> str | None:
    """How a wrong whole-number count relates to the right one, in the exercise's own quantities.

    `terms` names the quantities a count is built from, e.g. {"N·d": N * d, "N": N}. When the difference is a small
    multiple of one of them, that term is missing or counted too often; otherwise, when the two counts differ by a
    simple factor, that factor is missing or extra. None when neither explains it."""
    if not isinstance(got, int) or isinstance(got, bool) or got == expected or expected == 0:
        return None
    diff = got - expected
    for c in range(1, 5):  # larger multiples of a small term match by coincidence on small cases
        names = [name for name, value in terms.items() if value and abs(diff) == c * value]
        if names:
            times = "" if c == 1 else f"{c} × "
            terms_said = [_("{times}{name} (= {value})").format(times=times, name=name, value=terms[name])
                          for name in names]
            which = terms_said[0]
            for other in terms_said[1:]:
                which = _("{one} or {other}").format(one=which, other=other)
            if diff < 0:
                return _("your count is short by exactly {which}: a term of that size is missing.").format(which=which)
            return _("your count is over by exactly {which}: a term of that size is counted too often or is "
                     "extra.").format(which=which)
    ratio = Fraction(got, expected)
    if ratio > 0 and ratio.numerator <= 16 and ratio.denominator <= 16:
        return _("your count is exactly {ratio} times the expected one: a factor of {ratio} (or of {inverse}) is "
                 "missing or extra — which quantity has that size here?").format(ratio=ratio, inverse=1 / ratio)
    return None
