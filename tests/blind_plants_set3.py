"""Blind plants, third set: realistic learner mistakes planted into the solution answer cells.

Written 2026-11-25 from the solution notebooks (answer cells and their prose) alone, without reading the
mistake catalogue or the earlier sets' code; only the earlier sets' one-line causes were read, to avoid
repeating them. Each plant replaces `old` (occurring exactly once in the answer cell `cell`) with `new`;
`names` are case-insensitive regexes that, matched in the feedback's mistake name or first line, show the
feedback names the cause; `points` are looser regexes matched anywhere in the feedback.
"""

PLANTS: list[dict] = [
    # ---- 01_attention_intuition
    {
        'notebook': '01_attention_intuition',
        'cell': 'softmax',
        'old': 'return e / e.sum(dim=dim, keepdim=True)',
        'new': 'return shifted - torch.log(e.sum(dim=dim, keepdim=True))',
        'exercise': 'softmax',
        'cause': ('It returns the log-softmax (log-probabilities): the log of the sum is subtracted instead of '
                  'dividing by the sum.'),
        'names': [r'log[-_ ]?softmax', r'log[- ]?probabilit', r'logarithm'],
        'points': [r'\blog\b', r'sum to 1', r'negative'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'softmax',
        'old': 'e = torch.exp(shifted)',
        'new': 'e = torch.exp(shifted.double())',
        'exercise': 'softmax',
        'cause': ('The exponentials are upcast to float64 for safety and never cast back, so the result is float64, '
                  "not x's dtype."),
        'names': [r'float64|double', r'dtype'],
        'points': [r'float64|double|dtype'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'attention_pool',
        'old': 'scores = keys @ query',
        'new': 'scores = torch.cosine_similarity(keys, query[None, :], dim=-1)',
        'exercise': 'attention_pool',
        'cause': ('The scores are cosine similarities (query and keys normalised to unit length) instead of raw dot '
                  'products.'),
        'names': [r'cosine', r'normali[sz]\w* (the )?(query|keys|vectors)', r'unit (length|norm)'],
        'points': [r'cosine|norm|length|magnitude'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'return torch.tanh(q_hidden + k_hidden) @ w_v',
        'new': 'return torch.tanh(q_hidden + k_hidden).sum(dim=-1)',
        'exercise': 'additive_scores',
        'cause': 'w_v is never used: the tanh hidden units are summed instead of weighted by w_v.',
        'names': [r'\bw_v\b', r'hidden units? (are )?(summed|added)', r'summ\w* (the )?hidden'],
        'points': [r'w_v|hidden|sum'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'return torch.tanh(q_hidden + k_hidden) @ w_v',
        'new': 'return torch.softmax(torch.tanh(q_hidden + k_hidden) @ w_v, dim=-1)',
        'exercise': 'additive_scores',
        'cause': ('A softmax is applied at the end, so the function returns attention weights instead of the raw '
                  'additive scores.'),
        'names': [r'softmax', r'weights instead of (the )?(raw )?scores', r'normali[sz]ed (scores|weights)'],
        'points': [r'softmax|sum to 1|weights'],
    },
    # ---- 02_scaled_dot_product_attention
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'if k.shape[-2] != v.shape[-2]:',
        'new': 'if k.shape[-1] != v.shape[-1]:',
        'exercise': 'scaled_dot_product_attention',
        'cause': ('The k/v check compares the feature widths (d_k vs d_v) instead of the lengths, so a valid call '
                  'with d_v != d_k raises ValueError.'),
        'names': [r'ValueError', r'd_v ?(!=|≠|differs|different)', r'(reject|refus)\w* .*valid'],
        'points': [r'ValueError|d_v|raise'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'return weights @ v, weights',
        'new': 'return weights.detach() @ v, weights',
        'exercise': 'scaled_dot_product_attention',
        'cause': ('The weights are detached before they multiply v, so no gradient reaches q and k (or the query/key '
                  'projections).'),
        'names': [
            r'detach',
            r'no[_ ]grad',
            "gradients? (do(es)? not|never|don\\'t) (reach|flow)",
            r'(no|zero|missing) grad',
        ],
        'points': [r'grad'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'source = x if context is None else context',
        'new': 'source = context or x',
        'exercise': 'SelfAttention',
        'cause': ('The default is picked with `context or x`, which truth-tests a tensor: passing a context raises '
                  '"Boolean value of Tensor with more than one value is ambiguous".'),
        'names': [r'\bor\b x|context or', r'truth[- ]?(test|valu)', r'ambiguous', r'boolean value'],
        'points': [r'context|ambiguous|None'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': ("self.W_q = nn.Linear(d_model, d_k)  # bias=True, nn.Linear's default\n        self.W_k = "
                'nn.Linear(d_model, d_k)\n        self.W_v = nn.Linear(d_model, d_v)'),
        'new': ('self.W_q = nn.Linear(d_model, d_k, bias=False)\n        self.W_k = nn.Linear(d_model, d_k, '
                'bias=False)\n        self.W_v = nn.Linear(d_model, d_v, bias=False)'),
        'exercise': 'SelfAttention',
        'cause': ("The projections are built with bias=False, but the spec asks for nn.Linear's default bias, so the "
                  'parameters and the outputs differ.'),
        'names': [r'bias'],
        'points': [r'bias|parameter|state_dict'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'return scaled_dot_product_attention(q, k, v, mask)',
        'new': 'return scaled_dot_product_attention(q, k, v, mask)[0]',
        'exercise': 'SelfAttention',
        'cause': ('forward returns only the output tensor; the attention weights of the (output, weights) pair are '
                  'dropped.'),
        'names': [
            r'only (the )?output',
            r'weights\b.*(dropped|missing|not returned|lost)',
            r'(tuple|pair)\b.*(not|missing)',
            r'not (a )?(tuple|pair)',
            r'returns? a (single )?tensor',
        ],
        'points': [r'tuple|pair|weights|unpack'],
    },
    # ---- 03_masking
    {
        'notebook': '03_masking',
        'cell': 'causal_mask',
        'old': 'return torch.ones(L, L, dtype=torch.bool).tril()',
        'new': 'return torch.ones(L, L, dtype=torch.bool).tril()[None, None]',
        'exercise': 'causal_mask',
        'cause': 'Batch and head axes are added: the result is (1, 1, L, L) instead of the documented (L, L).',
        'names': [
            r'\(1, ?1, ?L, ?L\)',
            r'extra (batch|head|leading) (axes|axis|dim)',
            r'(batch|head) (and head )?(axes|axis) (are )?added',
            r'4-?D\b|four dim',
        ],
        'points': [r'shape|axes|axis|dim'],
    },
    {
        'notebook': '03_masking',
        'cell': 'padding_mask',
        'old': 'positions = torch.arange(max_len, device=lengths.device)',
        'new': 'positions = torch.arange(int(lengths.max()), device=lengths.device)',
        'exercise': 'padding_mask',
        'cause': ('max_len is ignored: the mask is only as wide as the longest sequence (lengths.max()), too narrow '
                  'when max_len is larger.'),
        'names': [r'max_len', r'longest', r'lengths\.max|max\(lengths\)', r'too narrow'],
        'points': [r'max_len|width|wide|narrow|shape'],
    },
    {
        'notebook': '03_masking',
        'cell': 'sliding_window_mask',
        'old': 'if window < 1:',
        'new': 'if window <= 1:',
        'exercise': 'sliding_window_mask',
        'cause': ('The ValueError condition is off by one (window <= 1): window = 1, where each token sees only '
                  'itself, is rejected.'),
        'names': [r'window ?(=|==) ?1\b', r'ValueError', r'(reject|refus)\w* .*valid'],
        'points': [r'ValueError|window|raise'],
    },
    {
        'notebook': '03_masking',
        'cell': 'masked_softmax',
        'old': 'scores = scores.masked_fill(~mask, float("-inf"))',
        'new': 'scores.masked_fill_(~mask, float("-inf"))',
        'exercise': 'masked_softmax',
        'cause': "The scores are masked in place (masked_fill_), which overwrites the caller's tensor with -inf.",
        'names': [
            r'in[- ]?place',
            r'masked_fill_',
            "(overwr|modif|mutat|chang)\\w* (the )?(caller\\'?s? )?(input|scores|argument)",
        ],
        'points': [r'in[- ]?place|input|modif|overwr'],
    },
    {
        'notebook': '03_masking',
        'cell': 'build_attention_mask',
        'old': 'mask = mask.expand(-1, 1, Lq, Lk)',
        'new': 'mask = mask',
        'exercise': 'build_attention_mask',
        'cause': ('The padding mask is never expanded over the queries, so causal=False returns (B, 1, 1, Lk) instead '
                  'of (B, 1, Lq, Lk).'),
        'names': [r'\(B, ?1, ?1, ?Lk\)', r'expand', r'(not|never) (expanded|broadcast)', r'query (axis|dim)'],
        'points': [r'shape|expand|Lq'],
    },
    # ---- 04_multi_head_attention
    {
        'notebook': '04_multi_head_attention',
        'cell': 'merge_heads',
        'old': 'return x.transpose(1, 2).reshape(B, L, h * d)',
        'new': 'return x.sum(dim=1)',
        'exercise': 'merge_heads',
        'cause': 'The heads are summed instead of concatenated, giving (B, L, d) instead of (B, L, h * d).',
        'names': [
            r'summ\w* (over |the )?heads|heads? (are )?(summed|added|averaged)',
            r'instead of (being )?concatenat',
            r'\(B, ?L, ?d\)',
        ],
        'points': [r'sum|concat|h ?\* ?d'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'merge_heads',
        'old': 'B, h, L, d = x.shape',
        'new': 'B, L, h, d = x.shape',
        'exercise': 'merge_heads',
        'cause': ('The shape is unpacked in the wrong order (B, L, h, d), so the reshape uses the head count as the '
                  'length.'),
        'names': [r'unpack', r'(wrong|swapped) order', r'head count as (the )?length', r'\bh\b and \bL\b'],
        'points': [r'shape|unpack|order'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': 'scores.masked_fill(~mask, float("-inf"))',
        'new': 'scores.masked_fill(~mask.unsqueeze(1), float("-inf"))',
        'exercise': 'MultiHeadAttention',
        'cause': ('An extra head axis is inserted into the mask (mask.unsqueeze(1)), although it already broadcasts '
                  'over the heads; an (Lq, Lk) mask then lines up with the wrong axes.'),
        'names': [r'unsqueeze', r'extra (head )?(axis|dim)', r'head (axis|dim\w*) (is )?(added|inserted)'],
        'points': [r'mask|axis|broadcast'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': ("self.W_q = nn.Linear(d_model, d_model, bias=bias)  # all heads' W_i^Q, stacked\n        self.W_k = "
                'nn.Linear(d_model, d_model, bias=bias)\n        self.W_v = nn.Linear(d_model, d_model, '
                'bias=bias)\n        self.W_o = nn.Linear(d_model, d_model, bias=bias)'),
        'new': ('self.W_q = nn.Linear(d_model, d_model)\n        self.W_k = nn.Linear(d_model, d_model)\n        '
                'self.W_v = nn.Linear(d_model, d_model)\n        self.W_o = nn.Linear(d_model, d_model)'),
        'exercise': 'MultiHeadAttention',
        'cause': 'The bias argument is ignored: the four projections always have biases, even with bias=False.',
        'names': [r'bias (argument|flag|parameter)', r'bias ?= ?False', r'ignor\w* .*bias|bias.* ignor'],
        'points': [r'bias|parameter'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'mha_parameter_count',
        'old': 'per_projection = d_model * d_model + (d_model if bias else 0)\n    return 4 * per_projection',
        'new': 'per_projection = d_model * d_model\n    return 4 * per_projection + (d_model if bias else 0)',
        'exercise': 'mha_parameter_count',
        'cause': 'Only one bias vector is counted in total instead of one per projection (4 * d_model).',
        'names': [
            r'(one|single) bias',
            r'bias(es)? (is |are )?(counted|added) once',
            r'per projection',
            r'4 ?\* ?d_model',
        ],
        'points': [r'bias'],
    },
    # ---- 05_positional_encoding
    {
        'notebook': '05_positional_encoding',
        'cell': 'sinusoidal_encoding',
        'old': 'freq = 10000.0 ** (-2 * i / d_model)',
        'new': 'freq = 1000.0 ** (-2 * i / d_model)',
        'exercise': 'sinusoidal_encoding',
        'cause': 'The base is 1000 instead of 10000, so every frequency but the first is wrong.',
        'names': [r'\b1,?000\b', r'\bbase\b', r'\b10,? ?000\b'],
        'points': [r'1000|base|frequenc|wavelength'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'sinusoidal_encoding',
        'old': 'position = torch.arange(max_len, dtype=torch.float32)[:, None]',
        'new': 'position = torch.linspace(0, 1, max_len)[:, None]',
        'exercise': 'sinusoidal_encoding',
        'cause': 'The positions are normalised to [0, 1] instead of being the integers 0 .. max_len - 1.',
        'names': [r'normali[sz]', r'\[0, ?1\]', r'linspace', r'integer'],
        'points': [r'position|normal|integer'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'offset_rotation',
        'old': '\n    M[odd, odd] = cos',
        'new': '',
        'exercise': 'offset_rotation',
        'cause': ('The odd diagonal entries M[2i+1, 2i+1] = cos are never set, so the cosine rows lose their own cos '
                  'term.'),
        'names': [
            r'M\[odd, ?odd\]',
            r'odd diagonal|diagonal entr',
            r'2i ?\+ ?1, ?2i ?\+ ?1',
            r'(cos|cosine) (term|entr)',
        ],
        'points': [r'diagonal|odd|cos'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'PositionalEncoding',
        'old': 'L = x.shape[-2]',
        'new': 'L = x.shape[0]',
        'exercise': 'PositionalEncoding',
        'cause': ('The length is read from dim 0 (the batch size) instead of dim -2, so the slice of the table has '
                  'the wrong length.'),
        'names': [r'batch (size|dim|axis)', r'shape\[0\]|dim(ension)? 0\b', r'wrong (axis|dim)'],
        'points': [r'batch|length|dim|axis'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'apply_rope',
        'old': 'return torch.cat([out1, out2], dim=-1)',
        'new': 'return torch.cat([out2, out1], dim=-1)',
        'exercise': 'apply_rope',
        'cause': 'The two rotated halves are concatenated in the wrong order (out2 before out1).',
        'names': [r'halves', r'(concatenat|cat)\w* .*(order|swap)', r'out2.*out1', r'(order|swap)\w* .*half'],
        'points': [r'half|halves|order|concat'],
    },
    # ---- 06_grouped_query_attention
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'repeat_kv',
        'old': 'return x.repeat_interleave(n_rep, dim=1)',
        'new': 'return x[:, :, None].expand(-1, -1, n_rep, -1, -1)',
        'exercise': 'repeat_kv',
        'cause': ('The KV heads are expanded along a new axis but never reshaped, so the result is 5-D (B, h_kv, '
                  'n_rep, L, d_k).'),
        'names': [r'5-?D\b|five[- ]dim', r'(never|not) reshaped|reshape', r'new axis|extra axis|n_rep, ?L'],
        'points': [r'shape|axis|dim'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'GroupedQueryAttention',
        'old': 'if num_heads % num_kv_heads != 0:',
        'new': 'if num_kv_heads % num_heads != 0:',
        'exercise': 'GroupedQueryAttention',
        'cause': ('The group check is reversed (num_kv_heads % num_heads), so a valid configuration with fewer KV '
                  'heads than query heads raises ValueError.'),
        'names': [r'ValueError', r'revers', r'num_kv_heads ?% ?num_heads', r'divisib'],
        'points': [r'ValueError|raise|group|divis'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'GroupedQueryAttention',
        'old': 'k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)',
        'new': 'k, v = repeat_kv(k, self.num_kv_heads), repeat_kv(v, self.num_kv_heads)',
        'exercise': 'GroupedQueryAttention',
        'cause': 'The KV heads are repeated num_kv_heads times instead of n_rep = num_heads // num_kv_heads times.',
        'names': [
            r'\bn_rep\b',
            r'num_kv_heads times|repeat\w* .*num_kv_heads',
            r'(repeat|repetition) (count|factor|number)',
        ],
        'points': [r'repeat|n_rep|group'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'KVCache',
        'old': ('self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n            self.v = '
                'torch.cat([self.v, v_new], dim=2)'),
        'new': 'self.k = torch.cat([k_new, self.k], dim=2)\n            self.v = torch.cat([v_new, self.v], dim=2)',
        'exercise': 'KVCache',
        'cause': ('New keys and values are prepended (cat([new, cached])) instead of appended, so the cache runs '
                  'backwards in time.'),
        'names': [
            r'prepend',
            r'revers\w* (time |chronolog\w* )?order|backwards',
            r'(before|in front of) the (cached|old)',
            r'instead of append',
        ],
        'points': [r'order|prepend|append'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'kv_cache_bytes',
        'old': 'element = torch.tensor([], dtype=dtype).element_size()',
        'new': 'element = 2',
        'exercise': 'kv_cache_bytes',
        'cause': 'The element size is hard-coded to 2 bytes (float16), so the dtype argument is ignored.',
        'names': [r'hard-?coded', r'(dtype|element size)\b.*ignor|ignor\w* .*dtype', r'\b2 bytes|two bytes'],
        'points': [r'dtype|float32|bytes'],
    },
    # ---- 07_flash_attention
    {
        'notebook': '07_flash_attention',
        'cell': 'online_softmax',
        'old': 'block = x[..., start:start + block_size]',
        'new': 'block = x[..., start:start + block_size - 1]',
        'exercise': 'online_softmax',
        'cause': ('The block slice is one short (start + block_size - 1), so the last element of every block never '
                  'enters the running max and sum.'),
        'names': [r'off[- ]by[- ]one', r'one (element )?short', r'block_size ?- ?1', r'(skip|miss|drop)\w* .*element'],
        'points': [r'block|slice|sum'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention',
        'old': '\n            m = m_new',
        'new': '',
        'exercise': 'flash_attention',
        'cause': ('The running max is never updated (m = m_new is missing), so each key block discards the statistics '
                  'of the earlier ones.'),
        'names': [r'running max\b.*(never|not) (updated|carried|kept)', r'm ?= ?m_new', r'(never|not) updat'],
        'points': [r'max|m_new|update'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention',
        'old': 'acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]',
        'new': 'acc = alpha[..., None] * acc + p @ v[..., q_start:q_end, :]',
        'exercise': 'flash_attention',
        'cause': "The values are sliced with the query block's indices (q_start:q_end) instead of the key block's.",
        'names': [
            r'q_start',
            "query block\\'?s? (indices|range|slice)",
            r'values?\b.*(query|wrong) (block|indices|slice)',
        ],
        'points': [r'value|slice|block'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'hbm_traffic',
        'old': 'tiled = N * d + 2 * N * d * blocks + N * d + N',
        'new': 'tiled = N * d + 2 * N * d * blocks + N * d',
        'exercise': 'hbm_traffic',
        'cause': 'The logsumexp that tiled attention writes (N numbers) is not counted.',
        'names': [r'logsumexp|log-sum-exp|\blse\b', r'\bN numbers'],
        'points': [r'logsumexp|lse|write|tiled'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'FlashAttentionFunction',
        'old': 'dv[..., k_start:k_end, :] += p.transpose(-2, -1) @ do_blk',
        'new': 'dv[..., k_start:k_end, :] += p @ do_blk',
        'exercise': 'FlashAttentionFunction',
        'cause': 'dV is accumulated as P dO instead of P^T dO: the transpose of the probability tile is missing.',
        'names': [
            r'\bP\^T|\bP\.T\b|P transposed|transpose of P',
            r'\bdV\b.*transpos|transpos\w* .*\bdV\b',
            r'\bP ?@ ?dO\b|\bP dO\b',
        ],
        'points': [r'\bdV\b|transpos|gradient'],
    },
    # ---- 08_transformer_translator
    {
        'notebook': '08_transformer_translator',
        'cell': 'decoder_mask',
        'old': 'return causal[None, None] & keys[:, None, None, :]',
        'new': 'return causal[None] & keys[:, None, :]',
        'exercise': 'decoder_mask',
        'cause': 'The head axis is missing: the mask is (B, L, L) instead of (B, 1, L, L).',
        'names': [r'head (axis|dim)', r'\(B, ?L, ?L\)', r'3-?D\b|three[- ]dim'],
        'points': [r'shape|axis|head'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'EncoderLayer',
        'old': ('h = self.norm1(x)\n        x = x + self.dropout(self.self_attn(h, h, h, mask)[0])  # the residual '
                'adds to x itself, not to norm(x)\n        h = self.norm2(x)\n        return x + '
                'self.dropout(self.linear2(self.dropout(F.relu(self.linear1(h)))))'),
        'new': ('x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)[0]))\n        return self.norm2(x + '
                'self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))'),
        'exercise': 'EncoderLayer',
        'cause': ('The layer is post-norm, norm(x + f(x)), although norm_first = True says it normalises the input of '
                  'each sublayer (x + f(norm(x))).'),
        'names': [r'post-?norm', r'pre-?norm', r'norm_first', r'norm(ali[sz]\w*)? (after|before)'],
        'points': [r'norm'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'DecoderLayer',
        'old': ('h = self.norm1(x)\n        if cache is None:\n            a = self.self_attn(h, h, h, '
                'tgt_mask)[0]\n        else:  # project the newest position once, append it, attend over every '
                'position so far (no mask needed)\n            k, v = '
                'cache.self_attn.update(*project_kv(self.self_attn, h))\n            a = attend(self.self_attn, h, k, '
                'v)\n        x = x + self.dropout(a)\n        h = self.norm2(x)\n        if cache is '
                'None:\n            a = self.cross_attn(h, memory, memory, src_mask)[0]  # keys and values: the '
                'source\n        else:\n            if cache.memory is None:  # the first step: project the source '
                'once per sentence\n                cache.memory = project_kv(self.cross_attn, memory)\n            a '
                '= attend(self.cross_attn, h, *cache.memory, src_mask)\n        x = x + self.dropout(a)'),
        'new': ('h = self.norm1(x)\n        if cache is None:\n            a = self.cross_attn(h, memory, memory, '
                'src_mask)[0]\n        else:\n            if cache.memory is None:\n                cache.memory = '
                'project_kv(self.cross_attn, memory)\n            a = attend(self.cross_attn, h, *cache.memory, '
                'src_mask)\n        x = x + self.dropout(a)\n        h = self.norm2(x)\n        if cache is '
                'None:\n            a = self.self_attn(h, h, h, tgt_mask)[0]\n        else:\n            k, v = '
                'cache.self_attn.update(*project_kv(self.self_attn, h))\n            a = attend(self.self_attn, h, k, '
                'v)\n        x = x + self.dropout(a)'),
        'exercise': 'DecoderLayer',
        'cause': ('The sublayers run in the wrong order: cross-attention over the source comes before the masked '
                  'self-attention.'),
        'names': [
            r'(sub)?layers?\b.*(order|swap)',
            r'cross-?attention (comes |runs |is )?(first|before)',
            r'\border\b',
        ],
        'points': [r'order|cross|self-attention'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'greedy_decode',
        'old': ('next_token = next_token.masked_fill(finished, model.pad_id)\n        ys = torch.cat([ys, '
                'next_token[:, None]], dim=1)\n        finished |= next_token == model.eos_id'),
        'new': ('finished |= next_token == model.eos_id\n        next_token = next_token.masked_fill(finished, '
                'model.pad_id)\n        ys = torch.cat([ys, next_token[:, None]], dim=1)'),
        'exercise': 'greedy_decode',
        'cause': 'finished is updated before the masking, so the <eos> token itself is replaced by <pad>.',
        'names': [
            r'eos>?\b.*(replaced|overwritten|lost|missing|never)',
            r'(before|after) (the )?masking',
            r'\border\b',
        ],
        'points': [r'eos|pad|finished'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'beam_search',
        'old': 'log_probs = logits[:, -1].log_softmax(dim=-1)',
        'new': 'log_probs = logits[:, -1].softmax(dim=-1)',
        'exercise': 'beam_search',
        'cause': ('Probabilities (softmax) are added up instead of log-probabilities (log_softmax), so the beam '
                  'scores are not log-likelihoods.'),
        'names': [
            r'log[-_ ]?(softmax|probabilit|likelihood)',
            r'probabilities (are )?(added|summed)',
            r'softmax instead',
        ],
        'points': [r'\blog|probab'],
    },
]
