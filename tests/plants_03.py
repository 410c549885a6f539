"""Mistakes planted into 03_masking's solution (each must lose points and be named) and correct rewrites (full marks)."""

NOTEBOOK = "03_masking"

_SOFTMAX_BODY = '''    scores = scores.masked_fill(~mask, float("-inf"))  # same shape as scores; the mask broadcasts
    row_max = scores.amax(dim=-1, keepdim=True)  # (..., 1); -inf on a fully masked row
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))  # never -inf - (-inf)
    e = torch.exp(scores - row_max)  # masked entries: exp(-inf) = 0
    total = e.sum(dim=-1, keepdim=True)  # (..., 1); 0 on a fully masked row
    return e / torch.where(total > 0, total, torch.ones_like(total))  # an empty row is 0 / 1 = 0, never 0 / 0
'''

_BUILD_PADDING = '''    mask = j[None, None, None, :] < key_lengths[:, None, None, None]  # (B, 1, 1, Lk): real keys only
    mask = mask.expand(-1, 1, Lq, Lk)  # (B, 1, Lq, Lk): the same keys for every query
'''

MISTAKES = [
    # causal_mask
    {"cell": "causal_mask", "old": "torch.ones(L, L, dtype=torch.bool).tril()",
     "new": "torch.ones(L, L, dtype=torch.bool).triu()",
     "exercise": "causal_mask", "mistake": "upper vs lower triangle"},
    {"cell": "causal_mask", "old": "return torch.ones(L, L, dtype=torch.bool).tril()",
     "new": "return torch.ones(L, L, dtype=torch.bool).triu(diagonal=1)",
     "exercise": "causal_mask", "mistake": "inverted polarity"},
    # padding_mask
    {"cell": "padding_mask", "old": "positions[None, :] < lengths[:, None]",
     "new": "positions[None, :] >= lengths[:, None]",
     "exercise": "padding_mask", "mistake": "inverted polarity"},
    {"cell": "padding_mask", "old": "positions[None, :] < lengths[:, None]",
     "new": "positions[None, :] + 1 < lengths[:, None]",
     "exercise": "padding_mask", "mistake": "off-by-one length"},
    # sliding_window_mask
    {"cell": "sliding_window_mask", "old": "(j > i - window)", "new": "(j >= i - window)",
     "exercise": "sliding_window_mask", "mistake": "off-by-one window"},
    {"cell": "sliding_window_mask", "old": "(j > i - window)", "new": "(j > i - window + 1)",
     "exercise": "sliding_window_mask", "mistake": "off-by-one window"},
    {"cell": "sliding_window_mask", "old": "return (j <= i) & (j > i - window)",
     "new": "return (j >= i) & (j < i + window)",
     "exercise": "sliding_window_mask", "mistake": "upper vs lower triangle"},
    {"cell": "sliding_window_mask", "old": "return (j <= i) & (j > i - window)",
     "new": "return ~((j <= i) & (j > i - window))",
     "exercise": "sliding_window_mask", "mistake": "inverted polarity"},
    # masked_softmax
    # the row max over all scores, the mask applied to the exponentials: right until a forbidden score is far above
    {"cell": "masked_softmax", "old": _SOFTMAX_BODY,
     "new": "    row_max = scores.amax(dim=-1, keepdim=True)\n"
            "    e = torch.exp(scores - row_max) * mask\n"
            "    total = e.sum(dim=-1, keepdim=True)\n"
            "    return e / torch.where(total > 0, total, torch.ones_like(total))\n",
     "exercise": "masked_softmax", "mistake": "forbidden scores still set the row's scale"},
    {"cell": "masked_softmax", "old": _SOFTMAX_BODY,
     "new": "    return torch.softmax(scores, dim=-1) * mask  # zero the masked weights, no renormalising\n",
     "exercise": "masked_softmax", "mistake": "masking after softmax"},
    {"cell": "masked_softmax", "old": _SOFTMAX_BODY,
     "new": '    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)\n',
     "exercise": "masked_softmax", "mistake": "NaN on fully masked rows"},
    {"cell": "masked_softmax", "old": "scores.masked_fill(~mask, ", "new": "scores.masked_fill(mask, ",
     "exercise": "masked_softmax", "mistake": "inverted polarity"},
    {"cell": "masked_softmax", "old": "scores.masked_fill(~mask, float(\"-inf\"))", "new": "scores.masked_fill(~mask, -1e9)",
     "exercise": "masked_softmax", "mistake": "-1e9 instead of -inf"},
    # build_attention_mask
    {"cell": "build_attention_mask", "old": "    return mask\n", "new": "    return ~mask\n",
     "exercise": "build_attention_mask", "mistake": "inverted polarity"},
    {"cell": "build_attention_mask", "old": "(j[None, :] <= i[:, None])", "new": "(j[None, :] >= i[:, None])",
     "exercise": "build_attention_mask", "mistake": "upper vs lower triangle"},
    {"cell": "build_attention_mask", "old": _BUILD_PADDING,
     "new": "    rows = torch.arange(Lq, device=key_lengths.device)  # (Lq,)\n"
            "    mask = (rows[None, None, :, None] < key_lengths[:, None, None, None]).expand(-1, 1, Lq, Lk)  # (B, 1, Lq, Lk)\n",
     "exercise": "build_attention_mask", "mistake": "padding on the query axis"},
    {"cell": "sliding_window_mask", "old": "return (j <= i) & (j > i - window)",
     "new": "return (j > i - window) & (j < i + window)",
     "exercise": "sliding_window_mask", "mistake": "window open on both sides"},
    {"cell": "masked_softmax", "old": 'scores = scores.masked_fill(~mask, float("-inf"))',
     "new": 'masked = scores.masked_fill(~mask, float("-inf"))',
     "exercise": "masked_softmax", "mistake": "mask not applied"},
    {"cell": "build_attention_mask", "old": "mask = mask & (j[None, :] <= i[:, None])",
     "new": "mask = torch.ones_like(mask) & (j[None, :] <= i[:, None])",
     "exercise": "build_attention_mask", "mistake": "causal mask replaces the padding mask"},
]

