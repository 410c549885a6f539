"""Mistakes planted into 04_multi_head_attention's solution, and correct answers written differently."""

NOTEBOOK = "04_multi_head_attention"

MISTAKES = [
    # split_heads: the right shape straight away, without the transpose.
    {"cell": "split_heads", "old": "x.view(B, L, num_heads, D // num_heads).transpose(1, 2)",
     "new": "x.view(B, num_heads, L, D // num_heads)",
     "exercise": "split_heads", "mistake": "view without transpose"},
    # merge_heads: reshape straight back, without moving the head axis behind L.
    {"cell": "merge_heads", "old": "x.transpose(1, 2).reshape(B, L, h * d)", "new": "x.reshape(B, L, h * d)",
     "exercise": "merge_heads", "mistake": "view without transpose"},
    # merge_heads: the mean over the heads instead of their concatenation, (B, L, d).
    {"cell": "merge_heads", "old": "return x.transpose(1, 2).reshape(B, L, h * d)", "new": "return x.mean(dim=1)",
     "exercise": "merge_heads", "mistake": "averaging heads"},
    # MultiHeadAttention written inline, with the split done by view alone.
    {"cell": "MultiHeadAttention",
     "old": "q = split_heads(self.W_q(query), self.num_heads)    # (B, h, Lq, d_k)\n"
            "        k = split_heads(self.W_k(key), self.num_heads)      # (B, h, Lk, d_k)\n"
            "        v = split_heads(self.W_v(value), self.num_heads)    # (B, h, Lk, d_k)",
     "new": "B, Lq, Lk = query.shape[0], query.shape[1], key.shape[1]\n"
            "        q = self.W_q(query).view(B, self.num_heads, Lq, self.d_k)\n"
            "        k = self.W_k(key).view(B, self.num_heads, Lk, self.d_k)\n"
            "        v = self.W_v(value).view(B, self.num_heads, Lk, self.d_k)",
     "exercise": "MultiHeadAttention", "mistake": "view without transpose"},
    {"cell": "MultiHeadAttention", "old": "math.sqrt(self.d_k)", "new": "math.sqrt(self.d_model)",
     "exercise": "MultiHeadAttention", "mistake": "scaling by sqrt(d_model)"},
    {"cell": "MultiHeadAttention", "old": "output = self.W_o(merge_heads(heads))", "new": "output = merge_heads(heads)",
     "exercise": "MultiHeadAttention", "mistake": "missing W_o"},
    # G-8: the heads split with a strided view: the right shape, head i = features i, i + h, ...
    {"cell": "split_heads", "old": "x.view(B, L, num_heads, D // num_heads).transpose(1, 2)",
     "new": "x.view(B, L, D // num_heads, num_heads).permute(0, 3, 1, 2)",
     "exercise": "split_heads", "mistake": "heads split with a strided view"},
    # The concepts of attention, inside the module (02 names them in its function; they are the same mistakes here).
    {"cell": "MultiHeadAttention", "old": "(q / math.sqrt(self.d_k)) @ k.transpose(-2, -1)",
     "new": "q @ k.transpose(-2, -1)",
     "exercise": "MultiHeadAttention", "mistake": "no 1/sqrt(d_k) scaling"},
    {"cell": "MultiHeadAttention", "old": "math.sqrt(self.d_k)", "new": "self.d_k",
     "exercise": "MultiHeadAttention", "mistake": "scaling by 1/d_k"},
    {"cell": "MultiHeadAttention", "old": "scores.masked_fill(~mask,", "new": "scores.masked_fill(mask,",
     "exercise": "MultiHeadAttention", "mistake": "mask polarity inverted"},
    {"cell": "MultiHeadAttention", "old": "torch.softmax(scores, dim=-1)", "new": "torch.softmax(scores, dim=-2)",
     "exercise": "MultiHeadAttention", "mistake": "softmax over the wrong dim"},
    {"cell": "MultiHeadAttention", "old": "v = split_heads(self.W_v(value)", "new": "v = split_heads(self.W_k(value)",
     "exercise": "MultiHeadAttention", "mistake": "a projection shared between Q, K and V"},
    {"cell": "MultiHeadAttention",
     "old": "q = split_heads(self.W_q(query), self.num_heads)    # (B, h, Lq, d_k)\n"
            "        k = split_heads(self.W_k(key), self.num_heads)      # (B, h, Lk, d_k)\n"
            "        v = split_heads(self.W_v(value), self.num_heads)    # (B, h, Lk, d_k)",
     "new": "q = split_heads(self.W_q(key), self.num_heads)\n"
            "        k = split_heads(self.W_k(query), self.num_heads)\n"
            "        v = split_heads(self.W_v(query), self.num_heads)",
     "exercise": "MultiHeadAttention", "mistake": "query and key/value inputs swapped"},
    # Per-head weights averaged, as torch.nn.MultiheadAttention returns them by default.
    {"cell": "MultiHeadAttention", "old": "return output, weights", "new": "return output, weights.mean(dim=1)",
     "exercise": "MultiHeadAttention", "mistake": "averaging heads"},
    # softmax over the batch, keys from the value input, biases forgotten in the count
    {"cell": "MultiHeadAttention", "old": "weights = torch.softmax(scores, dim=-1)",
     "new": "weights = torch.softmax(scores, dim=0)",
     "exercise": "MultiHeadAttention", "mistake": "softmax over the wrong dim"},
    {"cell": "MultiHeadAttention", "old": "self.W_k(key)", "new": "self.W_k(value)",
     "exercise": "MultiHeadAttention", "mistake": "keys projected from value instead of key"},
    {"cell": "mha_parameter_count", "old": "per_projection = d_model * d_model + (d_model if bias else 0)",
     "new": "per_projection = d_model * d_model",
     "exercise": "mha_parameter_count", "mistake": "biases not counted"},
    {"cell": "MultiHeadAttention", "old": "self.W_v(value)", "new": "self.W_v(key)",
     "exercise": "MultiHeadAttention", "mistake": "values projected from key instead of value"},
    {"cell": "mha_parameter_count", "old": "return 4 * per_projection", "new": "return sum([per_projection] * 3)",
     "exercise": "mha_parameter_count", "mistake": "output projection not counted"},
    {"cell": "MultiHeadAttention", "old": "k = split_heads(self.W_k(key), self.num_heads)",
     "new": "k = split_heads(self.W_q(key), self.num_heads)",
     "exercise": "MultiHeadAttention", "mistake": "a projection shared between Q, K and V"},
    {"cell": "mha_parameter_count", "old": "return 4 * per_projection", "new": "return num_heads * 4 * per_projection",
     "exercise": "mha_parameter_count", "mistake": "projections counted once per head"},
    # load_gpt2_attention: GPT-2's Conv1D weights are (in, out); nn.Linear's are (out, in).
    {"cell": "load_gpt2_attention",
     "old": '"W_o.weight": c_proj_weight.T', "new": '"W_o.weight": c_proj_weight',
     "exercise": "load_gpt2_attention", "mistake": "c_proj not transposed"},
    {"cell": "load_gpt2_attention",
     "old": '"W_o.weight": c_proj_weight.T, "W_o.bias": c_proj_bias}  # Conv1D (in, out) -> nn.Linear (out, in)\n'
            '    blocks = zip(("W_q", "W_k", "W_v"), c_attn_weight.split(d, dim=-1), c_attn_bias.split(d))  # q, k, v side by side\n'
            '    for name, weight, bias in blocks:                   # weight (d, d) as (in, out), bias (d,)\n'
            '        ported[f"{name}.weight"], ported[f"{name}.bias"] = weight.T, bias',
     "new": '"W_o.weight": c_proj_weight, "W_o.bias": c_proj_bias}\n'
            '    blocks = zip(("W_q", "W_k", "W_v"), c_attn_weight.split(d, dim=-1), c_attn_bias.split(d))\n'
            '    for name, weight, bias in blocks:\n'
            '        ported[f"{name}.weight"], ported[f"{name}.bias"] = weight, bias',
     "exercise": "load_gpt2_attention", "mistake": "Conv1D weights not transposed"},
    {"cell": "load_gpt2_attention", "old": '("W_q", "W_k", "W_v")', "new": '("W_k", "W_q", "W_v")',
     "exercise": "load_gpt2_attention", "mistake": "q, k, v taken in the wrong order"},
    # (d, 3d) reshaped to (3, d, d): it cuts rows, across q, k and v, instead of the column blocks
    {"cell": "load_gpt2_attention", "old": "c_attn_weight.split(d, dim=-1)", "new": "c_attn_weight.reshape(3, d, d)",
     "exercise": "load_gpt2_attention", "mistake": "c_attn split along the wrong dim"},
    # the weights copied in place under no_grad, the biases forgotten
    {"cell": "load_gpt2_attention",
     "old": '    ported = {"W_o.weight": c_proj_weight.T, "W_o.bias": c_proj_bias}',
     "new": '    with torch.no_grad():\n'
            '        for layer, weight in zip((mha.W_q, mha.W_k, mha.W_v), c_attn_weight.split(d, dim=-1)):\n'
            '            layer.weight.copy_(weight.T)\n'
            '        mha.W_o.weight.copy_(c_proj_weight.T)\n'
            '    return mha\n'
            '    ported = {"W_o.weight": c_proj_weight.T, "W_o.bias": c_proj_bias}',
     "exercise": "load_gpt2_attention", "mistake": "biases not copied"},
    # a filled copy returned, the module passed in left as it was
    {"cell": "load_gpt2_attention", "old": "    mha.load_state_dict(ported)",
     "new": "    import copy\n    mha = copy.deepcopy(mha)\n    mha.load_state_dict(ported)",
     "exercise": "load_gpt2_attention", "mistake": "the module passed in was not filled"},
]

