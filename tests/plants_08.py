"""Mistakes to plant into 08_transformer_translator's solution, and correct answers written differently."""

NOTEBOOK = "08_transformer_translator"

# Each mistake is planted into answer cell `cell` by replacing `old` (exactly once) with `new`;
# grading must lose some (not all) points on `exercise` and name `mistake` there.
MISTAKES = [
    # The decoder's mask: padding only, causal only, padding on the wrong axis, the wrong triangle.
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return keys[:, None, None, :].expand(-1, 1, L, L)",
     "exercise": "decoder_mask", "mistake": "causal mask missing in the decoder"},
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return causal[None, None].expand(tgt.shape[0], 1, L, L)",
     "exercise": "decoder_mask", "mistake": "padding keys not masked"},
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return causal[None, None] & keys[:, None, :, None]",
     "exercise": "decoder_mask", "mistake": "padding masked on the query axis"},
    {"cell": "decoder_mask", "old": "causal = causal_mask(L).to(tgt.device)",
     "new": "causal = causal_mask(L).to(tgt.device).T",
     "exercise": "decoder_mask", "mistake": "upper triangle (future instead of past)"},
    # The encoder layer: residuals from norm(x), a norm_first that does not say what forward does, no mask.
    {"cell": "EncoderLayer",
     "old": "x = x + self.dropout(self.self_attn(h, h, h, mask)[0])  # the residual adds to x itself, not to norm(x)\n"
            "        h = self.norm2(x)\n"
            "        return x + self.dropout(",
     "new": "x = h + self.dropout(self.self_attn(h, h, h, mask)[0])\n"
            "        h = self.norm2(x)\n"
            "        return h + self.dropout(",
     "exercise": "EncoderLayer", "mistake": "residual around the wrong sublayer"},
    {"cell": "EncoderLayer", "old": "    norm_first = True  #", "new": "    norm_first = False  #",
     "exercise": "EncoderLayer", "mistake": "norm placement disagrees with norm_first"},
    {"cell": "EncoderLayer", "old": "self.self_attn(h, h, h, mask)", "new": "self.self_attn(h, h, h)",
     "exercise": "EncoderLayer", "mistake": "padding mask ignored"},
    # The decoder layer: self-attention without its mask, cross-attention that never reads the source.
    {"cell": "DecoderLayer", "old": "self.self_attn(h, past, past, tgt_mask)", "new": "self.self_attn(h, past, past)",
     "exercise": "DecoderLayer", "mistake": "causal mask missing in the decoder"},
    {"cell": "DecoderLayer", "old": "self.cross_attn(h, memory, memory, src_mask)", "new": "self.cross_attn(h, h, h)",
     "exercise": "DecoderLayer", "mistake": "cross-attention keys from the decoder"},
    # Greedy decoding: a fresh cache at every step; rows that go on after their <eos>.
    {"cell": "greedy_decode",
     "old": "logits = model.decode(ys[:, -1:], memory, src_mask, cache)",
     "new": "logits = model.decode(ys[:, -1:], memory, src_mask, model.new_cache())",
     "exercise": "greedy_decode", "mistake": "cache not advanced"},
    {"cell": "greedy_decode",
     "old": "        next_token = next_token.masked_fill(finished, model.pad_id)\n"
            "        ys = torch.cat([ys, next_token[:, None]], dim=1)\n"
            "        finished |= next_token == model.eos_id\n"
            "        if finished.all():\n"
            "            break\n",
     "new": "        ys = torch.cat([ys, next_token[:, None]], dim=1)\n",
     "exercise": "greedy_decode", "mistake": "sequences not finished at <eos>"},
    # Beam search: the length penalty multiplied, or left out.
    {"cell": "beam_search", "old": "return log_prob / length ** length_penalty",
     "new": "return log_prob * length ** length_penalty",
     "exercise": "beam_search", "mistake": "length penalty inverted"},
    {"cell": "beam_search", "old": "return log_prob / length ** length_penalty", "new": "return log_prob",
     "exercise": "beam_search", "mistake": "length penalty ignored"},
]

