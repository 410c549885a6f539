"""Mistakes planted into 01_attention_intuition's solution (each must lose points and be named) and correct rewrites (full marks)."""

NOTEBOOK = "01_attention_intuition"

# Each mistake replaces `old` (exactly once) in answer cell `cell`; grading must lose points on `exercise`
# and name `mistake` there.
MISTAKES = [
    # softmax
    {"cell": "softmax", "old": "shifted = x - x.max(dim=dim, keepdim=True).values", "new": "shifted = x",
     "exercise": "softmax", "mistake": "no max-subtraction"},
    # G-7: one max for the whole tensor: no overflow, but rows far below it underflow to 0 / 0
    {"cell": "softmax", "old": "shifted = x - x.max(dim=dim, keepdim=True).values", "new": "shifted = x - x.max()",
     "exercise": "softmax", "mistake": "one max for the whole tensor"},
    {"cell": "softmax", "old": "    ### BEGIN SOLUTION\n", "new": "    ### BEGIN SOLUTION\n    dim = 0\n",
     "exercise": "softmax", "mistake": "wrong dim"},
    {"cell": "softmax", "old": "    ### BEGIN SOLUTION\n", "new": "    ### BEGIN SOLUTION\n    dim = -1\n",
     "exercise": "softmax", "mistake": "wrong dim"},
    # attention_pool
    {"cell": "attention_pool", "old": "output = weights @ values", "new": "output = weights @ keys",
     "exercise": "attention_pool", "mistake": "weighting keys instead of values"},
    {"cell": "attention_pool", "old": "weights = torch.softmax(scores, dim=-1)", "new": "weights = scores",
     "exercise": "attention_pool", "mistake": "scores instead of weights"},
    {"cell": "attention_pool", "old": "scores = keys @ query", "new": "scores = keys @ query / query.shape[-1] ** 0.5",
     "exercise": "attention_pool", "mistake": "scaled scores"},
    {"cell": "attention_pool", "old": "scores = keys @ query",
     "new": "scores = torch.cosine_similarity(keys, query[None, :], dim=-1)",
     "exercise": "attention_pool", "mistake": "cosine similarity instead of the dot product"},
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return torch.tanh(q_hidden + k_hidden).sum(-1)",
     "exercise": "additive_scores", "mistake": "w_v never applied"},
    # additive_scores
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return (q_hidden + k_hidden) @ w_v",
     "exercise": "additive_scores", "mistake": "missing tanh"},
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return torch.tanh((q_hidden + k_hidden) @ w_v)",
     "exercise": "additive_scores", "mistake": "tanh after w_v"},
    {"cell": "additive_scores", "old": ".unsqueeze(-2)", "new": ".unsqueeze(0)",
     "exercise": "additive_scores", "mistake": "leading batch dims not handled"},
    {"cell": "additive_scores", "old": "k_hidden = keys @ W_k.T", "new": "k_hidden = keys @ W_k",
     # non-square weights make every call fail: the square-weights check names it, and no check can pass
     "exercise": "additive_scores", "mistake": "weight matrix applied untransposed", "loses_everything": True},
    {"cell": "attention_pool", "old": "return output, weights", "new": "return output, keys @ query",
     "exercise": "attention_pool", "mistake": "raw scores returned instead of the weights"},
    {"cell": "additive_scores", "old": "torch.tanh(q_hidden + k_hidden)", "new": "torch.tanh(k_hidden * q_hidden)",
     "exercise": "additive_scores", "mistake": "projections multiplied, not added"},
    {"cell": "softmax", "old": "return e / e.sum(dim=dim, keepdim=True)", "new": "return e / e.sum(dim=dim)",
     "exercise": "softmax", "mistake": "keepdim=True forgotten"},
    # nadaraya_watson
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)", "new": "logits = gaps**2 / (2 * bandwidth**2)",
     "exercise": "nadaraya_watson", "mistake": "plus sign in the Gaussian kernel"},
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)",
     "new": "logits = -gaps.abs() / (2 * bandwidth**2)",
     "exercise": "nadaraya_watson", "mistake": "distance not squared"},
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)", "new": "logits = -gaps**2 / (2 * bandwidth)",
     "exercise": "nadaraya_watson", "mistake": "bandwidth not squared, or the 2 missing"},
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)", "new": "logits = -gaps**2 / bandwidth**2",
     "exercise": "nadaraya_watson", "mistake": "bandwidth not squared, or the 2 missing"},
    {"cell": "nadaraya_watson", "old": "alpha = torch.softmax(logits, dim=1)", "new": "alpha = torch.softmax(logits, dim=0)",
     "exercise": "nadaraya_watson", "mistake": "normalised over the queries"},
    # the Gaussian weights written out as exp / sum: right on ordinary inputs, 0 / 0 far from every key
    {"cell": "nadaraya_watson", "old": "alpha = torch.softmax(logits, dim=1)",
     "new": "kernel = torch.exp(logits)\n    alpha = kernel / kernel.sum(dim=1, keepdim=True)",
     "exercise": "nadaraya_watson", "mistake": "Gaussian weights normalised without the max shift"},
    {"cell": "nadaraya_watson", "old": "return alpha @ y_keys", "new": "return alpha @ x_keys",
     "exercise": "nadaraya_watson", "mistake": "weighting keys instead of values"},
]

