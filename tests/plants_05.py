"""Mistakes to plant into 05_positional_encoding's solution, and correct answers written differently."""

NOTEBOOK = "05_positional_encoding"

# Each mistake is planted into answer cell `cell` by replacing `old` (exactly once) with `new`;
# grading must lose some (not all) points on `exercise` and name `mistake` there.
MISTAKES = [
    # G-9: positions 1..max_len
    {"cell": "sinusoidal_encoding", "old": "position = torch.arange(max_len, dtype=torch.float32)[:, None]",
     "new": "position = torch.arange(1, max_len + 1, dtype=torch.float32)[:, None]",
     "exercise": "sinusoidal_encoding", "mistake": "positions counted from 1"},
    # G-10: RoPE at each token's index in x, whatever `positions` says
    {"cell": "apply_rope", "old": "angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * theta",
     "new": "angle = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * theta",
     "exercise": "apply_rope", "mistake": "RoPE ignores `positions`"},
    {"cell": "PositionalEncoding", "old": "        return self.dropout(x + self.pe[:L])",
     "new": "        return F.dropout(x + self.pe[:L], p=self.dropout.p, training=True)",
     "exercise": "PositionalEncoding", "mistake": "dropout active in eval mode"},
    {"cell": "sinusoidal_encoding",
     "old": "    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)",
     "new": "    pe[:, : d_model // 2] = torch.sin(angle)\n    pe[:, d_model // 2:] = torch.cos(angle)",
     "exercise": "sinusoidal_encoding", "mistake": "concatenated instead of interleaved sin/cos"},
    {"cell": "sinusoidal_encoding", "old": "10000.0 ** (-2 * i / d_model)", "new": "10000.0 ** (-i / d_model)",
     "exercise": "sinusoidal_encoding", "mistake": "exponent i/d instead of 2i/d"},
    {"cell": "sinusoidal_encoding", "old": "10000.0 ** (-2 * i / d_model)", "new": "1000.0 ** (-2 * i / d_model)",
     "exercise": "sinusoidal_encoding", "mistake": "wrong base"},
    # log10 where the formula needs ln: the same as using base e^4 instead of 10000.
    {"cell": "offset_rotation", "old": "math.log(10000.0)", "new": "math.log10(10000.0)",
     "exercise": "offset_rotation", "mistake": "wrong base"},
    {"cell": "offset_rotation",
     "old": "    M[even, odd] = sin\n    M[odd, even] = -sin",
     "new": "    M[even, odd] = -sin\n    M[odd, even] = sin",
     "exercise": "offset_rotation", "mistake": "transposed rotation"},
    {"cell": "apply_rope",
     "old": "    x1, x2 = x[..., :half], x[..., half:]",
     "new": "    x1, x2 = x[..., 0::2], x[..., 1::2]  # neighbours (x0, x1), (x2, x3), ...\n"
            "    return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)",
     "exercise": "apply_rope", "mistake": "interleaved-pair RoPE"},
    {"cell": "apply_rope", "old": "theta = base ** (-2 * i / d)", "new": "theta = 1000 ** (-2 * i / d)",
     "exercise": "apply_rope", "mistake": "wrong base"},
    # the inverse rotation, written as a negated angle
    {"cell": "apply_rope", "old": "cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
     "new": "cos, sin = angle.cos().to(x.dtype), (-angle).sin().to(x.dtype)",
     "exercise": "apply_rope", "mistake": "RoPE rotates by -angle"},
    {"cell": "sinusoidal_encoding", "old": "freq = 10000.0 ** (-2 * i / d_model)",
     "new": "freq = 10000.0 ** (2 * i / d_model)",  # named only when computed as here: sin of 10^4 rad is float32 noise
     "exercise": "sinusoidal_encoding", "mistake": "frequencies grow instead of shrink"},
    {"cell": "offset_rotation", "old": "cos, sin = torch.cos(k * freq), torch.sin(k * freq)",
     "new": "cos, sin = torch.cos(freq), torch.sin(freq)",
     "exercise": "offset_rotation", "mistake": "offset k ignored"},
    {"cell": "apply_rope", "old": "out1 = x1 * cos - x2 * sin", "new": "out1 = x1 * cos + x2 * sin",
     "exercise": "apply_rope", "mistake": "RoPE's sign slip: not a rotation"},
    {"cell": "PositionalEncoding", "old": "return self.dropout(x + self.pe[:L])",
     "new": "return self.dropout(x * self.pe.shape[1] ** 0.5 + self.pe[:L])",
     "exercise": "PositionalEncoding", "mistake": "x scaled inside the module"},
    # dropout on x, then the table added whole: few zeros, and every output PE or 2x + PE (the visible check fails too)
    {"cell": "PositionalEncoding", "old": "return self.dropout(x + self.pe[:L])",
     "new": "return self.dropout(x) + self.pe[:L]",
     "exercise": "PositionalEncoding", "mistake": "dropout before the addition"},
    # name_the_rope_bug: the comparison, the tolerance, the base, the default, an axis from the front
    {"cell": "name_the_rope_bug", "old": "torch.allclose(candidate, rotated, rtol=1e-4, atol=tolerance)",
     "new": "torch.equal(candidate, rotated)",  # recognises nothing: every output is "something else"
     "exercise": "name_the_rope_bug", "mistake": "rotated vectors compared exactly, or with too tight a tolerance",
     "loses_everything": True},
    {"cell": "name_the_rope_bug", "old": "tolerance = 1e-4 * float(x.abs().max())", "new": "tolerance = 1e-4",
     "exercise": "name_the_rope_bug", "mistake": "a tolerance that ignores the size of x"},
    {"cell": "name_the_rope_bug", "old": "    half = x.shape[-1] // 2\n",
     "new": "    half = x.shape[-1] // 2\n    base = 10000  # the argument forgotten: apply_rope(x, positions) everywhere\n",
     "exercise": "name_the_rope_bug", "mistake": "`base` not passed on"},
    {"cell": "name_the_rope_bug", "old": '    return "something else"\n', "new": '    return "correct"\n',
     "exercise": "name_the_rope_bug", "mistake": "'correct' by default"},
    {"cell": "name_the_rope_bug", "old": "dim=-1).flatten(-2)", "new": "dim=-1).flatten(1)",
     "exercise": "name_the_rope_bug", "mistake": "an axis counted from the front"},
]