# Mistakes outside the catalogue: grading must lose points, name no catalogued mistake, and give the generic
# diagnosis (utils.diagnose) that contains `diagnosis`.
DIAGNOSED = [
    # F.dropout with the layer's rate but without training=self.training: still random after .eval()
    {"cell": "EncoderLayer", "old": "return x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(h)))))",
     "new": "return x + F.dropout(self.linear2(self.dropout(F.relu(self.linear1(h)))), p=self.dropout.p)",
     "exercise": "EncoderLayer", "diagnosis": "changes from one call to the next with the same inputs"},
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return (causal[None, None] & keys[:, None, None, :]).transpose(-1, -2)",
     "exercise": "decoder_mask", "diagnosis": "transposed"},
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return causal[None] & keys[:, None, :]",
     "exercise": "decoder_mask", "diagnosis": "a dimension of size 1 is missing or extra"},
    {"cell": "decoder_mask", "old": "return causal[None, None] & keys[:, None, None, :]",
     "new": "return (causal[None, None] & keys[:, None, None, :]).float()",
     "exercise": "decoder_mask", "diagnosis": "return a boolean mask"},
    {"cell": "greedy_decode", "old": "    return ys[:, 1:]", "new": "    return ys",
     "exercise": "greedy_decode", "diagnosis": "1 extra entry at the start of axis 1"},
    {"cell": "greedy_decode", "old": "    return ys[:, 1:]", "new": "    return ys[:, 1:].T",
     # "a transpose" is in both wordings: (B, T) outputs that happen to be square on the random fresh sources are
     # "axes 0 and 1 swapped (a transpose)", the others "axes in another order ... look for a transpose".
     "exercise": "greedy_decode", "diagnosis": "a transpose"},
]

# Correct answers written differently: all applied together, they must keep full marks.
VARIANTS = [
    # the mask from torch.tril and unsqueeze, without the causal_mask of notebook 03
    {"cell": "decoder_mask",
     "old": "    causal = causal_mask(L).to(tgt.device)  # (L, L): j <= i\n"
            "    keys = tgt != pad_id  # (B, L): real tokens\n"
            "    return causal[None, None] & keys[:, None, None, :]",
     "new": "    causal = torch.tril(torch.ones(L, L, dtype=torch.bool, device=tgt.device))\n"
            "    return causal.unsqueeze(0).unsqueeze(0) & tgt.ne(pad_id).unsqueeze(1).unsqueeze(2)"},
    # post-norm layers (the 2017 arrangement), stated in norm_first: the tests accept either
    {"cell": "EncoderLayer", "old": "    norm_first = True  #", "new": "    norm_first = False  #"},
    {"cell": "EncoderLayer",
     "old": "        h = self.norm1(x)\n"
            "        x = x + self.dropout(self.self_attn(h, h, h, mask)[0])  # the residual adds to x itself, not to norm(x)\n"
            "        h = self.norm2(x)\n"
            "        return x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(h)))))",
     "new": "        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)[0]))\n"
            "        return self.norm2(x + self.dropout(self.linear2(self.dropout(torch.relu(self.linear1(x))))))"},
    {"cell": "DecoderLayer", "old": "    norm_first = True  #", "new": "    norm_first = False  #"},
    {"cell": "DecoderLayer",
     "old": "        h = self.norm1(x)\n"
            "        past = h if cache is None else cache.update(h)  # (B, t, d_model): every position's input so far\n"
            "        x = x + self.dropout(self.self_attn(h, past, past, tgt_mask)[0])\n"
            "        h = self.norm2(x)\n"
            "        x = x + self.dropout(self.cross_attn(h, memory, memory, src_mask)[0])  # keys and values: the source\n"
            "        h = self.norm3(x)\n"
            "        return x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(h)))))",
     "new": "        past = x if cache is None else cache.update(x)\n"
            "        x = self.norm1(x + self.dropout(self.self_attn(x, past, past, tgt_mask)[0]))\n"
            "        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)[0]))\n"
            "        return self.norm3(x + self.dropout(self.linear2(self.dropout(F.relu(self.linear1(x))))))"},
    # greedy decoding that collects the tokens in a list and pads with torch.where
    {"cell": "greedy_decode",
     "old": "        next_token = next_token.masked_fill(finished, model.pad_id)\n",
     "new": "        next_token = torch.where(finished, torch.full_like(next_token, model.pad_id), next_token)\n"},
    # beam search that ranks the candidates with sort instead of topk
    {"cell": "beam_search",
     "old": "        top, index = total.topk(min(beam_size, total.numel()))",
     "new": "        ordered, order = total.sort(descending=True)\n"
            "        top, index = ordered[:beam_size], order[:beam_size]"},
]