VARIANTS = [
    {"cell": "split_heads", "old": "x.view(B, L, num_heads, D // num_heads).transpose(1, 2)",
     "new": "x.reshape(B, L, num_heads, -1).permute(0, 2, 1, 3)"},
    {"cell": "merge_heads", "old": "x.transpose(1, 2).reshape(B, L, h * d)",
     "new": "x.permute(0, 2, 1, 3).contiguous().view(B, L, -1)"},
    {"cell": "MultiHeadAttention", "old": "(q / math.sqrt(self.d_k)) @ k.transpose(-2, -1)",
     "new": "torch.einsum('bhqd,bhkd->bhqk', q, k) * self.d_k ** -0.5"},
    {"cell": "MultiHeadAttention", "old": 'scores.masked_fill(~mask, float("-inf"))',
     "new": "scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)"},
    {"cell": "MultiHeadAttention", "old": "heads = weights @ v", "new": "heads = torch.einsum('bhqk,bhkd->bhqd', weights, v)"},
    {"cell": "mha_parameter_count", "old": "return 4 * per_projection",
     "new": "return sum(n * d_model for n in (d_model, d_model, d_model, d_model)) + (4 * d_model if bias else 0)"},
    # load_gpt2_attention: chunk for split, slices for the bias, contiguous copies, copy_ under no_grad
    {"cell": "load_gpt2_attention", "old": "c_attn_weight.split(d, dim=-1)", "new": "c_attn_weight.chunk(3, dim=1)"},
    {"cell": "load_gpt2_attention", "old": "c_attn_bias.split(d)",
     "new": "(c_attn_bias[:d], c_attn_bias[d:2 * d], c_attn_bias[2 * d:])"},
    {"cell": "load_gpt2_attention", "old": "weight.T, bias", "new": "weight.t().contiguous(), bias.clone()"},
    {"cell": "load_gpt2_attention", "old": "    mha.load_state_dict(ported)",
     "new": "    with torch.no_grad():\n"
            "        for key, value in ported.items():\n"
            "            mha.get_parameter(key).copy_(value)"},
]

# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
# Each is planted alone; the exercise loses points, no catalogued mistake is named, `diagnosis` is in its feedback.
DIAGNOSED = [
    # dropout on the weights with F.dropout in a module that has no dropout: random on every call
    {"cell": "MultiHeadAttention", "old": "weights = torch.softmax(scores, dim=-1)",
     "new": "weights = nn.functional.dropout(torch.softmax(scores, dim=-1), p=0.1)",
     "exercise": "MultiHeadAttention", "diagnosis": "changes from one call to the next with the same inputs"},
    {"cell": "split_heads", "old": "x.view(B, L, num_heads, D // num_heads).transpose(1, 2)",
     "new": "x.view(B, L, num_heads, D // num_heads)",
     "exercise": "split_heads", "diagnosis": "axes in another order"},
    {"cell": "merge_heads", "old": "x.transpose(1, 2).reshape(B, L, h * d)",
     "new": "x.permute(0, 2, 3, 1).reshape(B, L, h * d)",
     "exercise": "merge_heads", "diagnosis": "merged in the opposite order"},
    {"cell": "MultiHeadAttention", "old": "return output, weights", "new": "return output, weights.transpose(-1, -2)",
     "exercise": "MultiHeadAttention", "diagnosis": "axes"},
    # the mask argument is ignored: only sequences without padding come out right
    {"cell": "MultiHeadAttention",
     "old": "        if mask is not None:\n"
            "            scores = scores.masked_fill(~mask, float(\"-inf\"))   # (B, h, Lq, Lk); the mask broadcasts\n",
     "new": "",
     "exercise": "MultiHeadAttention", "diagnosis": "rows of your output are right"},
    # flatten(1) instead of flatten(2): positions merged with the features, (B, L * h * d)
    {"cell": "merge_heads", "old": "x.transpose(1, 2).reshape(B, L, h * d)", "new": "x.transpose(1, 2).flatten(1)",
     "exercise": "merge_heads", "diagnosis": "a view or reshape to the wrong shape"},
    # the heads added up instead of put side by side
    {"cell": "merge_heads", "old": "return x.transpose(1, 2).reshape(B, L, h * d)", "new": "return x.sum(1)",
     "exercise": "merge_heads", "diagnosis": "pieces of size"},
]