# Correct answers written differently: all applied together, they must keep full marks.
VARIANTS = [
    # stack-and-flatten interleaving, frequencies through exp/log (the seeds' div_term), float64 inside
    {"cell": "sinusoidal_encoding",
     "old": "    pe = torch.zeros(max_len, d_model)\n    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)\n    return pe",
     "new": "    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))\n"
            "    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * div_term\n"
            "    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()"},
    # blocks handed to torch.block_diag
    {"cell": "offset_rotation",
     "old": "    M = torch.zeros(d_model, d_model)",
     "new": "    return torch.block_diag(*[torch.stack([torch.stack([c, s]), torch.stack([-s, c])]) for c, s in zip(cos, sin)])\n"
            "    M = torch.zeros(d_model, d_model)"},
    # a permanent (non-)batched view of the buffer and F.dropout instead of the module's nn.Dropout
    {"cell": "PositionalEncoding",
     "old": "        return self.dropout(x + self.pe[:L])",
     "new": "        return F.dropout(x + self.pe[:L].unsqueeze(0), p=self.dropout.p, training=self.training)"},
    # Hugging Face style: duplicated angles and rotate_half
    {"cell": "apply_rope",
     "old": "    out1 = x1 * cos - x2 * sin\n    out2 = x2 * cos + x1 * sin\n    return torch.cat([out1, out2], dim=-1)",
     "new": "    rotate_half = torch.cat([-x2, x1], dim=-1)\n"
            "    cos, sin = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)\n"
            "    return x * cos + rotate_half * sin"},
    # name_the_rope_bug: the largest difference instead of allclose, the square root as a power
    {"cell": "name_the_rope_bug",
     "old": "        if candidate.shape == rotated.shape and torch.allclose(candidate, rotated, rtol=1e-4, atol=tolerance):",
     "new": "        if candidate.shape == rotated.shape and (candidate - rotated).abs().max() <= 10 * tolerance:"},
    {"cell": "name_the_rope_bug", "old": "apply_rope(x, positions, math.sqrt(base))",
     "new": "apply_rope(x, positions, base ** 0.5)"},
    # the neighbours through one permutation of the last axis and its inverse
    {"cell": "name_the_rope_bug",
     "old": "    split = apply_rope(torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1), positions, base)\n"
            "    woven = torch.stack([split[..., :half], split[..., half:]], dim=-1).flatten(-2)\n",
     "new": "    order = torch.cat([torch.arange(0, 2 * half, 2), torch.arange(1, 2 * half, 2)])\n"
            "    woven = apply_rope(x[..., order], positions, base)[..., torch.argsort(order)]\n"},
]

