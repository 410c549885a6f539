"""The standard ways attention goes wrong, computed from given q, k, v and mask: for graders' mistake catalogues.

A mistake is a concept, not a line of one notebook: leaving out the 1/sqrt(d_k) scaling is the same mistake in 02's
function, 04's module, 07's tiles and 08's layers. A grader computes the projections (and the heads) its exercise
uses, then asks for the attention variants here, and maps each concept to its own `Mistake` (which names the section
of *its* notebook that explains it)::

    from utils.attention_variants import attention, attention_variants

    variants = attention_variants(q, k, v, mask)               # {"no_scale": (out, weights), ...}
    outputs = {NO_SCALE: variants["no_scale"][0], ...}

Every function here is plain tensor code on the grader's side; nothing of it reaches the learner's process.
"""

from __future__ import annotations

import math
from typing import Any

import torch

#: The concepts `attention_variants` computes, with what each one does.
CONCEPTS: dict[str, str] = {
    "no_scale": "the scores are not divided by sqrt(d_k)",
    "scale_dk": "the scores are divided by d_k instead of sqrt(d_k)",
    "scale_d_model": "the scores are divided by sqrt(d_model) (the width of the whole model, not of one head)",
    "mask_inverted": "forbidden and allowed are swapped: -inf where the mask is True",
    "softmax_wrong_dim": "the softmax normalises over the queries (dim=-2) instead of the keys",
    "weights_keys": "the weights average the keys instead of the values",
    "global_max": "the softmax subtracts the maximum of the whole tensor, not of each row",
}


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    divisor: float | None = None,
    softmax_dim: int = -1,
    invert_mask: bool = False,
    read_keys: bool = False,
    global_max: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / divisor, masked) v and the weights; the switches reproduce the standard mistakes.

    `mask` is boolean, True = may attend, broadcast against the scores (..., Lq, Lk).
    """
    divisor = math.sqrt(q.shape[-1]) if divisor is None else divisor
    scores = q @ k.transpose(-2, -1) / divisor
    if mask is not None:
        scores = scores.masked_fill(mask if invert_mask else ~mask, float("-inf"))
    if global_max:
        e = torch.exp(scores - scores.max())
        weights = e / e.sum(dim=softmax_dim, keepdim=True)
    else:
        weights = torch.softmax(scores, dim=softmax_dim)
    return weights @ (k if read_keys else v), weights


def attention_variants(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    d_model: int | None = None,
    concepts: tuple[str, ...] | None = None,
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{concept: (output, weights)} for the standard attention mistakes on these inputs.

    Only the variants that predict something are returned: "mask_inverted" needs a mask, "scale_d_model" a
    `d_model` different from d_k, "scale_dk" a d_k other than 1 (where 1/d_k = 1/sqrt(d_k)), and a variant that
    is NaN everywhere (it matches any all-NaN answer, whatever its bug) is left out.
    """
    wanted = tuple(CONCEPTS) if concepts is None else concepts
    unknown = set(wanted) - set(CONCEPTS)
    if unknown:
        raise KeyError(f"unknown attention concept(s) {sorted(unknown)}; known: {sorted(CONCEPTS)}")
    d_k = q.shape[-1]
    switches: dict[str, dict] = {
        "no_scale": {"divisor": 1.0},
        "softmax_wrong_dim": {"softmax_dim": -2},
        "weights_keys": {"read_keys": True},
        "global_max": {"global_max": True},
    }
    if d_k != 1:
        switches["scale_dk"] = {"divisor": float(d_k)}
    if d_model is not None and d_model != d_k:
        switches["scale_d_model"] = {"divisor": math.sqrt(d_model)}
    if mask is not None:
        switches["mask_inverted"] = {"invert_mask": True}
    out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for concept in wanted:
        if concept not in switches:
            continue
        o, w = attention(q, k, v, mask, **switches[concept])
        if bool(torch.isfinite(w).any()):
            out[concept] = (o, w)
    return out


def undefined_as(actual: Any, predicted: torch.Tensor) -> torch.Tensor | None:
    """A mistake's prediction where it says nothing (rows it leaves without a single key: 0/0, log 0) filled with the
    answer's own values: an implementation may put NaN, -inf or 0 there. A prediction that is mostly undefined
    predicts nothing (None): it would match almost any answer."""
    undefined = ~torch.isfinite(predicted)
    if not bool(undefined.any()):
        return predicted
    if 2 * int(undefined.sum()) > predicted.numel():
        return None
    if isinstance(actual, torch.Tensor) and actual.shape == predicted.shape and actual.dtype == predicted.dtype:
        return torch.where(undefined, actual.detach(), predicted)
    return predicted
