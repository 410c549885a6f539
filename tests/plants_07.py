"""Mistakes to plant into 07_flash_attention's solution, and correct answers written differently."""

NOTEBOOK = "07_flash_attention"

# Each mistake is planted into answer cell `cell` by replacing `old` (exactly once) with `new`;
# grading must lose some (not all) points on `exercise` and name `mistake` there.
MISTAKES = [
    {"cell": "online_softmax",
     "old": "l = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)",
     "new": "l = l + torch.exp(block - shift[..., None]).sum(dim=-1)",
     "exercise": "online_softmax", "mistake": "running sum not rescaled when the max grows"},
    {"cell": "online_softmax", "old": "for start in range(0, L, block_size):",
     "new": "for start in range(0, L - block_size + 1, block_size):",
     "exercise": "online_softmax", "mistake": "tail block dropped"},
    {"cell": "flash_attention",
     "old": "            l = alpha * l + p.sum(dim=-1)\n"
            "            acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]",
     "new": "            l = l + p.sum(dim=-1)\n"
            "            acc = acc + p @ v[..., k_start:k_end, :]",
     "exercise": "flash_attention", "mistake": "old output not rescaled when the max grows"},
    {"cell": "flash_attention", "old": "acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]",
     "new": "acc = acc + p @ v[..., k_start:k_end, :]",
     "exercise": "flash_attention", "mistake": "sum rescaled but output not"},
    # range(i) instead of range(i + 1) over key blocks: the diagonal block is skipped.
    {"cell": "flash_attention", "old": "kv_stop = min(Lk, q_end) if causal else Lk",
     "new": "kv_stop = min(Lk, q_start) if causal else Lk",
     "exercise": "flash_attention", "mistake": "causal block skipping off by one"},
    {"cell": "flash_attention", "old": "for k_start in range(0, kv_stop, block_size_k):",
     "new": "for k_start in range(0, kv_stop - block_size_k + 1, block_size_k):",
     "exercise": "flash_attention", "mistake": "tail block dropped"},
    # The block's max taken before the causal mask: a future key's huge score sets the scale (float32 underflow).
    {"cell": "flash_attention",
     "old": "            if causal:\n"
            "                cols = torch.arange(k_start, k_end, device=q.device)[None, :]  # (1, bk)\n"
            "                s = s.masked_fill(cols > rows, float(\"-inf\"))\n"
            "            m_new = torch.maximum(m, s.amax(dim=-1))",
     "new": "            m_new = torch.maximum(m, s.amax(dim=-1))\n"
            "            if causal:\n"
            "                cols = torch.arange(k_start, k_end, device=q.device)[None, :]  # (1, bk)\n"
            "                s = s.masked_fill(cols > rows, float(\"-inf\"))",
     "exercise": "flash_attention", "mistake": "forbidden scores still set the row's scale"},
    {"cell": "flash_attention", "old": "lse[..., q_start:q_end] = m + torch.log(l)",
     "new": "lse[..., q_start:q_end] = torch.log(l)",
     "exercise": "flash_attention", "mistake": "logsumexp without the max"},
    # The running max started at 0 instead of -inf: rows whose scores all lie far below zero come out 0 / 0.
    {"cell": "online_softmax",
     "old": 'm = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)',
     "new": "m = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)",
     "exercise": "online_softmax", "mistake": "running max started at 0, not -inf"},
    # No max-shift at all: exp of the raw entries, which overflows at +1e4 and underflows at -1e4.
    {"cell": "online_softmax",
     "old": "        l = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)\n"
            "        m = m_new\n"
            "    return torch.exp(x - m[..., None]) / l[..., None]",
     "new": "        l = l + torch.exp(block).sum(dim=-1)\n"
            "        m = m_new\n"
            "    return torch.exp(x) / l[..., None]",
     "exercise": "online_softmax", "mistake": "no max-shift inside the tiles"},
    {"cell": "flash_attention", "old": 'm = q.new_full(q_blk.shape[:-1], float("-inf"))  # running max, (..., bq)',
     "new": "m = q.new_zeros(q_blk.shape[:-1])  # running max, (..., bq)",
     "exercise": "flash_attention", "mistake": "running max started at 0, not -inf"},
    {"cell": "flash_attention",
     "old": "            m_new = torch.maximum(m, s.amax(dim=-1))\n"
            "            alpha = torch.exp(m - m_new)  # how much the old statistics shrink\n"
            "            p = torch.exp(s - m_new[..., None])  # (..., bq, bk)\n"
            "            l = alpha * l + p.sum(dim=-1)\n"
            "            acc = alpha[..., None] * acc + p @ v[..., k_start:k_end, :]\n"
            "            m = m_new\n"
            "        out[..., q_start:q_end, :] = acc / l[..., None]\n"
            "        lse[..., q_start:q_end] = m + torch.log(l)",
     "new": "            p = torch.exp(s)  # (..., bq, bk)\n"
            "            l = l + p.sum(dim=-1)\n"
            "            acc = acc + p @ v[..., k_start:k_end, :]\n"
            "        out[..., q_start:q_end, :] = acc / l[..., None]\n"
            "        lse[..., q_start:q_end] = torch.log(l)",
     "exercise": "flash_attention", "mistake": "no max-shift inside the tiles"},
    {"cell": "flash_attention", "old": "q_blk = q[..., q_start:q_end, :] * scale  # (..., bq, d)",
     "new": "q_blk = q[..., q_start:q_end, :]  # (..., bq, d)",
     "exercise": "flash_attention", "mistake": "scores not scaled by 1/sqrt(d)"},
    {"cell": "flash_attention", "old": "scale = 1.0 / math.sqrt(d)", "new": "scale = 1.0 / d",
     "exercise": "flash_attention", "mistake": "scores scaled by 1/d instead of 1/sqrt(d)"},
    {"cell": "flash_attention", "old": 's = s.masked_fill(cols > rows, float("-inf"))',
     "new": 's = s.masked_fill(cols <= rows, float("-inf"))',
     "exercise": "flash_attention", "mistake": "causal mask inverted"},
    # the diagonal hidden too, written as a strict comparison the other way round
    {"cell": "flash_attention", "old": 's = s.masked_fill(cols > rows, float("-inf"))',
     "new": 's = s.masked_fill(~(rows > cols), float("-inf"))',
     "exercise": "flash_attention", "mistake": "causal mask hides the diagonal"},
    # The same max-start mistake inside the Triton kernel.
    {"cell": "flash_attention_triton", "old": 'm = tl.full([BLOCK_M], float("-inf"), tl.float32)',
     "new": "m = tl.zeros([BLOCK_M], tl.float32)",
     "exercise": "flash_attention_triton", "mistake": "running max started at 0, not -inf"},
    {"cell": "hbm_traffic", "old": "blocks = math.ceil(N / rows)", "new": "blocks = N // rows",
     "exercise": "hbm_traffic", "mistake": "query blocks counted with floor, not ceil"},
    {"cell": "FlashAttentionFunction", "old": "ds = p * (do_blk @ v_blk.transpose(-2, -1) - D_blk)",
     "new": "ds = p * (do_blk @ v_blk.transpose(-2, -1))",
     "exercise": "FlashAttentionFunction", "mistake": "softmax gradient without the row term D"},
    # The same rescaling mistake inside the Triton kernel (its block size is the learner's choice: 16 here).
    {"cell": "flash_attention_triton", "old": "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
     "new": "acc = acc + tl.dot(p.to(v.dtype), v)",
     "exercise": "flash_attention_triton", "mistake": "sum rescaled but output not"},
    {"cell": "flash_attention", "old": "out[..., q_start:q_end, :] = acc / l[..., None]",
     "new": "out[..., q_start:q_end, :] = acc * 1.0",
     "exercise": "flash_attention", "mistake": "output not divided by the running sum"},
    {"cell": "flash_attention", "old": "cols = torch.arange(k_start, k_end, device=q.device)[None, :]",
     "new": "cols = torch.arange(k_end - k_start, device=q.device)[None, :]",
     "exercise": "flash_attention", "mistake": "causal mask with tile-local key indices"},
    {"cell": "hbm_traffic", "old": "M = sram_bytes // element_bytes", "new": "M = sram_bytes",
     "exercise": "hbm_traffic", "mistake": "SRAM bytes counted as elements"},
    {"cell": "FlashAttentionFunction", "old": "D = (grad_output * out).sum(dim=-1)", "new": "D = grad_output.sum(dim=-1)",
     "exercise": "FlashAttentionFunction", "mistake": "D without the output"},
    {"cell": "FlashAttentionFunction", "old": "bq, bk, causal = ctx.block_size_q, ctx.block_size_k, ctx.causal",
     "new": "bq, bk, causal = ctx.block_size_q, ctx.block_size_k, False",
     "exercise": "FlashAttentionFunction", "mistake": "backward ignores the causal mask"},
    # name_the_flash_bug: the two rescaling bugs' switches mixed up
    {"cell": "name_the_flash_bug",
     "old": '                l = (l if bug == "sum not rescaled" else alpha * l) + p.sum(dim=-1)\n'
            '                acc = (acc if bug == "output not rescaled" else alpha[..., None] * acc)',
     "new": '                l = (l if bug == "output not rescaled" else alpha * l) + p.sum(dim=-1)\n'
            '                acc = (acc if bug == "sum not rescaled" else alpha[..., None] * acc)',
     "exercise": "name_the_flash_bug", "mistake": "'sum not rescaled' and 'output not rescaled' swapped"},
    # name_the_flash_bug: NaN rows compared as numbers (no equal_nan)
    {"cell": "name_the_flash_bug", "old": "rtol=1e-4, atol=1e-4, equal_nan=True)", "new": "rtol=1e-4, atol=1e-4)",
     "exercise": "name_the_flash_bug", "mistake": "NaN compared as a number"},
    # name_the_flash_bug: every candidate computed in float64 "to be exact": the underflow never happens
    {"cell": "name_the_flash_bug",
     "old": '    for label in FLASH_BUGS[:-1]:  # "correct" first: a bug that cannot show here made the correct output\n'
            '        # made in float64 elsewhere: close, not equal; and a 0 / 0 row is NaN, which equals nothing unless told\n'
            '        if torch.allclose(tiled(label), output,',
     "new": '    q, k, v = q.double(), k.double(), v.double()  # float64, to be exact\n'
            '    for label in FLASH_BUGS[:-1]:\n'
            '        if torch.allclose(tiled(label).float(), output,',
     "exercise": "name_the_flash_bug", "mistake": "'mask after max' reproduced without float32's underflow"},
    # name_the_flash_bug: exact comparison
    {"cell": "name_the_flash_bug", "old": "torch.allclose(tiled(label), output, rtol=1e-4, atol=1e-4, equal_nan=True)",
     "new": "torch.equal(tiled(label), output)",
     "exercise": "name_the_flash_bug", "mistake": "outputs compared exactly, or with too tight a tolerance"},
    # name_the_flash_bug: no "something else": whatever matches nothing is called correct
    {"cell": "name_the_flash_bug", "old": '    return "something else"\n    ### END', "new": '    return "correct"\n    ### END',
     "exercise": "name_the_flash_bug", "mistake": "'correct' by default"},
    # the logsumexp returned as the running max alone
    {"cell": "flash_attention", "old": "lse[..., q_start:q_end] = m + torch.log(l)",
     "new": "lse[..., q_start:q_end] = m",
     "exercise": "flash_attention", "mistake": "logsumexp as the max alone"},
    # the Triton grid launches one instance per query block of the first slice only
    {"cell": "flash_attention_triton", "old": "grid = (triton.cdiv(Lq, block), q3.shape[0])",
     "new": "grid = (triton.cdiv(Lq, block), 1)",
     "exercise": "flash_attention_triton", "mistake": "launch grid leaves parts of the output unwritten"},
]

