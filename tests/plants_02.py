"""Mistakes planted into 02_scaled_dot_product_attention's solution (each must lose points and be named) and correct rewrites (full marks)."""

NOTEBOOK = "02_scaled_dot_product_attention"

_SCORES = "scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)"
_SA_RETURN = "return scaled_dot_product_attention(q, k, v, mask)"

# Each mistake replaces `old` (exactly once) in answer cell `cell`; grading must lose points on `exercise`
# and name `mistake` there.
MISTAKES = [
    # scaled_dot_product_attention: the scale
    {"cell": "scaled_dot_product_attention", "old": _SCORES, "new": "scores = q @ k.transpose(-2, -1)",
     "exercise": "scaled_dot_product_attention", "mistake": "no 1/sqrt(d_k) scaling"},
    {"cell": "scaled_dot_product_attention", "old": "math.sqrt(d_k)", "new": "d_k",
     "exercise": "scaled_dot_product_attention", "mistake": "scaling by 1/d_k"},
    {"cell": "scaled_dot_product_attention", "old": "d_k = q.shape[-1]", "new": "d_k = k.shape[-2]",
     "exercise": "scaled_dot_product_attention", "mistake": "scaling by sqrt(d_model) or sqrt(L)"},
    {"cell": "scaled_dot_product_attention", "old": "d_k = q.shape[-1]", "new": "d_k = q.shape[-2]",
     "exercise": "scaled_dot_product_attention", "mistake": "scaling by sqrt(d_model) or sqrt(L)"},
    {"cell": "scaled_dot_product_attention", "old": "d_k = q.shape[-1]", "new": "d_k = v.shape[-1]",
     "exercise": "scaled_dot_product_attention", "mistake": "scaling by sqrt(d_model) or sqrt(L)"},
    # scaled_dot_product_attention: the softmax, the values, the mask
    {"cell": "scaled_dot_product_attention", "old": "torch.softmax(scores, dim=-1)", "new": "torch.softmax(scores, dim=-2)",
     "exercise": "scaled_dot_product_attention", "mistake": "softmax over the wrong dim"},
    {"cell": "scaled_dot_product_attention", "old": "torch.softmax(scores, dim=-1)", "new": "F.softmax(scores)",
     "exercise": "scaled_dot_product_attention", "mistake": "softmax over the wrong dim"},
    {"cell": "scaled_dot_product_attention", "old": "return weights @ v, weights", "new": "return weights @ k, weights",
     "exercise": "scaled_dot_product_attention", "mistake": "weights @ k instead of weights @ v"},
    {"cell": "scaled_dot_product_attention", "old": "scores.masked_fill(~mask,", "new": "scores.masked_fill(mask,",
     "exercise": "scaled_dot_product_attention", "mistake": "mask polarity inverted"},
    # softmax first, then the mask and a renormalisation: the same numbers until a forbidden score is huge
    {"cell": "scaled_dot_product_attention",
     "old": '''        scores = scores.masked_fill(~mask, float("-inf"))  # (..., Lq, Lk): forbidden pairs get weight 0
    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk): a distribution over the keys for every query
''',
     "new": '''    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
        weights = weights / weights.sum(dim=-1, keepdim=True)
''',
     "exercise": "scaled_dot_product_attention", "mistake": "mask applied after the softmax"},
    # SelfAttention: written inline with the width of x as the divisor, and the context ignored
    {"cell": "SelfAttention", "old": _SA_RETURN,
     "new": "weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]) if mask is None else "
            "(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1])).masked_fill(~mask, float('-inf')), dim=-1)\n"
            "        return weights @ v, weights",
     "exercise": "SelfAttention", "mistake": "scaling by sqrt(d_model) or sqrt(L)"},
    {"cell": "SelfAttention", "old": "source = x if context is None else context", "new": "source = x",
     "exercise": "SelfAttention", "mistake": "cross-attention keys from x"},
    {"cell": "SelfAttention", "old": "k = self.W_k(source)", "new": "k = self.W_q(source)",
     "exercise": "SelfAttention", "mistake": "a projection shared between Q, K and V"},
    # what SelfAttention passes to scaled_dot_product_attention, seen by the grader's stand-in
    {"cell": "SelfAttention", "old": "return scaled_dot_product_attention(q, k, v, mask)",
     "new": "return scaled_dot_product_attention(k, q, v, mask)",
     "exercise": "SelfAttention", "mistake": "queries and keys swapped"},
    {"cell": "SelfAttention", "old": "v = self.W_v(source)", "new": "v = self.W_v(x)",
     "exercise": "SelfAttention", "mistake": "values from x, not from the context"},
    # a transpose that is right for one 2-D example only
    {"cell": "scaled_dot_product_attention", "old": "@ k.transpose(-2, -1)", "new": "@ k.t()",
     "exercise": "scaled_dot_product_attention", "mistake": "leading batch dims not handled (wrong axes transposed?)"},
    {"cell": "scaled_dot_product_attention", "old": "return weights @ v, weights", "new": "return weights, weights @ v",
     "exercise": "scaled_dot_product_attention", "mistake": "output and weights returned in the wrong order"},
    {"cell": "SelfAttention", "old": "return scaled_dot_product_attention(q, k, v, mask)",
     "new": "return scaled_dot_product_attention(q, k, v, mask=None)",
     "exercise": "SelfAttention", "mistake": "mask not passed on"},
    {"cell": "SelfAttention", "old": "self.W_v = nn.Linear(d_model, d_v)", "new": "self.W_v = nn.Linear(d_model, d_k)",
     "exercise": "SelfAttention", "mistake": "W_v sized d_k instead of d_v"},
    # name_the_bug: the two scales' implementations mixed up
    {"cell": "name_the_bug", "old": '"no scaling": attend(1.0, -1, v),\n        "scaled by d_k": attend(width, -1, v),',
     "new": '"no scaling": attend(width, -1, v),\n        "scaled by d_k": attend(1.0, -1, v),',
     "exercise": "name_the_bug", "mistake": "'no scaling' and 'scaled by d_k' swapped"},
    # name_the_bug: == on float32 results of different implementations (and allclose's default atol, almost as strict)
    {"cell": "name_the_bug", "old": "torch.allclose(candidate, output, rtol=1e-4, atol=1e-4)",
     "new": "torch.equal(candidate, output)",
     "exercise": "name_the_bug", "mistake": "outputs compared exactly, or with too tight a tolerance"},
    {"cell": "name_the_bug", "old": "torch.allclose(candidate, output, rtol=1e-4, atol=1e-4)",
     "new": "torch.allclose(candidate, output)",
     "exercise": "name_the_bug", "mistake": "outputs compared exactly, or with too tight a tolerance"},
    # name_the_bug: an exact comparison and "correct" as the fall-through: every output is called correct
    {"cell": "name_the_bug",
     "old": 'torch.allclose(candidate, output, rtol=1e-4, atol=1e-4):\n            return label\n    return "something else"',
     "new": 'bool((candidate == output).all()):\n            return label\n    return "correct"',
     "exercise": "name_the_bug", "mistake": "outputs compared exactly, or with too tight a tolerance"},
    # name_the_bug: no "something else": whatever matches nothing is called correct
    {"cell": "name_the_bug", "old": '    return "something else"', "new": '    return "correct"',
     "exercise": "name_the_bug", "mistake": "'correct' by default"},
    # name_the_bug: the queries' axis, or the transpose, counted from the front: right for 2-D inputs only
    {"cell": "name_the_bug", "old": '"softmax over the queries": attend(math.sqrt(width), -2, v),',
     "new": '"softmax over the queries": attend(math.sqrt(width), 0, v),',
     "exercise": "name_the_bug", "mistake": "an axis counted from the front"},
    {"cell": "name_the_bug", "old": "raw = q @ k.transpose(-2, -1)", "new": "raw = q @ k.T",
     "exercise": "name_the_bug", "mistake": "an axis counted from the front"},
]

