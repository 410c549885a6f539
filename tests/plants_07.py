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
    {"cell": "hbm_traffic", "old": "blocks = math.ceil(N / rows)", "new": "blocks = N // rows",
     "exercise": "hbm_traffic", "mistake": "tail block dropped"},
    {"cell": "FlashAttentionFunction", "old": "ds = p * (do_blk @ v_blk.transpose(-2, -1) - D_blk)",
     "new": "ds = p * (do_blk @ v_blk.transpose(-2, -1))",
     "exercise": "FlashAttentionFunction", "mistake": "softmax gradient without the row term D"},
    # The same rescaling mistake inside the Triton kernel (its block size is the learner's choice: 16 here).
    {"cell": "flash_attention_triton", "old": "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
     "new": "acc = acc + tl.dot(p.to(v.dtype), v)",
     "exercise": "flash_attention_triton", "mistake": "sum rescaled but output not"},
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
    {"cell": "hbm_traffic", "old": "standard = 2 * N * d + N * N + N * N + N * N + (N * N + N * d) + N * d",
     "new": "standard = 4 * N * (N + d)"},
    {"cell": "FlashAttentionFunction", "old": "D = (grad_output * out).sum(dim=-1)",
     "new": 'D = torch.einsum("...qd,...qd->...q", grad_output, out)'},
    {"cell": "FlashAttentionFunction", "old": "p = torch.exp(s - lse_blk)", "new": "p = (s - lse_blk).exp()"},
    # exp2 with log2(e), as the Triton tutorial writes it, and blocks of 32
    {"cell": "flash_attention_triton", "old": "p = tl.exp(s - m_new[:, None])",
     "new": "p = tl.exp2((s - m_new[:, None]) * 1.4426950408889634)"},
    {"cell": "flash_attention_triton", "old": "block = 64 if q.is_cuda else 16",
     "new": "block = 64 if q.is_cuda else 32"},
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
     "exercise": "flash_attention", "diagnosis": "a dimension of size 1 is missing or extra"},
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
]