# Correct answers written differently: all applied together, they must keep full marks.
VARIANTS = [
    {"cell": "online_softmax", "old": 'shift = m_new.masked_fill(m_new == float("-inf"), 0.0)',
     "new": "shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)"},
    # einsum scores; a causal loop that visits one block more than needed (masked, so still exact)
    {"cell": "flash_attention", "old": "s = q_blk @ k[..., k_start:k_end, :].transpose(-2, -1)",
     "new": 's = torch.einsum("...qd,...kd->...qk", q_blk, k[..., k_start:k_end, :])'},
    {"cell": "flash_attention", "old": "kv_stop = min(Lk, q_end) if causal else Lk",
     "new": "kv_stop = min(Lk, q_end + block_size_k) if causal else Lk"},
    {"cell": "hbm_traffic", "old": "blocks = math.ceil(N / rows)", "new": "blocks = -(-N // rows)"},
    {"cell": "hbm_traffic", "old": "standard = 4 * N * N + 4 * N * d",
     "new": "standard = 4 * N * (N + d)"},
    {"cell": "FlashAttentionFunction", "old": "D = (grad_output * out).sum(dim=-1)",
     "new": 'D = torch.einsum("...qd,...qd->...q", grad_output, out)'},
    {"cell": "FlashAttentionFunction", "old": "p = torch.exp(s - lse_blk)", "new": "p = (s - lse_blk).exp()"},
    # exp2 with log2(e), as the Triton tutorial writes it, and blocks of 32
    {"cell": "flash_attention_triton", "old": "p = tl.exp(s - m_new[:, None])",
     "new": "p = tl.exp2((s - m_new[:, None]) * 1.4426950408889634)"},
    {"cell": "flash_attention_triton", "old": "block = 64 if q.is_cuda else 16",
     "new": "block = 64 if q.is_cuda else 32"},
    # a running log-sum-exp in float32 with torch.logaddexp: its error near 1e4 is what float32 allows there
    {"cell": "online_softmax", "old": "    return torch.exp(x - m[..., None]) / l[..., None]",
     "new": '    lse = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)\n'
            '    for start in range(0, L, block_size):\n'
            '        lse = torch.logaddexp(lse, torch.logsumexp(x[..., start:start + block_size], dim=-1))\n'
            '    return torch.exp(x - lse[..., None])'},
    # name_the_flash_bug: the labels tried in another order, with the output's NaN rows compared apart
    {"cell": "name_the_flash_bug",
     "old": "        if torch.allclose(tiled(label), output, rtol=1e-4, atol=1e-4, equal_nan=True):",
     "new": "        mine = tiled(label)\n"
            "        if torch.equal(mine.isnan(), output.isnan()) and torch.allclose(\n"
            "                mine.nan_to_num(), output.nan_to_num(), rtol=1e-4, atol=1e-4):"},
]


# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    # no guard for a row whose first block is all -inf: exp(-inf - (-inf)) is NaN and stays
    {"cell": "online_softmax",
     "old": "        shift = m_new.masked_fill(m_new == float(\"-inf\"), 0.0)  # a row that saw only -inf so far: no NaN\n"
            "        l = l * torch.exp(m - shift) + torch.exp(block - shift[..., None]).sum(dim=-1)",
     "new": "        l = l * torch.exp(m - m_new) + torch.exp(block - m_new[..., None]).sum(dim=-1)",
     "exercise": "online_softmax", "diagnosis": "NaN in"},
    # the logsumexp returned with a trailing axis of size 1, "like the output"
    {"cell": "flash_attention", "old": "    return out, lse\n", "new": "    return out, lse[..., None]  # (..., Lq, 1)\n",
     "exercise": "flash_attention", "diagnosis": "extra axis of size 1 at position 3"},
    # the output buffer made with torch.zeros and no dtype: float32 whatever q is
    {"cell": "flash_attention", "old": "out = q.new_empty(*q.shape[:-1], v.shape[-1])",
     "new": "out = torch.zeros(*q.shape[:-1], v.shape[-1])",
     "exercise": "flash_attention", "diagnosis": "dtype is torch.float32, not torch.float64"},
    # dK without the 1/sqrt(d) of the scores it differentiates (dQ keeps it)
    {"cell": "FlashAttentionFunction", "old": "dk[..., k_start:k_end, :] += ds.transpose(-2, -1) @ q_blk * scale",
     "new": "dk[..., k_start:k_end, :] += ds.transpose(-2, -1) @ q_blk",
     "exercise": "FlashAttentionFunction", "diagnosis": "multiplied by √8"},
    # dS = P * (D - dP): the row term subtracted the wrong way round
    {"cell": "FlashAttentionFunction", "old": "ds = p * (do_blk @ v_blk.transpose(-2, -1) - D_blk)",
     "new": "ds = p * (D_blk - do_blk @ v_blk.transpose(-2, -1))",
     "exercise": "FlashAttentionFunction", "diagnosis": "multiplied by −1"},
    # the logsumexp (N numbers) left out of the tiled count
    {"cell": "hbm_traffic", "old": "tiled = N * d + 2 * N * d * blocks + N * d + N",
     "new": "tiled = N * d + 2 * N * d * blocks + N * d", "exercise": "hbm_traffic", "diagnosis": "short by exactly N"},
]


# Mistakes that must lose points and be given no catalogue name, with what the feedback must say instead.
UNNAMED = [
    # name_the_flash_bug: the candidates never mask: every causal output is misnamed
    {"cell": "name_the_flash_bug",
     "old": "                if causal:\n                    s = s.masked_fill(",
     "new": "                if False:\n                    s = s.masked_fill(",
     "exercise": "name_the_flash_bug", "feedback": "causal=True"},
    # the backward pass's dq without its 1/sqrt(d): dk and dv right, so the feedback points at dq's own sum
    {"cell": "FlashAttentionFunction", "old": "dq[..., q_start:q_end, :] += ds @ k_blk * scale",
     "new": "dq[..., q_start:q_end, :] += ds @ k_blk", "exercise": "FlashAttentionFunction",
     "feedback": "look at dq's own sum"},
]
