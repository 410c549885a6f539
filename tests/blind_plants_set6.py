"""Blind plants, sixth set: realistic learner mistakes planted into the solution answer cells.

Written 2026-11-26 from the solution notebooks alone, without reading the grader, the mistake catalogue or
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
        'new': 'shifted = x.sub_(x.max(dim=dim, keepdim=True).values)',
        'exercise': 'softmax',
        'cause': 'The learner subtracts the maximum in place (sub_), so the values are right but the caller\'s '
                 'input tensor is overwritten (and a leaf that requires grad raises an error).',
        'names': [r'in[- ]?place', r'sub_', r'(modif|mutat|overwr|chang|alter|clobber)\w* (the |its |your )?(input|argument|caller|x\b)',
                  r'input (is |was |gets )?(modif|mutat|overwr|chang|alter)', r'side[- ]?effect',
                  r'leaf (variable|tensor)'],
        'points': [r'in[- ]?place', r'input', r'(modif|mutat|overwr|chang)', r'leaf', r'requires_grad|grad'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'attention_pool',
        'old': 'weights = torch.softmax(scores, dim=-1)',
        'new': 'weights = scores / scores.sum()',
        'exercise': 'attention_pool',
        'cause': 'The learner normalises the raw scores by their sum instead of taking a softmax, so the weights '
                 'can be negative or blow up when the scores nearly cancel.',
        'names': [r'(no|without|missing|forg[eo]t\w*|skip\w*) (the )?(softmax|exp)', r'not (a )?softmax',
                  r'instead of (a |the )?softmax', r'linear(ly)? normali[sz]', r'(divid|normali[sz])\w* (the )?(raw )?scores by (their|the) sum',
                  r'negative weights?', r'exp\w* (is )?(missing|forgotten|omitted)'],
        'points': [r'softmax', r'negative', r'exp', r'weights?', r'sum(s)? to (1|one)'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'attention_pool',
        'old': 'return output, weights',
        'new': 'return output, scores',
        'exercise': 'attention_pool',
        'cause': 'The learner returns the raw dot-product scores as the second output instead of the softmax '
                 'weights, so the returned "weights" are not a distribution.',
        'names': [r'(raw |unnormali[sz]ed )?scores? (are |is )?(returned|instead of (the )?weights)', r'returns? (the )?(raw )?scores',
                  r'(weights|second output).{0,40}(not|aren.t) (a )?(distribution|normali[sz]ed|probabilit)',
                  r'logits? instead', r'before (the )?softmax', r'pre-?softmax'],
        'points': [r'weights?', r'sum(s)? to (1|one)', r'score', r'softmax', r'second'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'return torch.tanh(q_hidden + k_hidden) @ w_v',
        'new': 'return (q_hidden + k_hidden) @ w_v',
        'exercise': 'additive_scores',
        'cause': 'The learner leaves out the tanh, so the additive score collapses to a linear function of q and k '
                 '(and is no longer bounded by |w_v|_1).',
        'names': [r'tanh', r'non-?linear\w*', r'activation', r'(purely |only )?linear (score|function|in)',
                  r'(missing|forg[eo]t\w*|without|no|skip\w*|omit\w*) (the )?(tanh|squash)'],
        'points': [r'tanh', r'linear', r'bound', r'activation', r'score'],
    },
    {
        'notebook': '01_attention_intuition',
        'cell': 'additive_scores',
        'old': 'q_hidden = (query @ W_q.T).unsqueeze(-2)',
        'new': 'q_hidden = query @ W_q.T',
        'exercise': 'additive_scores',
        'cause': 'The learner forgets to insert the key axis into the projected query; one unbatched query still '
                 'broadcasts correctly, but a batch of queries (..., d_q) lines its batch axis up with the keys '
                 'axis, so batched input fails or silently mixes batch items with keys.',
        'names': [r'unsqueeze', r'(missing|forg[eo]t\w*|without|no) (the |a )?(key |singleton |new |extra )?(axis|dim\w*)',
                  r'broadcast\w*', r'batch(ed)?.{0,40}(fail|wrong|mix|break|mismatch|align)',
                  r'(only|just) (works? )?(for|with|on) (a )?(single|one|unbatched)', r'leading (dim|axis|batch)',
                  r'batch (axis|dim\w*) .{0,30}(key|n\b)'],
        'points': [r'batch', r'broadcast', r'shape', r'leading', r'\.\.\.'],
    },
    # ------------------------------------------------------------------ 02_scaled_dot_product_attention
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': '(q / math.sqrt(d_k))',
        'new': '(q / d_k)',
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner divides the scores by d_k instead of by sqrt(d_k), so the weights are too flat for '
                 'any d_k > 1.',
        'names': [r'(sqrt|√|square root)', r'by d_?k\b(?! ?\*\* ?0?\.5)', r'instead of .{0,10}(sqrt|√|root)',
                  r'(wrong|incorrect|bad) (scal\w*|temperature|constant|factor|normali[sz]\w*)', r'over-?scal',
                  r'scal\w* (is )?too (large|strong|much)'],
        'points': [r'scal', r'sqrt|√', r'd_?k', r'(flat|uniform|soft)', r'temperature'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': "scores = scores.masked_fill(~mask, float(\"-inf\"))",
        'new': "scores = scores.masked_fill(mask, float(\"-inf\"))",
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner fills the allowed positions (mask True) with -inf instead of the forbidden ones, '
                 'reading the mask as "True = blocked".',
        'names': [r'(invert|revers|flip|negat|swap|opposite|backwards?)\w*.{0,30}mask', r'mask.{0,40}(invert|revers|flip|negat|opposite|backwards?)',
                  r'(true|false) (means|=|as) (blocked|forbidden|masked|allowed|attend)', r'~ ?mask', r'polarity',
                  r'(masks?|blocks?|fills?)\w* (the )?allowed', r'wrong (mask )?convention'],
        'points': [r'mask', r'-?inf', r'true', r'allowed|forbidden|blocked', r'nan'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'scaled_dot_product_attention',
        'old': 'weights = torch.softmax(scores, dim=-1)',
        'new': 'weights = torch.softmax(scores, dim=-2)',
        'exercise': 'scaled_dot_product_attention',
        'cause': 'The learner takes the softmax over the query axis (dim=-2) instead of over the keys, so the '
                 'columns, not the rows, of the weight matrix sum to 1.',
        'names': [r'wrong (axis|dim\w*)', r'dim ?= ?-?2', r'(over|along|across) (the )?quer(y|ies)', r'column',
                  r'(softmax|normali[sz]\w*) (over|along|across) (the )?(wrong|first|rows?|queries)',
                  r'not (over|along) (the )?keys', r'instead of (the )?keys'],
        'points': [r'sum(s)? to (1|one)', r'row', r'axis|dim', r'softmax', r'keys?'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'source = x if context is None else context',
        'new': 'source = x',
        'exercise': 'SelfAttention',
        'cause': 'The learner always takes keys and values from x and ignores the context argument, so '
                 'cross-attention silently becomes self-attention.',
        'names': [r'context.{0,40}(ignor|unused|not used|never used|dropp|discard)', r'ignor\w* (the )?context',
                  r'cross[- ]?attention', r'keys? (and values? )?(come |taken )?from (x|the query|the input)',
                  r'(always|only) self[- ]?attention', r'(source|memory).{0,30}(ignor|unused)'],
        'points': [r'context', r'cross', r'L_?k', r'keys?', r'shape'],
    },
    {
        'notebook': '02_scaled_dot_product_attention',
        'cell': 'SelfAttention',
        'old': 'self.W_v = nn.Linear(d_model, d_v)',
        'new': 'self.W_v = nn.Linear(d_model, d_k)',
        'exercise': 'SelfAttention',
        'cause': 'The learner gives the value projection d_k outputs instead of d_v; nothing changes while '
                 'd_k == d_v, but with d_v != d_k the output has the wrong width.',
        'names': [r'd_?v', r'value (projection|width|size|dim\w*)', r'W_v', r'(d_?k|key width) (for|instead of|used for) (the )?values?',
                  r'(only|just) (works? )?when d_?k ?(==|=|equals) ?d_?v', r'non-?square'],
        'points': [r'd_?v', r'width|shape|size', r'W_v', r'values?', r'output'],
    },
    # ------------------------------------------------------------------ 03_masking
    {
        'notebook': '03_masking',
        'cell': 'causal_mask',
        'old': '.tril()',
        'new': '.triu()',
        'exercise': 'causal_mask',
        'cause': 'The learner keeps the upper triangle instead of the lower one, so every query sees the future '
                 'and not the past.',
        'names': [r'triu', r'upper', r'(wrong|opposite) (triangle|side|direction)', r'(sees|attends?( to)?|looks? at) (the )?future',
                  r'transpos\w*', r'above (the )?diagonal', r'anti-?causal', r'future'],
        'points': [r'future', r'triangle|diagonal', r'tril|triu', r'j ?<= ?i|j ?> ?i', r'causal'],
    },
    {
        'notebook': '03_masking',
        'cell': 'padding_mask',
        'old': 'positions = torch.arange(max_len, device=lengths.device)',
        'new': 'positions = torch.arange(int(lengths.max()), device=lengths.device)',
        'exercise': 'padding_mask',
        'cause': 'The learner builds the mask only up to the longest length in the batch and ignores max_len, '
                 'so the mask is too narrow whenever every sequence is shorter than max_len.',
        'names': [r'max_len', r'(ignor|disregard)\w* .{0,20}(length|width|argument)', r'lengths?\.max',
                  r'(longest|max(imum)?) (sequence|length) (in|of) the batch', r'(too )?(narrow|short)',
                  r'wrong (width|shape|number of columns)'],
        'points': [r'max_len', r'shape', r'width|columns?', r'\(B, ?max_len\)', r'length'],
    },
    {
        'notebook': '03_masking',
        'cell': 'sliding_window_mask',
        'old': '(j > i - window)',
        'new': '(j >= i - window)',
        'exercise': 'sliding_window_mask',
        'cause': 'The learner uses >= at the window\'s lower edge, so every query sees window + 1 keys instead of '
                 'window (an off-by-one).',
        'names': [r'off[- ]?by[- ]?one', r'window ?\+ ?1', r'one (key |position |token )?too (many|much|far|wide)',
                  r'(>=|≥) instead of (>|strict)', r'(inclusive|exclusive|strict)\w* (lower )?(bound|edge|inequality)',
                  r'(too )?wide', r'extra (key|position|token)'],
        'points': [r'window', r'off', r'edge|bound', r'i ?- ?window', r'keys?'],
    },
    {
        'notebook': '03_masking',
        'cell': 'masked_softmax',
        'old': 'return e / torch.where(total > 0, total, torch.ones_like(total))',
        'new': 'return e / total',
        'exercise': 'masked_softmax',
        'cause': 'The learner divides by the row sum unguarded, so a row with no allowed entry gives 0 / 0 = NaN '
                 'instead of all zeros.',
        'names': [r'nan', r'0 ?/ ?0|zero (divided )?by zero|division by zero', r'(fully|entirely|all)[- ]?masked',
                  r'empty row', r'no (true|allowed|valid) (entry|key|position)', r'(guard|special[- ]case)\w*'],
        'points': [r'nan', r'row', r'zero', r'masked', r'empty'],
    },
    {
        'notebook': '03_masking',
        'cell': 'build_attention_mask',
        'old': 'mask = mask & (j[None, :] <= i[:, None])',
        'new': 'mask = mask & (j[None, :] <= i[:, None] + (Lk - Lq))',
        'exercise': 'build_attention_mask',
        'cause': 'The learner aligns the causal part bottom-right (query i sees keys up to i + Lk - Lq) instead of '
                 'top-left; identical when Lq == Lk, wrong for rectangular masks.',
        'names': [r'bottom[- ]?right', r'top[- ]?left', r'align\w*', r'(rectangular|non-?square)',
                  r'L_?q ?(!=|≠|differs|<|>) ?L_?k', r'offset', r'(shift|diagonal)\w* (by|of) L_?k ?- ?L_?q'],
        'points': [r'causal', r'diagonal', r'L_?q|L_?k', r'rectang|square', r'j ?<= ?i'],
    },
    # ------------------------------------------------------------------ 04_multi_head_attention
    {
        'notebook': '04_multi_head_attention',
        'cell': 'split_heads',
        'old': 'x.view(B, L, num_heads, D // num_heads).transpose(1, 2)',
        'new': 'x.view(B, num_heads, L, D // num_heads)',
        'exercise': 'split_heads',
        'cause': 'The learner reshapes straight to (B, h, L, d) without the transpose, so each "head" is a '
                 'scramble of several positions\' features.',
        'names': [r'transpos\w*', r'(reshape|view)\w* (directly|straight)', r'without (a |the )?(transpose|permute|swap)',
                  r'(mix|scrambl|interleav|shuffl)\w* (the )?(positions|tokens|sequence)', r'permut\w*',
                  r'(wrong|scrambled) (memory )?(order|layout)'],
        'points': [r'transpos|permut', r'position', r'head', r'order|layout', r'view|reshape'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'merge_heads',
        'old': 'x.transpose(1, 2).reshape(B, L, h * d)',
        'new': 'x.transpose(1, 2).view(B, L, h * d)',
        'exercise': 'merge_heads',
        'cause': 'The learner calls .view on the transposed (non-contiguous) tensor; it happens to work when the '
                 'input came from split_heads, but a contiguous (B, h, L, d) input raises a RuntimeError.',
        'names': [r'contiguous', r'\.view', r'view (instead of|rather than|vs\.?) reshape', r'stride',
                  r'(use|call) (\.)?reshape', r'memory layout'],
        'points': [r'contiguous', r'view|reshape', r'stride', r'runtimeerror|error|raise', r'layout'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': 'math.sqrt(self.d_k)',
        'new': 'math.sqrt(self.d_model)',
        'exercise': 'MultiHeadAttention',
        'cause': 'The learner scales by sqrt(d_model) instead of by sqrt of the per-head width d_k, so with more '
                 'than one head the attention is too flat.',
        'names': [r'd_?model', r'(per-?head|head) (width|dim\w*|size)', r'sqrt ?\(?d_?k', r'(wrong|incorrect) (scal\w*|temperature|factor)',
                  r'(full|model|whole) (width|dim\w*)', r'too (flat|soft|much scal)'],
        'points': [r'scal', r'sqrt|√', r'd_?k|d_?model', r'head', r'flat|uniform|soft'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'MultiHeadAttention',
        'old': 'v = split_heads(self.W_v(value), self.num_heads)',
        'new': 'v = split_heads(self.W_v(key), self.num_heads)',
        'exercise': 'MultiHeadAttention',
        'cause': 'The learner projects the values from the key argument instead of the value argument; nothing '
                 'shows while key is value (self-attention), but with key != value the output is wrong.',
        'names': [r'value.{0,40}(ignor|unused|never used|not used)', r'(keys?|key argument) (used |projected )?(for|as|instead of) (the )?values?',
                  r'values? (are |is )?(projected|taken|computed|come)\w* from (the )?keys?', r'ignor\w* (the )?value',
                  r'W_v ?\( ?key', r'key (is|==|and) value'],
        'points': [r'\bvalues?\b', r'\bkeys?\b', r'W_v', r'cross', r'differ'],
    },
    {
        'notebook': '04_multi_head_attention',
        'cell': 'mha_parameter_count',
        'old': 'return 4 * per_projection',
        'new': 'return 4 * per_projection * num_heads',
        'exercise': 'mha_parameter_count',
        'cause': 'The learner believes every head has its own d_model x d_model projections and multiplies the '
                 'count by num_heads; the heads actually share (slice) the same four matrices.',
        'names': [r'num_heads', r'(per|each|every) head', r'(times|multipl\w*|scal\w*) (by )?(the )?(number of )?heads',
                  r'heads? (share|slice|split)', r'independent of (the )?(number of )?heads',
                  r'(too many|overcount|over-count|counted .{0,10}(times|h times))'],
        'points': [r'heads?', r'param', r'count', r'4 ?\*', r'd_?model'],
    },
    # ------------------------------------------------------------------ 05_positional_encoding
    {
        'notebook': '05_positional_encoding',
        'cell': 'sinusoidal_encoding',
        'old': 'freq = 10000.0 ** (-2 * i / d_model)',
        'new': 'freq = 10000.0 ** (-i / d_model)',
        'exercise': 'sinusoidal_encoding',
        'cause': 'The learner uses i instead of 2i in the frequency exponent, so the wavelengths only reach '
                 '10000^(1/2) and all but the first pair turn too fast.',
        'names': [r'2 ?\*? ?i', r'(factor|missing) (of )?(2|two)', r'exponent', r'frequenc\w*', r'wave-?length',
                  r'(pair|dimension) index', r'10000 ?\*\* ?\(?-?i'],
        'points': [r'freq', r'exponent', r'10000', r'wave|period', r'sin|cos'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'offset_rotation',
        'old': '    M[even, odd] = sin\n    M[odd, even] = -sin',
        'new': '    M[even, odd] = -sin\n    M[odd, even] = sin',
        'exercise': 'offset_rotation',
        'cause': 'The learner writes the textbook rotation [[cos, -sin], [sin, cos]] for (sin, cos) pairs, which '
                 'rotates the wrong way: M maps PE[pos] to PE[pos - k], i.e. it is the transpose of the right M.',
        'names': [r'sign', r'(wrong|opposite|reverse\w*|backwards?) (direction|way|rotation)', r'transpos\w*',
                  r'pos ?- ?k', r'-k\b|negative (offset|k)', r'(clockwise|counter-?clockwise)', r'inverse'],
        'points': [r'sign', r'rotat', r'pos ?[+-] ?k', r'sin', r'direction|transpose|inverse'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'PositionalEncoding',
        'old': 'self.register_buffer("pe", sinusoidal_encoding(max_len, d_model))',
        'new': 'self.pe = nn.Parameter(sinusoidal_encoding(max_len, d_model))',
        'exercise': 'PositionalEncoding',
        'cause': 'The learner stores the table as an nn.Parameter, so the fixed encoding becomes trainable '
                 '(it shows up in parameters() and gets gradients and optimiser updates) instead of a buffer.',
        'names': [r'buffer', r'parameter', r'trainable', r'learn(ed|able)', r'register_buffer',
                  r'(gets?|receives?|has) (a )?grad', r'requires_grad'],
        'points': [r'buffer', r'param', r'train', r'grad', r'\bpe\b'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'PositionalEncoding',
        'old': 'return self.dropout(x + self.pe[:L])',
        'new': 'return torch.nn.functional.dropout(x + self.pe[:L], p=self.dropout.p)',
        'exercise': 'PositionalEncoding',
        'cause': 'The learner calls functional dropout without training=self.training, so dropout still fires in '
                 'eval mode and the output is random at inference.',
        'names': [r'eval', r'training', r'dropout.{0,40}(infer|always|test|eval|random)', r'(non-?)?determinis',
                  r'self\.training', r'functional dropout', r'(random|stochastic) (at|in|during) (eval|inference|test)'],
        'points': [r'dropout', r'eval', r'determin|random', r'training', r'zero'],
    },
    {
        'notebook': '05_positional_encoding',
        'cell': 'apply_rope',
        'old': 'x1, x2 = x[..., :half], x[..., half:]',
        'new': 'x1, x2 = x[..., 0::2], x[..., 1::2]',
        'exercise': 'apply_rope',
        'cause': 'The learner pairs adjacent dimensions (0,1), (2,3), ... (the interleaved convention) instead of '
                 'i with i + d/2, and then writes the results back as two halves, scrambling the layout.',
        'names': [r'(adjacent|neighbou?ring|consecutive|interleav\w*|even[/ -]odd)', r'i ?\+ ?d ?/ ?2', r'half',
                  r'(wrong|different) (pairing|pairs?|convention)', r'pair(s|ing|ed)? .{0,30}(wrong|instead)',
                  r'neox|gpt-?j'],
        'points': [r'pair', r'half', r'rotat', r'dimension', r'layout|order'],
    },
    # ------------------------------------------------------------------ 06_grouped_query_attention
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'repeat_kv',
        'old': 'x.repeat_interleave(n_rep, dim=1)',
        'new': 'x.repeat(1, n_rep, 1, 1)',
        'exercise': 'repeat_kv',
        'cause': 'The learner tiles the KV heads (0, 1, 0, 1, ...) with repeat instead of repeating each one in '
                 'place (0, 0, 1, 1, ...), so query head i reads KV head i % h_kv rather than i // n_rep.',
        'names': [r'repeat_interleave', r'\.repeat\b', r'til(e|ed|es|ing)', r'i ?% ?h_?kv|i ?// ?n_rep',
                  r'(0, ?1, ?0, ?1|0, ?0, ?1, ?1)', r'(wrong|cyclic|round[- ]robin) (order|group\w*|assignment|mapping)',
                  r'interleav\w*'],
        'points': [r'group', r'head', r'order', r'repeat', r'n_rep'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'GroupedQueryAttention',
        'old': 'start = len(cache) if cache is not None else 0',
        'new': 'start = 0',
        'exercise': 'GroupedQueryAttention',
        'cause': 'The learner always starts the RoPE positions at 0, so with a KV cache each new token is rotated '
                 'as if it were position 0 instead of continuing after the cached tokens.',
        'names': [r'(position|offset|start)\w*.{0,40}(cache|len\(cache\))', r'(always|restart\w*|reset\w*) (at |from )?(position )?0',
                  r'(ignor|forg[eo]t)\w* (the )?(cache )?(offset|position)', r'(rope|rotary).{0,40}(position|offset)',
                  r'positions? (do not|don.t|never) (advance|continue)', r'past length'],
        'points': [r'rope|rotary', r'position', r'cache', r'offset|start', r'incremental|step'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'KVCache',
        'old': '            self.k = torch.cat([self.k, k_new], dim=2)  # the sequence axis\n'
               '            self.v = torch.cat([self.v, v_new], dim=2)',
        'new': '            return torch.cat([self.k, k_new], dim=2), torch.cat([self.v, v_new], dim=2)  # the sequence axis',
        'exercise': 'KVCache',
        'cause': 'The learner returns the concatenation but never stores it, so the cache keeps only the first '
                 'chunk and does not advance: len() stays put and step 3 no longer sees step 2.',
        'names': [r'(not|never) (stor|sav|updat|advanc|grow|append|kept)\w*', r'(does not|doesn.t|fails to) (store|save|update|advance|grow|append)',
                  r'(forg[eo]t\w*|missing) (to )?(stor|sav|assign|updat)\w*', r'stale', r'(cache|len).{0,30}(stuck|constant|not grow|does not grow)',
                  r'(only|just) (keeps?|holds?) (the )?first'],
        'points': [r'cache', r'len', r'append|grow|store|advanc', r'step', r'previous|earlier'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'KVCache',
        'old': 'return self.k, self.v',
        'new': 'return self.k.detach(), self.v.detach()  # no graph through the cache',
        'exercise': 'KVCache',
        'cause': 'The learner detaches the keys and values it returns, so no gradient flows back through the '
                 'cache into W_k and W_v (the forward values are unchanged).',
        'names': [r'detach\w*', r'(no|zero|missing|block\w*|cut|break\w*|stop\w*) (the )?grad\w*', r'grad\w* (do not|don.t|does not|cannot|never) flow',
                  r'(computation(al)? )?graph', r'autograd', r'backprop\w*'],
        'points': [r'grad', r'detach', r'backward', r'W_k|W_v', r'requires_grad'],
    },
    {
        'notebook': '06_grouped_query_attention',
        'cell': 'kv_cache_bytes',
        'old': 'element = torch.tensor([], dtype=dtype).element_size()',
        'new': 'element = torch.tensor([]).element_size()',
        'exercise': 'kv_cache_bytes',
        'cause': 'The learner ignores the dtype argument and always counts 4 bytes per number (float32), so the '
                 'default float16 answer is twice too big.',
        'names': [r'dtype', r'(bytes? per|element) (number|element|size|_size)', r'float ?32|fp32|4 bytes',
                  r'float ?16|fp16|half', r'(ignor|disregard)\w* (the )?(dtype|precision)', r'(factor|off by|twice|2x|double)'],
        'points': [r'dtype', r'bytes?', r'element', r'float', r'precision'],
    },
    # ------------------------------------------------------------------ 07_flash_attention
    {
        'notebook': '07_flash_attention',
        'cell': 'online_softmax',
        'old': 'm = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)',
        'new': 'm = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)',
        'exercise': 'online_softmax',
        'cause': 'The learner starts the running max at 0 instead of -inf; the result is still right for '
                 'ordinary inputs, but when every entry of a row is very negative the running sum underflows to 0 '
                 'and the row becomes NaN.',
        'names': [r'init\w*', r'(running|current) max.{0,40}(0|zero|-inf)', r'-inf', r'start\w* (at|from) (0|zero)',
                  r'underflow', r'(very |large )?negative (input|value|entr)', r'(starting|initial) value'],
        'points': [r'max', r'nan', r'negative', r'underflow', r'init|start'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention',
        'old': 'acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]',
        'new': 'acc = acc + p @ v[..., k_start:k_end, :]',
        'exercise': 'flash_attention',
        'cause': 'The learner rescales the running sum l but not the accumulated output when the running max '
                 'grows, so any row whose max changes between key blocks is wrong (one key block hides it).',
        'names': [r'rescal\w*', r'(correction|scal\w*) (factor|term)', r'alpha', r'exp ?\( ?m ?- ?m_new',
                  r'(accumulat\w*|acc|output|numerator).{0,40}(not|never) (rescal|correct|updat|shrunk)',
                  r'(stale|old) (max|statistics)', r'(multiple|several|more than one) (key )?blocks?'],
        'points': [r'block', r'rescal|alpha|correction', r'max', r'acc|output', r'online'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'hbm_traffic',
        'old': 'blocks = math.ceil(N / rows)',
        'new': 'blocks = N // rows',
        'exercise': 'hbm_traffic',
        'cause': 'The learner counts the query blocks with floor division, forgetting the last partial block; '
                 'right only when the block size divides N.',
        'names': [r'ceil\w*', r'floor\w*', r'//', r'(partial|last|remainder|leftover) (query )?block',
                  r'round\w* (down|up)', r'(number of|count of) (query )?blocks', r'divid(e|es|ing) N|not divisible'],
        'points': [r'block', r'ceil|floor|round', r'N', r'K|V', r'partial|last|remainder'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'FlashAttentionFunction',
        'old': 'dk[..., k_start:k_end, :] += ds.transpose(-2, -1) @ q_blk * scale',
        'new': 'dk[..., k_start:k_end, :] += ds.transpose(-2, -1) @ q_blk',
        'exercise': 'FlashAttentionFunction',
        'cause': 'The learner forgets the 1/sqrt(d) factor in the key gradient (chain rule through the scaled '
                 'scores), so dk is sqrt(d) times too large while dq and dv are right.',
        'names': [r'scal\w*', r'sqrt|√', r'chain rule', r'\bdk\b|d_?k grad|grad\w* (of|for|w\.r\.t\.) (the )?k(eys?)?\b',
                  r'key grad\w*', r'missing (a )?factor'],
        'points': [r'grad', r'\bdk\b|keys?', r'scal', r'backward', r'gradcheck|sqrt'],
    },
    {
        'notebook': '07_flash_attention',
        'cell': 'flash_attention_triton',
        'old': '        keep = cols[None, :] < Lk\n'
               '        if CAUSAL:\n'
               '            keep = keep & (cols[None, :] <= rows[:, None])\n'
               '        s = tl.where(keep, s, float("-inf"))',
        'new': '        if CAUSAL:\n'
               '            s = tl.where(cols[None, :] <= rows[:, None], s, float("-inf"))',
        'exercise': 'flash_attention_triton',
        'cause': 'The learner masks only the causal part and not the out-of-range keys of the last block; those '
                 'keys load as zeros and get score 0, so any Lk that is not a multiple of the block size is wrong '
                 '(without causal).',
        'names': [r'(out[- ]of[- ]range|out[- ]of[- ]bounds|padded|padding|tail|beyond) (keys?|columns|positions)',
                  r'cols? ?< ?Lk', r'(not a )?multiple of (the )?block', r'(boundary|edge|tail|partial) (block|mask\w*|condition)',
                  r'(last|partial) (key )?block', r'(mask\w*|unmasked).{0,30}(Lk|sequence length|bound)'],
        'points': [r'block', r'Lk|length', r'mask', r'multiple', r'pad|tail|bound'],
    },
    # ------------------------------------------------------------------ 08_transformer_translator
    {
        'notebook': '08_transformer_translator',
        'cell': 'decoder_mask',
        'old': 'keys[:, None, None, :]',
        'new': 'keys[:, None, :, None]',
        'exercise': 'decoder_mask',
        'cause': 'The learner puts the padding mask on the query axis instead of the key axis, so real tokens '
                 'can still attend to <pad> keys while padded query rows are blanked out.',
        'names': [r'query (axis|dim\w*|rows?|side)', r'key (axis|dim\w*|columns?|side)', r'wrong (axis|dim\w*)',
                  r'(rows|columns) instead of (columns|rows)', r'attends? to (the )?(<?pad>?|padding)',
                  r'transpos\w*', r'padding.{0,30}(query|rows)'],
        'points': [r'pad', r'key|column', r'query|row', r'axis|dim', r'mask'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'EncoderLayer',
        'old': 'x = x + self.dropout(self.self_attn(h, h, h, mask)[0])',
        'new': 'x = self.dropout(self.self_attn(h, h, h, mask)[0])',
        'exercise': 'EncoderLayer',
        'cause': 'The learner forgets the residual connection around self-attention, so the layer\'s input is '
                 'thrown away after the attention sub-layer.',
        'names': [r'residual', r'skip[- ]?connection', r'x ?\+', r'(add|adding)\w* (back )?(the )?input',
                  r'shortcut', r'identity (path|connection)'],
        'points': [r'residual|skip', r'self[- ]?attention|attn', r'input', r'x ?\+', r'sub-?layer'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'DecoderLayer',
        'old': 'a = self.cross_attn(h, memory, memory, src_mask)[0]',
        'new': 'a = self.cross_attn(h, memory, memory)[0]',
        'exercise': 'DecoderLayer',
        'cause': 'The learner drops src_mask in cross-attention (without a cache), so the decoder attends to the '
                 'source\'s <pad> positions; only a padded source batch shows it.',
        'names': [r'src_mask', r'source (padding|mask)', r'cross[- ]?attention.{0,40}(mask|pad)',
                  r'(ignor|dropp|forg[eo]t|missing|omit)\w* (the )?(src|source|padding|encoder) mask',
                  r'attends? to (the )?(source.s )?(<?pad>?|padding)', r'mask.{0,20}(not passed|unused|ignored)'],
        'points': [r'mask', r'pad', r'cross', r'source|src|memory', r'batch'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'greedy_decode',
        'old': '        next_token = next_token.masked_fill(finished, model.pad_id)\n'
               '        ys = torch.cat([ys, next_token[:, None]], dim=1)\n'
               '        finished |= next_token == model.eos_id',
        'new': '        finished |= next_token == model.eos_id\n'
               '        next_token = next_token.masked_fill(finished, model.pad_id)\n'
               '        ys = torch.cat([ys, next_token[:, None]], dim=1)',
        'exercise': 'greedy_decode',
        'cause': 'The learner marks a sequence finished before padding, so the <eos> it has just produced is '
                 'itself replaced by <pad> and never appears in the output.',
        'names': [r'eos', r'end[- ]of[- ]sequence', r'(order|before|after).{0,30}(finish|pad|mask)',
                  r'(replac|overwr|mask)\w* .{0,30}(eos|end token)', r'(missing|dropped|lost) (the )?(eos|end)',
                  r'finished (is )?(set|updated|marked) (too )?(early|before)'],
        'points': [r'eos', r'pad', r'finish', r'end', r'token'],
    },
    {
        'notebook': '08_transformer_translator',
        'cell': 'beam_search',
        'old': 'return log_prob / length ** length_penalty',
        'new': 'return log_prob / length * length_penalty',
        'exercise': 'beam_search',
        'cause': 'The learner multiplies the per-token average by length_penalty instead of using it as the '
                 'exponent of the length; identical at length_penalty = 1, wrong ranking otherwise.',
        'names': [r'length[ _-]?penalty', r'exponent', r'\*\* ?length_penalty|len(gth)? ?\*\* ?', r'power',
                  r'(normali[sz]\w*|score) .{0,30}(length|wrong)', r'(multipl|scal)\w* (by|with) (the )?(length[_ ]?)?penalty'],
        'points': [r'length', r'penalty', r'score', r'normali', r'hypothes|beam'],
    },
]