# Mistakes that must lose points and get no catalogue name; `feedback` must appear in the exercise's feedback.
UNNAMED = [
    # the caller's tensor transposed in place (t_() instead of .T)
    {"cell": "load_gpt2_attention", "old": '"W_o.weight": c_proj_weight.T', "new": '"W_o.weight": c_proj_weight.t_()',
     "exercise": "load_gpt2_attention", "feedback": "in place"},
    # copy_ into a parameter outside torch.no_grad(): autograd refuses
    {"cell": "load_gpt2_attention", "old": "    mha.load_state_dict(ported)",
     "new": "    for key, value in ported.items():\n"
            "        mha.get_parameter(key).copy_(value)",
     "exercise": "load_gpt2_attention", "feedback": "leaf Variable"},
    # the module frozen to copy into it, and left frozen: it no longer trains
    {"cell": "load_gpt2_attention", "old": "    mha.load_state_dict(ported)",
     "new": "    mha.requires_grad_(False).load_state_dict(ported)",
     "exercise": "load_gpt2_attention", "feedback": "no gradient reached"},
    # split along the first dim: one (d, 3d) piece, which cannot load
    {"cell": "load_gpt2_attention", "old": "c_attn_weight.split(d, dim=-1)", "new": "c_attn_weight.split(d, dim=0)",
     "exercise": "load_gpt2_attention", "feedback": "size mismatch"},
]

UNNAMED += [
    # the parameters replaced by new ones made from the caller's tensors: they take the caller's dtype (and memory)
    {"cell": "load_gpt2_attention", "old": "    mha.load_state_dict(ported)",
     "new": "    for key, value in ported.items():\n"
            "        layer, attribute = key.split('.')\n"
            "        setattr(getattr(mha, layer), attribute, nn.Parameter(value))",
     "exercise": "load_gpt2_attention", "feedback": "no longer float32"},
]

# float64 in, float32 out: a .float() that the dtype checks catch
DIAGNOSED += [
    {"cell": "split_heads", "old": "return x.view(", "new": "return x.float().view(",
     "exercise": "split_heads", "diagnosis": "the dtype is torch.float32"},
    {"cell": "merge_heads", "old": "return x.transpose(1, 2)", "new": "return x.float().transpose(1, 2)",
     "exercise": "merge_heads", "diagnosis": "the dtype is torch.float32"},
    {"cell": "MultiHeadAttention", "old": "return output, weights", "new": "return output.float(), weights.float()",
     "exercise": "MultiHeadAttention", "diagnosis": "the dtype is torch.float32"},
]