VARIANTS = [
    {"cell": "causal_mask", "old": "torch.ones(L, L, dtype=torch.bool).tril()",
     "new": "torch.arange(L)[:, None] >= torch.arange(L)[None, :]"},
    {"cell": "padding_mask", "old": "positions[None, :] < lengths[:, None]",
     "new": "(lengths.unsqueeze(-1) - positions) > 0"},
    {"cell": "sliding_window_mask", "old": "return (j <= i) & (j > i - window)",
     "new": "return torch.ones(L, L, dtype=torch.bool).tril() & torch.ones(L, L, dtype=torch.bool).triu(-(window - 1))"},
    {"cell": "masked_softmax", "old": _SOFTMAX_BODY,
     "new": '    weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # NaN on empty rows...\n'
            "    return weights.masked_fill(~mask, 0.0)  # ...which are entirely ~mask, so they become 0\n"},
    {"cell": "build_attention_mask", "old": "mask & (j[None, :] <= i[:, None])",
     "new": "torch.logical_and(mask, torch.ones(Lq, Lk, dtype=torch.bool, device=key_lengths.device).tril())"},
]

# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    # No diagonal: at L = 1 it coincides with "inverted polarity" ([[False]]), which must not be named.
    {"cell": "causal_mask", "old": ".tril()  # (L, L)", "new": ".tril(-1)  # (L, L)",
     "exercise": "causal_mask", "diagnosis": "exactly on the diagonal"},
    # tril(1) "to include the diagonal": one key in the future allowed
    {"cell": "causal_mask", "old": ".tril()  # (L, L)", "new": ".tril(1)  # (L, L)",
     "exercise": "causal_mask", "diagnosis": "keys 1 position after the query"},
    # positions and lengths broadcast the other way round: (max_len, B)
    {"cell": "padding_mask", "old": "return positions[None, :] < lengths[:, None]",
     "new": "return positions[:, None] < lengths[None, :]",
     "exercise": "padding_mask", "diagnosis": "axes in another order"},
    # the scores converted to float64 before masking, the weights never cast back
    {"cell": "masked_softmax", "old": "scores = scores.masked_fill(~mask, float(\"-inf\"))",
     "new": "scores = scores.double().masked_fill(~mask, float(\"-inf\"))",
     "exercise": "masked_softmax", "diagnosis": "dtype is torch.float64, not torch.float32"},
    # the row maximum subtracted only where it is positive "to stop overflow": rows of scores far below zero underflow
    {"cell": "masked_softmax", "old": "row_max = scores.amax(dim=-1, keepdim=True)",
     "new": "row_max = scores.amax(dim=-1, keepdim=True).clamp(min=0)",
     "exercise": "masked_softmax", "diagnosis": "all zeros where the expected row is not"},
    # the expand to (B, 1, Lq, Lk) left out: without causal the mask stays (B, 1, 1, Lk)
    {"cell": "build_attention_mask",
     "old": "    mask = mask.expand(-1, 1, Lq, Lk)  # (B, 1, Lq, Lk): the same keys for every query\n", "new": "",
     "exercise": "build_attention_mask", "diagnosis": "once broadcast"},
]

# Mistakes that must lose points and be given no catalogue name; `feedback`, where given, must be in the feedback.
UNNAMED = [
    # The scores multiplied by the mask: forbidden keys score 0, not -inf, and keep weight in every row. Its fully
    # masked rows are uniform, as a -1e9 fill's are, but its whole output is not a -1e9 fill's: no name.
    {"cell": "masked_softmax", "old": _SOFTMAX_BODY, "new": "    return torch.softmax(scores * mask, dim=-1)\n",
     "exercise": "masked_softmax", "feedback": "exactly 0"},
    # The square causal mask cut to Lq rows, as a learner reuses causal_mask: right while Lq <= Lk (every earlier
    # visible check), a broadcast RuntimeError when Lq > Lk. The visible check with Lq > Lk says why in a sentence.
    {"cell": "build_attention_mask", "old": "mask = mask & (j[None, :] <= i[:, None])",
     "new": "mask = mask & causal_mask(Lk)[:Lq]",
     "exercise": "build_attention_mask", "feedback": "a square causal mask of side Lk has only 3 rows"},
]

