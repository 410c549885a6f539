"""Mistakes to plant into 06_grouped_query_attention's solution, and correct answers written differently."""

NOTEBOOK = "06_grouped_query_attention"

# Each mistake is planted into answer cell `cell` by replacing `old` (exactly once) with `new`;
# grading must lose some (not all) points on `exercise` and name `mistake` there.
MISTAKES = [
    # Tiling: KV heads 0, 1, 0, 1, ... instead of 0, 0, 1, 1, ...
    {"cell": "repeat_kv", "old": "x.repeat_interleave(n_rep, dim=1)", "new": "x.repeat(1, n_rep, 1, 1)",
     "exercise": "repeat_kv", "mistake": "repeat (tiling) instead of repeat_interleave"},
    # Copies of the width instead of the heads
    {"cell": "repeat_kv", "old": "x.repeat_interleave(n_rep, dim=1)", "new": "x.repeat_interleave(n_rep, dim=-1)",
     "exercise": "repeat_kv", "mistake": "copies along the wrong axis"},
    {"cell": "repeat_kv", "old": "x.repeat_interleave(n_rep, dim=1)", "new": "x.repeat_interleave(n_rep, dim=2)",
     "exercise": "repeat_kv", "mistake": "copies along the wrong axis"},  # the positions' axis: another output
    # The same mistake written inline in the module (its own repeat_kv is correct).
    {"cell": "GroupedQueryAttention",
     "old": "k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)",
     "new": "k, v = k.repeat(1, self.n_rep, 1, 1), v.repeat(1, self.n_rep, 1, 1)",
     "exercise": "GroupedQueryAttention", "mistake": "repeat (tiling) instead of repeat_interleave"},
    # The cache grows in heads instead of in length.
    {"cell": "KVCache",
     "old": "            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n"
            "            self.v = torch.cat([self.v, v_new], dim=2)",
     "new": "            self.k = torch.cat([self.k, k_new], dim=1)\n"
            "            self.v = torch.cat([self.v, v_new], dim=1)",
     "exercise": "KVCache", "mistake": "cache concatenated on the wrong dim"},
    # The cache is written but never read: the new query sees only its own key and value.
    {"cell": "GroupedQueryAttention",
     "old": "            k, v = cache.update(k, v)  # (B, h_kv, Lk, d_k): every token so far",
     "new": "            cache.update(k, v)",
     "exercise": "GroupedQueryAttention", "mistake": "new query attends only to itself"},
    # Every call rotates its tokens as if the sequence started there.
    {"cell": "GroupedQueryAttention",
     "old": "start = len(cache) if cache is not None else 0",
     "new": "start = 0",
     "exercise": "GroupedQueryAttention", "mistake": "positions restarting at 0"},
    # notebook 04's silent bug, in this module: the heads merged by a bare reshape
    {"cell": "GroupedQueryAttention",
     "old": "self.W_o(heads.transpose(1, 2).reshape(B, L, self.num_heads * self.d_k))",
     "new": "self.W_o(heads.reshape(B, L, self.num_heads * self.d_k))",
     "exercise": "GroupedQueryAttention", "mistake": "view without transpose"},
    # update keeps the cache but hands back only the newest position
    {"cell": "KVCache", "old": "        return self.k, self.v\n",
     "new": "        return self.k[:, :, -k_new.shape[2]:], self.v[:, :, -v_new.shape[2]:]\n",
     "exercise": "KVCache", "mistake": "update returns only the new keys and values"},
    # The concepts of notebook 02 and 03, inside the module (each named in GroupedQueryAttention only).
    {"cell": "GroupedQueryAttention", "old": "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)",
     "new": "scores = q @ k.transpose(-2, -1)",
     "exercise": "GroupedQueryAttention", "mistake": "no 1/sqrt(d_k) scaling"},
    {"cell": "GroupedQueryAttention", "old": "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)",
     "new": "scores = q @ k.transpose(-2, -1) / self.d_k",
     "exercise": "GroupedQueryAttention", "mistake": "scaling by 1/d_k"},
    {"cell": "GroupedQueryAttention", "old": "scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)",
     "new": "scores = k @ q.transpose(-2, -1) / math.sqrt(self.d_k)",
     "exercise": "GroupedQueryAttention", "mistake": "queries and keys swapped"},
    # masked_fill where the mask is True: the causal mask inverted
    {"cell": "GroupedQueryAttention", "old": "scores = scores.masked_fill(~mask, float(\"-inf\"))",
     "new": "scores = scores.masked_fill(mask, float(\"-inf\"))",
     "exercise": "GroupedQueryAttention", "mistake": "mask polarity inverted"},
    # the mask argument is ignored
    {"cell": "GroupedQueryAttention",
     "old": "        if mask is not None:\n            scores = scores.masked_fill(~mask, float(\"-inf\"))\n",
     "new": "",
     "exercise": "GroupedQueryAttention", "mistake": "mask not applied"},
    # the values projected with W_k
    {"cell": "GroupedQueryAttention",
     "old": "v = self.W_v(x).view(B, L, self.num_kv_heads, self.d_k).transpose(1, 2)",
     "new": "v = self.W_k(x).view(B, L, self.num_kv_heads, self.d_k).transpose(1, 2)",
     "exercise": "GroupedQueryAttention", "mistake": "one projection for keys and values"},
    {"cell": "kv_cache_bytes", "old": "return 2 * num_layers * batch_size", "new": "return num_layers * batch_size",
     "exercise": "kv_cache_bytes", "mistake": "bytes without the factor 2 (K and V)"},
    {"cell": "kv_cache_bytes", "old": "return 2 * num_layers * batch_size", "new": "return 2 * batch_size",
     "exercise": "kv_cache_bytes", "mistake": "bytes without the layer count"},
    {"cell": "kv_cache_bytes", "old": "element = torch.tensor([], dtype=dtype).element_size()",
     "new": "element = 2", "exercise": "kv_cache_bytes", "mistake": "the dtype argument ignored"},
    {"cell": "GroupedQueryAttention", "old": "q, k = apply_rope(q, positions), apply_rope(k, positions)",
     "new": "q, k, v = apply_rope(q, positions), k, apply_rope(v, positions)",
     "exercise": "GroupedQueryAttention", "mistake": "RoPE applied to the values"},
    {"cell": "GroupedQueryAttention",
     "old": "            k, v = cache.update(k, v)  # (B, h_kv, Lk, d_k): every token so far\n"
            "        k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)  # (B, h, Lk, d_k)",
     "new": "            k, v = cache.update(repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep))\n"
            "        else:\n"
            "            k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)",
     "exercise": "GroupedQueryAttention", "mistake": "repeated heads stored in the cache"},
    {"cell": "KVCache", "old": "return 0 if self.k is None else self.k.shape[2]",
     "new": "return 0 if self.k is None else self.k.shape[1]",
     "exercise": "KVCache", "mistake": "len(cache) reads the wrong axis"},
    {"cell": "KVCache", "old": "self.v = torch.cat([self.v, v_new], dim=2)", "new": "self.v = torch.cat([self.v, k_new], dim=2)",
     "exercise": "KVCache", "mistake": "new keys appended to the value cache"},
    # the first update (the prompt) returned but not kept
    {"cell": "KVCache", "old": "            self.k, self.v = k_new, v_new\n",
     "new": "            self.k, self.v = k_new[:, :, :0], v_new[:, :, :0]\n            return k_new, v_new\n",
     "exercise": "KVCache", "mistake": "the cache forgets the prompt"},
    # update returns the joined tensors but never stores them: the cache stays at the prompt
    {"cell": "KVCache",
     "old": "            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n"
            "            self.v = torch.cat([self.v, v_new], dim=2)\n",
     "new": "            return torch.cat([self.k, k_new], dim=2), torch.cat([self.v, v_new], dim=2)\n",
     "exercise": "KVCache", "mistake": "update does not store what it appends"},
    # len counts the calls of update, not the positions (the old text runs from __len__ into update)
    {"cell": "KVCache",
     "old": "        return 0 if self.k is None else self.k.shape[2]\n        ### END SOLUTION\n\n    def update(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:\n        \"\"\"Append (B, h_kv, L_new, d_k) keys and values; return all keys and values so far, (B, h_kv, t, d_k).\"\"\"\n        ### BEGIN SOLUTION\n        if self.k is None:\n            self.k, self.v = k_new, v_new\n",
     "new": "        return getattr(self, \"updates\", 0)\n        ### END SOLUTION\n\n    def update(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:\n        \"\"\"Append (B, h_kv, L_new, d_k) keys and values; return all keys and values so far, (B, h_kv, t, d_k).\"\"\"\n        ### BEGIN SOLUTION\n        self.updates = getattr(self, \"updates\", 0) + 1\n        if self.k is None:\n            self.k, self.v = k_new, v_new\n",
     "exercise": "KVCache", "mistake": "len(cache) counts the updates"},
    # the keys update returned rotated once more by their positions
    {"cell": "GroupedQueryAttention",
     "old": "            k, v = cache.update(k, v)  # (B, h_kv, Lk, d_k): every token so far\n",
     "new": "            k, v = cache.update(k, v)  # (B, h_kv, Lk, d_k): every token so far\n"
            "            if self.rope:\n"
            "                k = apply_rope(k, torch.arange(k.shape[2]))\n",
     "exercise": "GroupedQueryAttention", "mistake": "cached keys rotated again"},
    # cache_is_correct: checkers that check too little (each lets some broken caches through) or too much
    {"cell": "cache_is_correct", "old": "(torch.equal(k_out, want_k) and torch.equal(v_out, want_v))",
     "new": "torch.equal(k_out, want_k)",
     "exercise": "cache_is_correct", "mistake": "checks only the keys"},
    {"cell": "cache_is_correct",
     "old": "        if not (torch.equal(k_out, want_k) and torch.equal(v_out, want_v)):\n            return False\n    return True",
     "new": "    return torch.equal(k_out, want_k) and torch.equal(v_out, want_v)",
     "exercise": "cache_is_correct", "mistake": "checks only the last step"},
    {"cell": "cache_is_correct",
     "old": "(torch.equal(k_out, want_k) and torch.equal(v_out, want_v))",
     "new": "(torch.equal(k_out[:, :, -k_new.shape[2]:], k_new) and torch.equal(v_out[:, :, -v_new.shape[2]:], v_new))",
     "exercise": "cache_is_correct", "mistake": "checks only the newest positions"},
    {"cell": "cache_is_correct",
     "old": "(torch.equal(k_out, want_k) and torch.equal(v_out, want_v))",
     "new": "(torch.equal(k_out[:, :, :want_k.shape[2]], want_k) and torch.equal(v_out[:, :, :want_v.shape[2]], want_v))",
     "exercise": "cache_is_correct", "mistake": "compares only the first t positions"},
    {"cell": "cache_is_correct", "old": "        seen_v.append(v_new)\n",
     "new": "        seen_v.append(v_new)\n        if k_out.shape[2] != len(seen_k):\n            return False\n",
     "exercise": "cache_is_correct", "mistake": "every update counted as one position"},
    # kv_cache_bytes with a window
    {"cell": "kv_cache_bytes", "old": "kept = seq_len if window is None else min(seq_len, window)", "new": "kept = seq_len",
     "exercise": "kv_cache_bytes", "mistake": "the window ignored"},
    {"cell": "kv_cache_bytes", "old": "kept = seq_len if window is None else min(seq_len, window)",
     "new": "kept = seq_len if window is None else window",
     "exercise": "kv_cache_bytes", "mistake": "the window counted as the length"},
]

