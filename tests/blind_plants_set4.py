"""Blind plants, fourth set: typical learner mistakes planted into the solution answer cells.

Written 2026-11-25 from the solution notebooks alone, without reading the grader, the mistake catalogue or
the earlier sets. Each plant replaces `old` (occurring exactly once in the answer cell `cell`) with `new`;
`names` are case-insensitive regexes that, matched in the feedback's mistake name or first line, show the
feedback names the cause; `points` are looser regexes matched anywhere in the feedback.
"""

PLANTS: list[dict] = [
    # ------------------------------------------------------------------ 01_attention_intuition
    {
        'notebook': '01_attention_intuition',
        'cell': 'softmax',
        'old': 'shifted = x - x.max(dim=dim, keepdim=True).values',
        'new': 'shifted = x',
        'exercise': 'softmax',
        'cause': 'The learner exponentiates x directly without subtracting the max first, so large inputs '
                 'overflow to inf and the softmax returns NaN (numerically unstable).',
        'names': [r'max', r'overflow', r'(numerical(ly)?|un)?stab', r'\bnan\b|\binf\b'],
        'points': [r'large (input|value|score)', r'nan|inf', r'overflow', r'stab'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'softmax',
        'old': 'return e / e.sum(dim=dim, keepdim=True)',
        'new': 'return e / e.sum()',
        'exercise': 'softmax',
        'cause': 'The learner normalises by the sum over the whole tensor instead of the sum along dim, so for '
                 'more than one slice the entries along dim do not sum to 1.',
        'names': [r'whole tensor|entire tensor|all (the )?(entries|elements)|global|every entry',
                  r'along (the )?(given )?dim|wrong (dim|axis)|over (the )?(wrong )?(dim|axis)',
                  r'(does not|don.t|doesn.t|not) sum to (1|one)'],
        'points': [r'sum', r'dim|axis', r'normali[sz]'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'attention_pool',
        'old': 'output = weights @ values',
        'new': 'output = weights @ keys',
        'exercise': 'attention_pool',
        'cause': 'The learner blends the keys instead of the values with the attention weights, so the output '
                 'is a weighted average of the keys.',
        'names': [r'keys? instead of (the )?values?', r'(blend|average|sum|mix)\w* (of )?(the )?keys',
                  r'uses? (the )?keys', r'values? (are|were) (never|not) used'],
        'points': [r'keys?', r'values?\b(?! in)'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'return torch.tanh(q_hidden + k_hidden) @ w_v',
        'new': 'return (q_hidden + k_hidden) @ w_v',
        'exercise': 'additive_scores',
        'cause': 'The learner leaves out the tanh non-linearity, so the additive (Bahdanau) score becomes a '
                 'linear function of query and key.',
        'names': [r'tanh', r'non-?linear', r'linear (function|score|map)'],
        'points': [r'tanh', r'linear', r'activation'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'q_hidden = (query @ W_q.T).unsqueeze(-2)',
        'new': 'q_hidden = query @ W_q.T',
        'exercise': 'additive_scores',
        'cause': 'The learner does not unsqueeze the projected query to (..., 1, h), so with batched queries '
                 'it does not broadcast over the n keys (wrong pairing or a broadcast error).',
        'names': [r'unsqueeze', r'broadcast', r'\(\.\.\., ?1, ?h\)|singleton|new (axis|dim)|key axis',
                  r'batch(ed)? quer'],
        'points': [r'batch', r'broadcast', r'shape', r'leading'],
    },
    # ------------------------------------------------------------------ 02_scaled_dot_product_attention
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)',
        'new': 'scores = q @ k.transpose(-2, -1)',
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner forgets to scale the scores by 1/sqrt(d_k), so the softmax is too peaked '
                 '(unscaled dot products).',
        'names': [r'scal', r'sqrt|√|square root', r'd_k'],
        'points': [r'scal', r'sqrt|√', r'peak|sharp|temperature'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'weights = torch.softmax(scores, dim=-1)',
        'new': 'weights = torch.softmax(scores, dim=-2)',
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner applies the softmax over dim=-2 (across the queries) instead of over the keys '
                 '(dim=-1), so the columns sum to 1 instead of each query\'s weights.',
        'names': [r'dim\s*=?\s*-?2|dim(ension)? -?2', r'(over|across|along) (the )?quer',
                  r'(over|across|along) (the )?keys', r'columns?', r'wrong (dim|axis)',
                  r'(weights?|rows?) (do not|don.t|doesn.t) sum to (1|one)'],
        'points': [r'softmax', r'sum to (1|one)', r'dim|axis'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'scores = scores.masked_fill(~mask, float("-inf"))',
        'new': 'scores = scores.masked_fill(mask, float("-inf"))',
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner inverts the mask convention: it fills -inf where mask is True (allowed), so '
                 'queries attend exactly the forbidden keys.',
        'names': [r'invert', r'convention', r'revers', r'opposite', r'True\W+(means|=|is)\W+(allowed|attend|keep|may)',
                  r'forbidden (keys|positions|pairs) (get|receive|are attended)'],
        'points': [r'mask', r'True', r'forbidden|allowed'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'source = x if context is None else context',
        'new': 'source = x',
        'exercise': 'SelfAttention',
        'cause': 'The learner ignores the context argument and always projects keys and values from x, so '
                 'cross-attention silently becomes self-attention.',
        'names': [r'context', r'cross[- ]attention', r'ignor\w* (the )?(context|argument)',
                  r'keys and values (come )?from x'],
        'points': [r'context', r'cross', r'keys? and values?'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'self.W_v = nn.Linear(d_model, d_v)',
        'new': 'self.W_v = nn.Linear(d_model, d_k)',
        'exercise': 'SelfAttention',
        'cause': 'The learner gives the value projection W_v an output width of d_k instead of d_v, so the '
                 'output has width d_k whenever d_v != d_k.',
        'names': [r'd_v', r'W_v', r'value projection', r'output (width|dim)'],
        'points': [r'd_v|d_k', r'shape', r'W_v|value'],
    },
    # ------------------------------------------------------------------ 03_masking
    {
        'notebook': '03_masking',
        'cell': 'causal_mask',
        'old': '.tril()',
        'new': '.triu()',
        'exercise': 'causal_mask',
        'cause': 'The learner uses triu (upper triangle) instead of tril, so each query may attend future '
                 'keys (j >= i) instead of past ones.',
        'names': [r'triu', r'upper', r'future', r'transpos', r'j ?>=? ?i\b|above the diagonal|wrong triangle'],
        'points': [r'diagonal', r'triangle|tril', r'future|past'],
    },
    {
        'notebook': '03_masking',
        'cell': 'padding_mask',
        'old': 'return positions[None, :] < lengths[:, None]',
        'new': 'return positions[None, :] <= lengths[:, None]',
        'exercise': 'padding_mask',
        'cause': 'Off-by-one: the learner compares j <= lengths[b] instead of j < lengths[b], so the first '
                 'padding position of each sequence is marked as a real token.',
        'names': [r'off[- ]by[- ]one', r'<=', r'one (extra|too many)', r'first pad(ding)? (position|token)',
                  r'j ?< ?length|lengths\[b\]'],
        'points': [r'length', r'pad', r'one'],
    },
    {
        'notebook': '03_masking',
        'cell': 'sliding_window_mask',
        'old': '(j > i - window)',
        'new': '(j >= i - window)',
        'exercise': 'sliding_window_mask',
        'cause': 'Off-by-one in the window bound: the learner keeps j >= i - window, so each query sees '
                 'window + 1 keys instead of window.',
        'names': [r'off[- ]by[- ]one', r'window ?\+ ?1|one (key )?too many|extra key',
                  r'>= ?i ?- ?window|window bound|lower bound'],
        'points': [r'window', r'one'],
    },
    {
        'notebook': '03_masking',
        'cell': 'masked_softmax',
        'old': '    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))  # never -inf - (-inf)\n',
        'new': '',
        'exercise': 'masked_softmax',
        'cause': 'The learner does not guard fully masked rows: their max is -inf and -inf - (-inf) gives NaN, '
                 'so a row with no allowed key returns NaN instead of zeros.',
        'names': [r'\bnan\b', r'fully[- ]masked|all[- ]masked|entirely masked|no (True|allowed|valid) (entr|key)',
                  r'-inf ?- ?\(?-inf|inf ?- ?inf'],
        'points': [r'nan', r'zero', r'masked'],
    },
    {
        'notebook': '03_masking',
        'cell': 'build_attention_mask',
        'old': 'mask = mask & (j[None, :] <= i[:, None])',
        'new': 'mask = mask & (j[None, :] < i[:, None])',
        'exercise': 'build_attention_mask',
        'cause': 'The learner uses a strict j < i in the causal part, which excludes the diagonal: a query '
                 'may not attend itself, and query 0 attends nothing.',
        'names': [r'diagonal', r'itself', r'strict', r'off[- ]by[- ]one', r'j ?< ?i\b|< instead of <='],
        'points': [r'causal', r'diagonal', r'query 0|first quer'],
    },
    # ------------------------------------------------------------------ 04_multi_head_attention
    {
        'notebook': '04_multi_head_attention',
        'cell': 'split_heads',
        'old': 'return x.view(B, L, num_heads, D // num_heads).transpose(1, 2)',
        'new': 'return x.view(B, num_heads, L, D // num_heads)',
        'exercise': 'split_heads',
        'cause': 'The learner views (B, L, D) directly as (B, h, L, d) without the transpose, so each "head" '
                 'scrambles features of different positions together.',
        'names': [r'transpos', r'(view|reshape)\w* (directly|straight)', r'without (the |a )?(transpose|permute)',
                  r'scrambl|interleav|mix(es|ing)? (up )?(positions|tokens)', r'permute'],
        'points': [r'transpos|permute', r'view|reshape', r'head'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'merge_heads',
        'old': 'return x.transpose(1, 2).reshape(B, L, h * d)',
        'new': 'return x.transpose(1, 2).view(B, L, h * d)',
        'exercise': 'merge_heads',
        'cause': 'The learner calls .view on the transposed (non-contiguous) tensor, which raises a RuntimeError; '
                 'it needs .reshape or .contiguous() first.',
        'names': [r'contiguous', r'\.view\b|view\(\)', r'\.reshape|reshape instead', r'stride'],
        'points': [r'view', r'contiguous', r'reshape'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': 'scores = (q / math.sqrt(self.d_k)) @ k.transpose(-2, -1)',
        'new': 'scores = (q / math.sqrt(self.d_model)) @ k.transpose(-2, -1)',
        'exercise': 'MultiHeadAttention',
        'cause': 'The learner scales the scores by sqrt(d_model) instead of sqrt(d_k), the width of one head, '
                 'so the softmax is too flat.',
        'names': [r'd_model', r'head (dim|width)|width of (one|a|each) head|per-head', r'sqrt\(?d_k|√ ?d_k'],
        'points': [r'scal', r'sqrt|√', r'flat|temperature'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': 'output = self.W_o(merge_heads(heads))',
        'new': 'output = merge_heads(heads)',
        'exercise': 'MultiHeadAttention',
        'cause': 'The learner forgets the output projection W_o after merging the heads, so the heads are '
                 'concatenated but never mixed.',
        'names': [r'W_o', r'output projection', r'out(put)?[_ ]proj', r'never mixed|not mixed'],
        'points': [r'W_o|projection', r'concat', r'mix'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'mha_parameter_count',
        'old': 'return 4 * per_projection',
        'new': 'return 3 * per_projection',
        'exercise': 'mha_parameter_count',
        'cause': 'The learner counts only three projections (W_q, W_k, W_v) and forgets the output projection '
                 'W_o, so the count is 3/4 of the truth.',
        'names': [r'W_o', r'output projection', r'\b(3|three)\b.{0,20}(projection|matri|linear)',
                  r'\bfour\b|\b4\b.{0,20}(projection|matri|linear)'],
        'points': [r'projection|linear', r'W_o', r'count'],
    },
    # ------------------------------------------------------------------ 05_positional_encoding
    {
        'notebook': '05_positional_encoding',
        'cell': 'sinusoidal_encoding',
        'old': 'freq = 10000.0 ** (-2 * i / d_model)',
        'new': 'freq = 10000.0 ** (-i / d_model)',
        'exercise': 'sinusoidal_encoding',
        'cause': 'The learner uses i instead of 2i in the exponent 10000^(2i/d_model), so the frequencies '
                 'decay only half as fast across the pairs.',
        'names': [r'\b2i\b|2 ?\* ?i', r'exponent', r'frequenc', r'wavelength'],
        'points': [r'frequenc|wavelength', r'exponent|10000', r'dimension'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'sinusoidal_encoding',
        'old': 'pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)',
        'new': 'pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)',
        'exercise': 'sinusoidal_encoding',
        'cause': 'The learner concatenates all sines then all cosines (two halves) instead of interleaving '
                 'them as PE[pos, 2i] = sin, PE[pos, 2i+1] = cos.',
        'names': [r'interleav', r'concat', r'halves|first half|second half', r'even.{0,30}odd|odd.{0,30}even',
                  r'0::2|1::2'],
        'points': [r'sin', r'cos', r'column|dimension|layout|order'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'offset_rotation',
        'old': 'M[even, odd] = sin\n    M[odd, even] = -sin',
        'new': 'M[even, odd] = -sin\n    M[odd, even] = sin',
        'exercise': 'offset_rotation',
        'cause': 'The learner puts the minus sign on the wrong sin entry, building the transpose (inverse) '
                 'rotation, which shifts by -k instead of +k.',
        'names': [r'sign', r'transpos', r'invers', r'-k\b|backward|opposite direction|wrong direction'],
        'points': [r'rotation', r'sin', r'sign|direction'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'PositionalEncoding',
        'old': 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
        'new': 'self.pe = sinusoidal_encoding(max_len, d_model)',
        'exercise': 'PositionalEncoding',
        'cause': 'The learner stores the table as a plain tensor attribute instead of registering it as a '
                 'buffer, so it is missing from state_dict and not moved by .to(device).',
        'names': [r'buffer', r'register', r'state_dict', r'plain (tensor )?attribute', r'\.to\(|device'],
        'points': [r'buffer', r'state_dict|device', r'pe'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'apply_rope',
        'old': 'x1, x2 = x[..., :half], x[..., half:]',
        'new': 'x1, x2 = x[..., 0::2], x[..., 1::2]',
        'exercise': 'apply_rope',
        'cause': 'The learner pairs adjacent (interleaved even/odd) dimensions instead of dimension i with '
                 'i + d/2 (the rotate-half convention), then writes the result back as halves.',
        'names': [r'adjacent', r'interleav', r'even.{0,30}odd|0::2', r'i ?\+ ?d ?/ ?2|rotate[- ]half',
                  r'pair(ing|s|ed)? (the )?wrong|wrong pair', r'convention'],
        'points': [r'pair', r'half|d/2', r'rotat'],
    },
    # ------------------------------------------------------------------ 06_grouped_query_attention
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'repeat_kv',
        'old': 'return x.repeat_interleave(n_rep, dim=1)',
        'new': 'return x.repeat(1, n_rep, 1, 1)',
        'exercise': 'repeat_kv',
        'cause': 'The learner tiles the KV heads with .repeat instead of repeat_interleave, so the head order '
                 'is 0, 1, 0, 1 instead of 0, 0, 1, 1 and query head i gets KV head i % h_kv, not i // n_rep.',
        'names': [r'repeat_interleave', r'\.repeat\b|\btil(e|es|ed|ing)\b', r'head order|order of (the )?heads',
                  r'i ?// ?n_rep|i ?% ?h_kv|modulo'],
        'points': [r'repeat', r'order', r'group'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'GroupedQueryAttention',
        'old': 'k, v = repeat_kv(k, self.n_rep), repeat_kv(v, self.n_rep)',
        'new': 'pass',
        'exercise': 'GroupedQueryAttention',
        'cause': 'The learner never repeats the h_kv key/value heads to the num_heads query heads (no repeat_kv), '
                 'so the matmul fails unless there is a single KV head that happens to broadcast.',
        'names': [r'repeat_kv|repeat', r'h_kv|kv heads|num_kv_heads|key/value heads', r'expand'],
        'points': [r'heads?', r'group', r'broadcast'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'GroupedQueryAttention',
        'old': 'start = len(cache) if cache is not None else 0',
        'new': 'start = 0',
        'exercise': 'GroupedQueryAttention',
        'cause': 'With a KV cache the learner restarts the RoPE positions of the new tokens at 0 instead of '
                 'continuing after the cached length, so cached decoding disagrees with the full pass.',
        'names': [r'(rope|rotary) positions?|position (offset|index|indices)|positions? (of the new tokens )?(restart|start)', r'offset', r'len\(cache\)|cached length|cache length', r'restart|start(s|ing)? at 0'],
        'points': [r'cache', r'rope|rotary', r'position'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'KVCache',
        'old': 'self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n            self.v = torch.cat([self.v, v_new], dim=2)',
        'new': 'self.k = torch.cat([self.k, k_new], dim=1)  # the sequence axis\n            self.v = torch.cat([self.v, v_new], dim=1)',
        'exercise': 'KVCache',
        'cause': 'The learner concatenates the new keys and values along dim=1 (the head axis) instead of the '
                 'sequence axis dim=2, so the cache grows in heads, not in time.',
        'names': [r'dim\s*=?\s*1|dim(ension)? 1\b', r'head (axis|dim)', r'sequence (axis|dim)|time (axis|dim)',
                  r'wrong (axis|dim)'],
        'points': [r'cat|concat', r'axis|dim', r'cache'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'kv_cache_bytes',
        'old': 'return 2 * num_layers',
        'new': 'return num_layers',
        'exercise': 'kv_cache_bytes',
        'cause': 'The learner counts only the keys and forgets the factor 2 for keys and values, so the cache '
                 'size is half the truth.',
        'names': [r'factor (of )?(2|two)', r'keys? and values?|K and V|both', r'\bhalf\b', r'only the keys'],
        'points': [r'keys?|values?\b(?! in)', r'half|twice|double', r'bytes'],
    },
    # ------------------------------------------------------------------ 07_flash_attention
    {
        'notebook': '07_flash_attention',
        'cell': 'online_softmax',
        'old': 'l = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)',
        'new': 'l = l + torch.exp(block - shift[..., None]).sum(dim=-1)',
        'exercise': 'online_softmax',
        'cause': 'The learner does not rescale the running sum by exp(m_old - m_new) when the running max grows, '
                 'so earlier blocks are summed relative to a stale max.',
        'names': [r'rescal', r'exp\(m_?(old)? ?- ?m_?new\)|exp\(m - shift\)', r'correction|alpha',
                  r'stale max|running (sum|max)'],
        'points': [r'running', r'max', r'block'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention',
        'old': 'acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]',
        'new': 'acc = acc + p @ v[..., k_start:k_end, :]',
        'exercise': 'flash_attention',
        'cause': 'The learner updates the running sum l with alpha but does not rescale the output accumulator '
                 'acc by alpha = exp(m_old - m_new), so earlier key blocks are over-weighted.',
        'names': [r'rescal', r'alpha', r'accumulat', r'exp\(m_?(old)? ?- ?m_?new\)'],
        'points': [r'running', r'block', r'max'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'hbm_traffic',
        'old': 'tiled = N * d + 2 * N * d * blocks + N * d + N',
        'new': 'tiled = N * d + 2 * N * d + N * d + N',
        'exercise': 'hbm_traffic',
        'cause': 'The learner counts K and V as read once in total, but tiled attention re-reads all of K and V '
                 'once per query block, so the tiled traffic is underestimated.',
        'names': [r'(once )?per (query )?block|each (query )?block|number of (query )?blocks',
                  r're-?read', r'K and V.{0,40}(once|block)'],
        'points': [r'block', r'K|V', r'tiled'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'FlashAttentionFunction',
        'old': 'dq[..., q_start:q_end, :] += ds @ k_blk * scale',
        'new': 'dq[..., q_start:q_end, :] += ds @ k_blk',
        'exercise': 'FlashAttentionFunction',
        'cause': 'In the backward pass the learner forgets the 1/sqrt(d) scale factor in dq (chain rule through '
                 'the scaled scores), so dq is sqrt(d) times too large.',
        'names': [r'scal', r'sqrt|√', r'chain rule', r'\bdq\b'],
        'points': [r'grad', r'dq|query', r'backward'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention_triton',
        'old': 'keep = cols[None, :] < Lk\n        if CAUSAL:\n            keep = keep & (cols[None, :] <= rows[:, None])\n        s = tl.where(keep, s, float("-inf"))',
        'new': 'if CAUSAL:\n            s = tl.where(cols[None, :] <= rows[:, None], s, float("-inf"))',
        'exercise': 'flash_attention_triton',
        'cause': 'In the kernel the learner does not mask out-of-range key columns (cols >= Lk) to -inf, so when '
                 'Lk is not a multiple of the block size the zero-padded keys beyond Lk get attention weight.',
        'names': [r'out[- ]of[- ]range|beyond (Lk|the end)|past (the end|Lk)', r'bound(s|ary)',
                  r'multiple of', r'cols ?>=? ?Lk|\bLk\b'],
        'points': [r'block', r'length|Lk', r'kernel|triton'],
    },
    # ------------------------------------------------------------------ 08_transformer_translator
    {
        'notebook': '08_transformer_translator',
        'cell': 'decoder_mask',
        'old': 'keys[:, None, None, :]',
        'new': 'keys[:, None, :, None]',
        'exercise': 'decoder_mask',
        'cause': 'The learner applies the padding part along the query axis instead of the key axis, so real '
                 'queries can still attend padding keys while pad queries are blanked.',
        'names': [r'query (axis|dim|side|positions?)', r'key (axis|dim|side)', r'instead of (the )?keys?',
                  r'padding keys'],
        'points': [r'pad', r'key', r'quer'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'EncoderLayer',
        'old': 'x = x + self.dropout(self.self_attn(h, h, h, mask)[0])',
        'new': 'x = h + self.dropout(self.self_attn(h, h, h, mask)[0])',
        'exercise': 'EncoderLayer',
        'cause': 'The learner adds the residual to the normalised input norm(x) instead of to x itself, so the '
                 'pre-norm residual path is broken.',
        'names': [r'residual', r'skip', r'norm(ali[sz]ed)? (input|x|h)\b|norm\(x\)', r'pre-?norm'],
        'points': [r'residual|skip', r'norm', r'layer'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'DecoderLayer',
        'old': 'a = self.cross_attn(h, memory, memory, src_mask)[0]',
        'new': 'a = self.cross_attn(memory, h, h, src_mask)[0]',
        'exercise': 'DecoderLayer',
        'cause': 'The learner swaps the roles in cross-attention: the queries come from the encoder memory and '
                 'the keys/values from the decoder, instead of decoder queries over the memory.',
        'names': [r'swap', r'quer(y|ies) (come )?from (the )?(encoder|memory)', r'memory.{0,40}quer|quer.{0,40}memory',
                  r'roles?'],
        'points': [r'cross', r'memory|encoder', r'quer'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'greedy_decode',
        'old': 'logits = model.decode(ys[:, -1:], memory, src_mask, cache)',
        'new': 'logits = model.decode(ys, memory, src_mask, cache)',
        'exercise': 'greedy_decode',
        'cause': 'With the KV cache the learner still feeds the whole prefix each step instead of only the '
                 'newest token, so the cache stores duplicated positions.',
        'names': [r'cache', r'whole prefix|entire prefix|all (the )?(previous )?tokens', r'newest|last token|only the new',
                  r'duplicat'],
        'points': [r'cache', r'prefix|token', r'step'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'beam_search',
        'old': 'total = (scores[:, None] + log_probs).flatten()',
        'new': 'total = log_probs.flatten()',
        'exercise': 'beam_search',
        'cause': 'The learner ranks extensions by the last token\'s log-probability only, forgetting to add the '
                 'cumulative score of the hypothesis (prefix), so beams are chosen greedily per step.',
        'names': [r'cumulat', r'accumulat|running (score|total)|prefix (score|log)', r'(add|sum)\w* (the )?(previous|hypothes)',
                  r'total log-?prob|sum of (the )?log'],
        'points': [r'score', r'log-?prob', r'beam'],
    },
]