# Mistakes that must lose points and get no catalogue name; `feedback` must appear in the exercise's feedback.
UNNAMED = [
    # cos and sin left in float32: a float16 x comes back float32 (float64 is promoted the right way, float16 not).
    {"cell": "apply_rope", "old": "cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)",
     "new": "cos, sin = angle.cos(), angle.sin()",
     "exercise": "apply_rope", "feedback": "for x in float16 the output is torch.float32"},
    # name_the_rope_bug: "not a rotation" rebuilt with the signs the other way round (x1 cos - x2 sin, x2 cos - x1 sin)
    {"cell": "name_the_rope_bug", "old": "torch.cat([backward[..., :half], forward[..., half:]], dim=-1)",
     "new": "torch.cat([forward[..., :half], backward[..., half:]], dim=-1)",
     "exercise": "name_the_rope_bug", "feedback": "your version of 'not a rotation' computes something other"},
    # name_the_rope_bug: the neighbours rotated but not woven back into their places
    {"cell": "name_the_rope_bug", "old": "woven = torch.stack([split[..., :half], split[..., half:]], dim=-1).flatten(-2)",
     "new": "woven = split",
     "exercise": "name_the_rope_bug", "feedback": "your version of 'neighbour pairs' computes something other"},
]

# Mistakes the catalogue does not know: the generic diagnosis (utils/diagnose.py) must say what they are.
DIAGNOSED = [
    {"cell": "apply_rope", "old": "torch.cat([out1, out2], dim=-1)", "new": "torch.cat([out2, out1], dim=-1)",
     "exercise": "apply_rope", "diagnosis": "a roll"},
    {"cell": "sinusoidal_encoding", "old": "    pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle)",
     "new": "    pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle)",
     "exercise": "sinusoidal_encoding", "diagnosis": "neighbouring pair exchanged"},
    # the table returned with a batch axis, pe.unsqueeze(0), as in the PyTorch tutorial's module
    {"cell": "sinusoidal_encoding", "old": "    return pe\n", "new": "    return pe.unsqueeze(0)  # (1, max_len, d_model)\n",
     "exercise": "sinusoidal_encoding", "diagnosis": "extra axis of size 1 at position 0"},
    # the table built dimension-major, (d_model, max_len)
    {"cell": "sinusoidal_encoding",
     "old": "    angle = position * freq  # (max_len, d_model/2)\n"
            "    pe = torch.zeros(max_len, d_model)\n"
            "    pe[:, 0::2] = torch.sin(angle)\n"
            "    pe[:, 1::2] = torch.cos(angle)",
     "new": "    angle = freq[:, None] * position.T  # (d_model/2, max_len)\n"
            "    pe = torch.zeros(d_model, max_len)\n"
            "    pe[0::2] = torch.sin(angle)\n"
            "    pe[1::2] = torch.cos(angle)",
     "exercise": "sinusoidal_encoding", "diagnosis": "axes in another order"},
    # the fourth entry of each 2x2 block forgotten: the odd rows lose their cosine
    {"cell": "offset_rotation", "old": "    M[odd, odd] = cos\n", "new": "",
     "exercise": "offset_rotation", "diagnosis": "rows of your output are right"},
]