# Correct answers written differently: all applied together, they must keep full marks.
VARIANTS = [
    # Hugging Face's repeat_kv: a broadcast view, copied once by reshape
    {"cell": "repeat_kv",
     "old": "    return x.repeat_interleave(n_rep, dim=1)  # (B, h_kv * n_rep, L, d_k): 0, 0, ..., 1, 1, ...",
     "new": "    B, h_kv, L, d = x.shape\n"
            "    return x[:, :, None, :, :].expand(B, h_kv, n_rep, L, d).reshape(B, h_kv * n_rep, L, d)"},
    # the attention through PyTorch's SDPA with enable_gqa (the weights computed beside it), positions from
    # the returned cache instead of len(cache)
    {"cell": "GroupedQueryAttention",
     "old": "        k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)  # (B, h, Lk, d_k)\n"
            "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, L, Lk)\n"
            "        if mask is not None:\n"
            "            scores = scores.masked_fill(~mask, float(\"-inf\"))\n"
            "        weights = torch.softmax(scores, dim=-1)  # (B, h, L, Lk)\n"
            "        heads = weights @ v  # (B, h, L, d_k)",
     "new": "        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n"
            "        g = q.view(B, self.num_kv_heads, self.n_rep, L, self.d_k)  # queries by group\n"
            "        scores = torch.einsum('bgrqd,bgkd->bgrqk', g, k).flatten(1, 2) * self.d_k ** -0.5\n"
            "        if mask is not None:\n"
            "            scores = scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)\n"
            "        weights = scores.softmax(dim=-1)"},
    # a preallocated buffer that doubles when full, returning views of the filled part
    {"cell": "KVCache",
     "old": "        self.k: torch.Tensor | None = None\n        self.v: torch.Tensor | None = None",
     "new": "        self.k = self.v = None\n        self.n = 0"},
    {"cell": "KVCache", "old": "        return 0 if self.k is None else self.k.shape[2]",
     "new": "        return self.n"},
    {"cell": "KVCache",
     "old": "        if self.k is None:\n"
            "            self.k, self.v = k_new, v_new\n"
            "        else:\n"
            "            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n"
            "            self.v = torch.cat([self.v, v_new], dim=2)\n"
            "        return self.k, self.v",
     "new": "        B, h, L, d = k_new.shape\n"
            "        if self.k is None or self.n + L > self.k.shape[2]:\n"
            "            size = max(16, 2 * (self.n + L))\n"
            "            k_buf = k_new.new_zeros(B, h, size, d)\n"
            "            v_buf = v_new.new_zeros(B, h, size, d)\n"
            "            if self.k is not None:\n"
            "                k_buf[:, :, :self.n] = self.k[:, :, :self.n]\n"
            "                v_buf[:, :, :self.n] = self.v[:, :, :self.n]\n"
            "            self.k, self.v = k_buf, v_buf\n"
            "        self.k[:, :, self.n:self.n + L] = k_new\n"
            "        self.v[:, :, self.n:self.n + L] = v_new\n"
            "        self.n += L\n"
            "        return self.k[:, :, :self.n], self.v[:, :, :self.n]"},
    {"cell": "kv_cache_bytes",
     "old": "    element = torch.tensor([], dtype=dtype).element_size()  # bytes per number",
     "new": "    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)\n"
            "    element = info.bits // 8"},
    {"cell": "kv_cache_bytes", "old": "kept = seq_len if window is None else min(seq_len, window)",
     "new": "kept = min(seq_len, window or seq_len)"},
    # compare shapes and every number by hand; build the expected tensors from all the steps at once
    {"cell": "cache_is_correct", "old": "(torch.equal(k_out, want_k) and torch.equal(v_out, want_v))",
     "new": "(k_out.shape == want_k.shape and bool((k_out == want_k).all())\n"
            "                and v_out.shape == want_v.shape and bool((v_out == want_v).all()))"},
]


# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    # Hugging Face's broadcast view without its final reshape: (B, h_kv, n_rep, L, d_k)
    {"cell": "repeat_kv", "old": "return x.repeat_interleave(n_rep, dim=1)",
     "new": "return x[:, :, None].expand(-1, -1, n_rep, -1, -1)",
     "exercise": "repeat_kv", "diagnosis": "a view or reshape to the wrong shape"},
    # new keys and values prepended instead of appended: the cache holds the tokens newest first
    {"cell": "KVCache",
     "old": "            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n"
            "            self.v = torch.cat([self.v, v_new], dim=2)",
     "new": "            self.k = torch.cat([k_new, self.k], dim=2)\n"
            "            self.v = torch.cat([v_new, self.v], dim=2)",
     "exercise": "KVCache", "diagnosis": "the whole axis reversed"},
    # the else: left out, so the first update is stored and then appended once more
    {"cell": "KVCache",
     "old": "            self.k, self.v = k_new, v_new\n"
            "        else:\n"
            "            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n"
            "            self.v = torch.cat([self.v, v_new], dim=2)",
     "new": "            self.k, self.v = k_new, v_new\n"
            "        self.k = torch.cat([self.k, k_new], dim=2)\n"
            "        self.v = torch.cat([self.v, v_new], dim=2)",
     "exercise": "KVCache", "diagnosis": "at the start of axis 2"},
]

# Mistakes that must lose points and get no catalogue name; `feedback`, if given, must appear in the feedback.
UNNAMED = [
    # a constant answer
    {"cell": "cache_is_correct", "old": "    if len(fed) != len(returned):\n", "new": "    return True\n    if len(fed) != len(returned):\n",
     "exercise": "cache_is_correct", "feedback": "said True for a cache whose update returns only k_new, v_new"},
    # allclose: broadcasts, and raises on shapes that do not broadcast
    {"cell": "cache_is_correct", "old": "(torch.equal(k_out, want_k) and torch.equal(v_out, want_v))",
     "new": "(torch.allclose(k_out, want_k) and torch.allclose(v_out, want_v))",
     "exercise": "cache_is_correct", "feedback": "compare the shapes first"},
]