# influence: the answer cell's loop, and its variants and mistakes
_INFLUENCE_BODY = '''    y = layer(x)  # (L, d_out)
    squares = x.new_zeros(y.shape[0], x.shape[0])  # (L, L): sum over a, b of (d y[t, a] / d x[s, b])^2
    for t in range(y.shape[0]):
        for a in range(y.shape[1]):
            (g,) = torch.autograd.grad(y[t, a], x, retain_graph=True)  # (L, d): returned, never added to a .grad
            squares[t] += (g ** 2).sum(dim=-1)  # row t, every input s at once
    return squares.sqrt()  # (L, L): row t = output, column s = input
'''
_INFLUENCE_GRAD = "            (g,) = torch.autograd.grad(y[t, a], x, retain_graph=True)  # (L, d): returned, never added to a .grad\n"

MISTAKES += [
    # one backward of the summed output: one number per input position
    {"cell": "influence", "old": _INFLUENCE_BODY,
     "new": "    (g,) = torch.autograd.grad(layer(x).sum(), x)  # (L, d)\n"
            "    return g.norm(dim=-1)  # (L,)\n",
     "exercise": "influence", "mistake": "one backward of the summed output"},
    # ... spread over every row to get the (L, L) shape
    {"cell": "influence", "old": _INFLUENCE_BODY,
     "new": "    (g,) = torch.autograd.grad(layer(x).sum(), x)  # (L, d)\n"
            "    return g.norm(dim=-1).expand(x.shape[0], -1).clone()  # (L, L), every row the same\n",
     "exercise": "influence", "mistake": "one backward of the summed output"},
    # one backward per output position, of y[t].sum(): the block's rows summed before the norm
    {"cell": "influence", "old": _INFLUENCE_BODY,
     "new": "    y = layer(x)  # (L, d_out)\n"
            "    rows = []\n"
            "    for t in range(y.shape[0]):\n"
            "        (g,) = torch.autograd.grad(y[t].sum(), x, retain_graph=True)  # (L, d)\n"
            "        rows.append(g.norm(dim=-1))\n"
            "    return torch.stack(rows)\n",
     "exercise": "influence", "mistake": "output features summed before the gradient"},
    # .backward() into x.grad, never reset: each row carries the rows before it (and the layer keeps its .grad)
    {"cell": "influence", "old": _INFLUENCE_GRAD,
     "new": "            y[t, a].backward(retain_graph=True)\n"
            "            g = x.grad\n",
     "exercise": "influence", "mistake": "gradients accumulated between rows"},
    # x.grad reset each time, but the layer's parameters keep the .grad that .backward() gave them
    {"cell": "influence", "old": _INFLUENCE_GRAD,
     "new": "            x.grad = None\n"
            "            y[t, a].backward(retain_graph=True)\n"
            "            g = x.grad\n",
     "exercise": "influence", "mistake": "gradients left on the layer"},
    {"cell": "influence", "old": "    return squares.sqrt()  # (L, L)", "new": "    return squares.sqrt().T  # (L, L)",
     "exercise": "influence", "mistake": "rows and columns swapped"},
    {"cell": "influence",
     "old": "            squares[t] += (g ** 2).sum(dim=-1)  # row t, every input s at once\n    return squares.sqrt()",
     "new": "            squares[t] += g.abs().sum(dim=-1)  # row t, every input s at once\n    return squares",
     "exercise": "influence", "mistake": "sum of absolute values instead of the Frobenius norm"},
]

VARIANTS += [
    {"cell": "influence", "old": _INFLUENCE_BODY,
     "new": "    jac = torch.func.jacrev(layer)(x)  # (L, d_out, L, d): [t, a, s, b]\n"
            "    return jac.pow(2).sum(dim=(1, 3)).sqrt()  # (L, L)\n"},
]

UNNAMED += [
    # another norm of the block: the right zeros, other values
    {"cell": "influence", "old": "    return squares.sqrt()  # (L, L)",
     "new": "    return torch.autograd.functional.jacobian(layer, x).abs().amax(dim=(1, 3))  # (L, L)",
     "exercise": "influence", "feedback": "differs from the expected values"},
    # the matrix made in float32 whatever x's dtype
    {"cell": "influence", "old": "squares = x.new_zeros(y.shape[0], x.shape[0])",
     "new": "squares = torch.zeros(y.shape[0], x.shape[0])",
     "exercise": "influence", "feedback": "float64 matrix"},
]