# Correct answers written differently must keep full marks (all applied together).
VARIANTS = [
    {"cell": "scaled_dot_product_attention", "old": _SCORES,
     "new": "scores = torch.einsum('...qd,...kd->...qk', q, k) / d_k ** 0.5"},
    {"cell": "scaled_dot_product_attention", "old": 'scores = scores.masked_fill(~mask, float("-inf"))',
     "new": 'scores = torch.where(mask, scores, torch.tensor(float("-inf")))'},
    {"cell": "scaled_dot_product_attention", "old": "torch.softmax(scores, dim=-1)", "new": "F.softmax(scores, -1)"},
    {"cell": "scaled_dot_product_attention", "old": "return weights @ v, weights",
     "new": "return torch.einsum('...qk,...kd->...qd', weights, v), weights"},
    {"cell": "SelfAttention", "old": "source = x if context is None else context",
     "new": "source = context if context is not None else x"},
    {"cell": "SelfAttention", "old": "self.W_v = nn.Linear(d_model, d_v)",
     "new": "self.W_v = nn.Linear(in_features=d_model, out_features=d_v, bias=True)"},
    # name_the_bug: torch's attention for two candidates, and a hand-written tolerance
    {"cell": "name_the_bug", "old": '"correct": attend(math.sqrt(width), -1, v),',
     "new": '"correct": F.scaled_dot_product_attention(q, k, v),'},
    {"cell": "name_the_bug", "old": '"no scaling": attend(1.0, -1, v),',
     "new": '"no scaling": F.scaled_dot_product_attention(q, k, v, scale=1.0),'},
    {"cell": "name_the_bug", "old": "candidate.shape == output.shape and torch.allclose(candidate, output, rtol=1e-4, atol=1e-4)",
     "new": "candidate.shape == output.shape and bool((candidate - output).abs().max() < 1e-3)"},
]

# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    # dropout on the attention weights "as in training" (section 5 shows it), with F.dropout's default training=True:
    # every call is random. Asked again with the same inputs, the answer changes.
    {"cell": "scaled_dot_product_attention", "old": "weights = torch.softmax(scores, dim=-1)",
     "new": "weights = torch.nn.functional.dropout(torch.softmax(scores, dim=-1), p=0.1)",
     "exercise": "scaled_dot_product_attention", "diagnosis": "changes from one call to the next with the same inputs"},
    {"cell": "scaled_dot_product_attention", "old": "return weights @ v, weights",
     "new": "return weights @ v, weights.transpose(-2, -1)",
     "exercise": "scaled_dot_product_attention", "diagnosis": "axes"},
    # the softmax taken in float64 for stability; the output cast back, the weights returned as float64
    {"cell": "scaled_dot_product_attention",
     "old": "    weights = torch.softmax(scores, dim=-1)  # (..., Lq, Lk): a distribution over the keys for every query\n"
            "    return weights @ v, weights",
     "new": "    weights = torch.softmax(scores.double(), dim=-1)  # float64 for a stable softmax\n"
            "    return weights.to(v.dtype) @ v, weights",
     "exercise": "scaled_dot_product_attention", "diagnosis": "dtype is torch.float64, not torch.float32"},
    # softmax written out by hand without subtracting the row maximum: exp overflows on large scores
    {"cell": "scaled_dot_product_attention", "old": "weights = torch.softmax(scores, dim=-1)",
     "new": "e = torch.exp(scores)\n    weights = e / e.sum(dim=-1, keepdim=True)",
     "exercise": "scaled_dot_product_attention", "diagnosis": "NaN in"},
    # a head axis of size 1 added to the weights, "like multi-head attention"
    {"cell": "SelfAttention", "old": "return scaled_dot_product_attention(q, k, v, mask)",
     "new": "out, weights = scaled_dot_product_attention(q, k, v, mask)\n        return out, weights.unsqueeze(1)",
     "exercise": "SelfAttention", "diagnosis": "extra axis of size 1 at position 1"},
]

# Mistakes that must lose points and be given no catalogue name (a generic diagnosis may still explain them).
UNNAMED = [
    # 0 * -inf is NaN: every output is NaN, as "softmax over the wrong dim" also is on an input whose mask forbids one
    # key to every query; an all-NaN match names nothing.
    {"cell": "scaled_dot_product_attention", "old": 'scores = scores.masked_fill(~mask, float("-inf"))',
     "new": 'scores = scores + (~mask) * float("-inf")', "exercise": "scaled_dot_product_attention"},
    # the forbidden scores taken from a float32 tensor of -inf: torch.where promotes float16 scores to float32, and
    # the float32 weights then meet float16 values: the line and PyTorch's dtype error say it
    {"cell": "scaled_dot_product_attention", "old": 'scores = scores.masked_fill(~mask, float("-inf"))',
     "new": 'scores = torch.where(mask, scores, torch.full(scores.shape, float("-inf")))',
     "exercise": "scaled_dot_product_attention", "feedback": "expected scalar type Float but found Half"},
    # the weights detached before they blend the values: the output is right, its gradient to q and k is not
    {"cell": "scaled_dot_product_attention", "old": "return weights @ v, weights",
     "new": "return weights.detach() @ v, weights", "exercise": "scaled_dot_product_attention",
     "feedback": "a value detached in part"},
    # name_the_bug: no shape check before allclose: "weights times keys" has d_k features, and the comparison raises
    {"cell": "name_the_bug", "old": "candidate.shape == output.shape and torch.allclose(",
     "new": "torch.allclose(", "exercise": "name_the_bug", "feedback": "must match the size of tensor"},
]