# Correct answers written differently must keep full marks.
VARIANTS = [
    {"cell": "softmax", "old": "x.max(dim=dim, keepdim=True).values", "new": "x.amax(dim, keepdim=True).detach()"},
    {"cell": "softmax", "old": "return e / e.sum(dim=dim, keepdim=True)",
     "new": "return torch.exp(shifted - torch.logsumexp(shifted, dim=dim, keepdim=True))"},
    {"cell": "attention_pool", "old": "scores = keys @ query", "new": "scores = torch.einsum('nd,d->n', keys, query)"},
    {"cell": "attention_pool", "old": "weights = torch.softmax(scores, dim=-1)", "new": "weights = softmax(scores)"},
    {"cell": "attention_pool", "old": "output = weights @ values",
     "new": "output = (weights[:, None] * values).sum(dim=0)"},
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return torch.einsum('...nh,h->...n', torch.tanh(q_hidden + k_hidden), w_v)"},
    {"cell": "additive_scores", "old": "k_hidden = keys @ W_k.T",
     "new": "k_hidden = torch.nn.functional.linear(keys, W_k)"},
    {"cell": "nadaraya_watson", "old": "gaps = x_query[:, None] - x_keys[None, :]",
     "new": "gaps = x_query.unsqueeze(-1) - x_keys.unsqueeze(0)"},
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)",
     "new": "logits = -torch.cdist(x_query[:, None], x_keys[:, None]) ** 2 / (2 * bandwidth * bandwidth)"},
    {"cell": "nadaraya_watson", "old": "alpha = torch.softmax(logits, dim=1)", "new": "alpha = softmax(logits)"},
    {"cell": "nadaraya_watson", "old": "return alpha @ y_keys", "new": "return (alpha * y_keys[None, :]).sum(dim=-1)"},
]

# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return -torch.tanh(q_hidden + k_hidden) @ w_v",
     "exercise": "additive_scores", "diagnosis": "multiplied by −1"},
    # softmax moved `dim` to the end to work along -1 and never moved it back
    {"cell": "softmax",
     "old": "    shifted = x - x.max(dim=dim, keepdim=True).values  # largest entry becomes 0, so exp never overflows\n"
            "    e = torch.exp(shifted)  # same shape as x, every entry in (0, 1]\n"
            "    return e / e.sum(dim=dim, keepdim=True)",
     "new": "    x = x.transpose(dim, -1)  # work along the last axis\n"
            "    shifted = x - x.max(dim=-1, keepdim=True).values\n"
            "    e = torch.exp(shifted)\n"
            "    return e / e.sum(dim=-1, keepdim=True)",
     "exercise": "softmax", "diagnosis": "axes in another order"},
    # the exponentials taken in float64 "for stability", the result never cast back to x's dtype
    {"cell": "softmax", "old": "e = torch.exp(shifted)", "new": "e = torch.exp(shifted.double())",
     "exercise": "softmax", "diagnosis": "dtype is torch.float64, not torch.float32"},
    # the exponentials cast to float32 "to be safe": right on float32 input, float32 out for float64 and float16
    {"cell": "softmax", "old": "e = torch.exp(shifted)", "new": "e = torch.exp(shifted).float()",
     "exercise": "softmax", "diagnosis": "dtype is torch.float32, not torch.float64"},
    # the weighted sum written as a mean over the keys: divided by n
    {"cell": "attention_pool", "old": "output = weights @ values", "new": "output = (weights[:, None] * values).mean(dim=0)",
     "exercise": "attention_pool", "diagnosis": "multiplied by 1/5"},
    # the query as a (1, d) row vector: scores, weights and output keep a leading axis of size 1
    {"cell": "attention_pool", "old": "scores = keys @ query", "new": "scores = query[None, :] @ keys.T",
     "exercise": "attention_pool", "diagnosis": "extra axis of size 1 at position 0"},
    # log-softmax returned: the log of the sum subtracted instead of dividing by the sum
    {"cell": "softmax", "old": "return e / e.sum(dim=dim, keepdim=True)",
     "new": "return shifted - torch.log(e.sum(dim=dim, keepdim=True))",
     "exercise": "softmax", "diagnosis": "logarithm of the expected one"},
    # the predictions cast to float32 "to be safe": right on float32 input, float32 out for float64
    {"cell": "nadaraya_watson", "old": "return alpha @ y_keys", "new": "return (alpha @ y_keys).float()",
     "exercise": "nadaraya_watson", "diagnosis": "dtype is torch.float32, not torch.float64"},
]

# Mistakes no catalogue entry or diagnosis explains: they must lose points and be given no name at all.
UNNAMED = [
    # scores of shape (..., n, 1): softmax over the size-1 axis gives the same weights for every query, as a missing
    # tanh would; that name would send the learner to the wrong line.
    {"cell": "additive_scores", "old": "return torch.tanh(q_hidden + k_hidden) @ w_v",
     "new": "return torch.tanh(q_hidden + k_hidden) @ w_v[:, None]", "exercise": "additive_scores"},
    # the bandwidth turned into a Python number: every value right, but h can no longer be learned
    {"cell": "nadaraya_watson", "old": "logits = -gaps**2 / (2 * bandwidth**2)",
     "new": "logits = -gaps**2 / (2 * float(bandwidth) ** 2)", "exercise": "nadaraya_watson",
     "feedback": "no gradient reaches bandwidth"},
]
