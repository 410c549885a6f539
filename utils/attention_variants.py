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

import itertools
import math
import re
from typing import Any

import torch

#: Course functions a grader may stand in with *inside the learner's process* (`utils.grading.LocalPart`): plain
#: tensor code, differentiable, so a check of gradients through a composite can use them where a called-back stand-in
#: (whose answer crosses the process boundary as data) would cut the graph. Nothing here is secret.
LOCAL_PARTS: dict[str, str] = {
    "attention": "the course's scaled dot-product attention, (q, k, v, mask=None) -> (out, weights)",
    "kv_cache": "notebook 06's KV cache: update(k_new, v_new) -> everything so far, len() -> cached positions",
    "softmax": "notebook 01's softmax, (x, dim=-1) -> torch.softmax(x, dim)",
    "multi_head_attention": "notebook 04's module, (d_model, num_heads, bias=True) with W_q, W_k, W_v, W_o; run by "
                            "torch's own multi-head attention",
}


def local_part(name: str):
    """The function `LOCAL_PARTS` names (KeyError for any other name: nothing else can be asked for)."""
    if name not in LOCAL_PARTS:
        raise KeyError(f"no local part {name!r}; known: {sorted(LOCAL_PARTS)}")
    return {"attention": _attention_part, "kv_cache": ReferenceKVCache, "softmax": _softmax_part,
            "multi_head_attention": ReferenceMultiHeadAttention}[name]


class ReferenceKVCache:
    """Keys and values (B, h_kv, L, d_k) of every token so far, appended on the sequence axis."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def update(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=2)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)
        return self.k, self.v

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[2]


class ReferenceMultiHeadAttention(torch.nn.Module):
    """Notebook 04's module with the same four nn.Linear(d_model, d_model) layers W_q, W_k, W_v, W_o, computed by
    torch's own `multi_head_attention_forward` (so nothing of the exercise is written here): (query, key, value,
    mask=None) -> (output (B, Lq, d_model), weights (B, h, Lq, Lk)), mask boolean with True = may attend."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.W_q = torch.nn.Linear(d_model, d_model, bias=bias)
        self.W_k = torch.nn.Linear(d_model, d_model, bias=bias)
        self.W_v = torch.nn.Linear(d_model, d_model, bias=bias)
        self.W_o = torch.nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        B, Lq, d_model = query.shape
        Lk, h = key.shape[1], self.num_heads
        in_bias = None if self.W_q.bias is None else torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        forbidden = None if mask is None else (~mask).expand(B, h, Lq, Lk).reshape(B * h, Lq, Lk)
        out, weights = torch.nn.functional.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), d_model, h, None, in_bias, None, None,
            False, 0.0, self.W_o.weight, self.W_o.bias, training=False, need_weights=True, attn_mask=forbidden,
            use_separate_proj_weight=True, q_proj_weight=self.W_q.weight, k_proj_weight=self.W_k.weight,
            v_proj_weight=self.W_v.weight, average_attn_weights=False)
        return out.transpose(0, 1), weights


def _attention_part(q, k, v, mask=None):
    return attention(q, k, v, mask)


def _softmax_part(x, dim=-1):
    return torch.softmax(x, dim=dim)


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


#: Every name `passed_in_place_of` can give (a grader exposes it as DERIVED_MISTAKES, for tests/test_roundtrip.py).
PASSED_IN_PLACE_OF = re.compile(
    r"(queries|keys|values) and (queries|keys|values) swapped"
    r"|(queries|keys|values)( and (keys|values))? from (the )?(x|context), not from (the )?(x|context)"
    r"|(queries|keys|values) made with W_[qkv], not W_[qkv]"
)


def N_(message: str) -> str:  # noqa: N802 - utils.i18n's mark; the learner's worker imports this module, not i18n
    """Mark `message` for the catalogue of translations (`utils.failures.Mistake` translates it where it is shown)."""
    return message


#: The roles `passed_in_place_of` names, alone and together (translated where a mistake's name is shown).
_ROLES = (N_("queries"), N_("keys"), N_("values"), N_("queries and keys"), N_("queries and values"),
          N_("keys and values"), N_("queries and keys and values"))


def _words(name: str, explanation: str, **values: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """(name, explanation, words) of a derived mistake: the templates filled with `values` in English, and what
    `utils.failures.Mistake` needs to show them in another language."""
    return name.format(**values), explanation.format(**values), (name, explanation, tuple(values.items()))


def passed_in_place_of(
    passed: dict[str, torch.Tensor], candidates: dict[tuple[str, str], torch.Tensor],
    expected: dict[str, tuple[str, str]],
) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    """(name, explanation, words) of what an attention call was given in place of its queries, keys or values, or
    None; `words` (the templates and the values that fill them) lets `Mistake(name, explanation, section,
    words=words)` show them in the learner's language.

    A grader that stands in for the learner's attention function sees the tensors the learner's module passed.
    `passed` is {role: tensor} for roles "queries", "keys", "values"; `candidates` maps (projection, input) labels
    such as ("W_k", "context") to the tensors that projection of that input gives; `expected` says which label
    each role should be. A role whose tensor equals another label's names the mistake: two roles swapped, an input
    that should have been another ("keys from x, not from the context"), or a projection used in place of another
    ("values made with W_k, not W_v"). Nothing is named when a passed tensor matches no label (a bug elsewhere).
    """
    def label_of(t: torch.Tensor) -> tuple[str, str] | None:
        for label, c in candidates.items():
            if c.shape == t.shape and bool(torch.allclose(t.detach().double(), c.double(), rtol=1e-4, atol=1e-5)):
                return label
        return None

    found = {role: label_of(t) for role, t in passed.items() if isinstance(t, torch.Tensor)}
    if any(label is None for label in found.values()) or len(found) != len(passed):
        return None
    wrong = [role for role in passed if found[role] != expected[role]]
    if not wrong:
        return None
    for a, b in itertools.combinations(wrong, 2):
        if found[a] == expected[b] and found[b] == expected[a]:
            return _words(N_("{a} and {b} swapped"),
                          N_("the call received {a} where {b} belong and the other way round; pass them in the order "
                             "the function declares (q, k, v)"), a=a, b=b)
    role = wrong[0]
    (got_proj, got_input), (want_proj, want_input) = found[role], expected[role]
    if got_proj == want_proj:
        # every role that read the same wrong input, named together ("keys and values from x")
        roles = [r for r in wrong if found[r][0] == expected[r][0] and (found[r][1], expected[r][1]) == (got_input, want_input)]
        who = " and ".join(roles)
        explanation = N_("the {who} were computed from {got}; they must come from {want}: in cross-attention the "
                         "queries come from x and the keys and values from the context")
        if want_input == "context":
            return _words(N_("{who} from {got}, not from the {want}"), explanation, who=who, got=got_input,
                          want=want_input)
        return _words(N_("{who} from the {got}, not from {want}"), explanation, who=who, got=got_input, want=want_input)
    return _words(N_("{role} made with {got_proj}, not {want_proj}"),
                  N_("the {role} were {got_proj}({got_input}) instead of {want_proj}({want_input}): each of Q, K and V "
                     "has its own projection, so {want_proj} is never used and the {role} are a copy of another "
                     "role's"), role=role, got_proj=got_proj, got_input=got_input, want_proj=want_proj,
                  want_input=want_input)
