"""Hidden tests of 08_transformer_translator: reference layers and decoders, the mistake catalogue, references.

Each exercise is graded on its own: the layers are compared with PyTorch's nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer given the same weights, and the decoders run on a `Translator` whose layers are
PyTorch's (utils.translator's built-ins), so a bug in the learner's DecoderLayer never costs greedy_decode points.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from utils.grading import CheckFailure, Mistake, load_weights, type_name
from utils.i18n import N_
from utils.results import later as _  # words said in the reader's language when shown
from utils.translator import Translator, torch_mask

NOTEBOOK = "08_transformer_translator"
MASK = N_("3. The decoder's mask")
ENCODER = N_("4. The encoder layer")
DECODER = N_("5. The decoder layer")
GREEDY = N_("7. Greedy decoding with a cache")
TRAINING = N_("8. Training")
BEAM = N_("10. Beam search")

# -- the mistake catalogue ----------------------------------------------------------------------------
NO_CAUSAL_MASK = Mistake(
    "causal mask missing in the decoder",
    "the decoder's self-attention let position i see positions after i: in training the answer to predict is "
    "the next input token, so the model learns to copy it, and at inference (where the future does not exist) "
    "it has learned nothing useful. The target mask is causal AND padding",
    MASK,
)
NO_PADDING = Mistake(
    "padding keys not masked",
    "the mask is causal but lets every query attend to <pad> positions of the target: combine the causal "
    "triangle with (tgt != pad_id) over the key axis",
    MASK,
)
PAD_ROWS = Mistake(
    "padding masked on the query axis",
    "(tgt != pad_id) was broadcast over the rows (queries) instead of the columns (keys): a padded query "
    "row is harmless (its output is ignored by the loss), but a real query must not read a padded key",
    MASK,
)
UPPER = Mistake(
    "upper triangle (future instead of past)",
    "True marks what may be attended: position i may see j <= i, the lower triangle with its diagonal "
    "(tril), not the upper one",
    MASK,
)
DECODER_NO_MASK = Mistake(
    "causal mask missing in the decoder",
    "the self-attention of the decoder layer ignored tgt_mask, so each position attends to the future "
    "positions of the target too: pass tgt_mask to self_attn",
    DECODER,
)
CROSS_FROM_DECODER = Mistake(
    "cross-attention keys from the decoder",
    "cross-attention takes its queries from the decoder and its keys and values from the encoder's output "
    "(memory): cross_attn(h, memory, memory, src_mask). Keys and values from the decoder make it a second "
    "self-attention that never reads the source sentence",
    DECODER,
)
NO_RESIDUAL = Mistake(
    "residual connection missing",
    "every sublayer's output is added to its input, x + sublayer(...): without the addition the layer replaces "
    "the residual stream instead of adding to it, and what the earlier sublayers computed is lost",
    ENCODER,
)
CROSS_UNMASKED = Mistake(
    "source padding not masked in cross-attention",
    "cross-attention must not read the source's padding: pass src_mask, cross_attn(h, memory, memory, src_mask), "
    "so the padded source positions get no weight",
    DECODER,
)
CROSS_SWAPPED = Mistake(
    "cross-attention arguments swapped",
    "the queries came from memory and the keys and values from the decoder; the decoder asks and the source "
    "answers: cross_attn(h, memory, memory, src_mask). Swapped, the output has the source's length, which only "
    "runs when the two sentences are equally long",
    DECODER,
)
RESIDUAL_NORMED = Mistake(
    "residual around the wrong sublayer",
    "in a pre-norm layer the residual adds the sublayer's output to x itself: x + sublayer(norm(x)). "
    "Adding it to norm(x) instead re-normalises the residual stream at every sublayer, so the identity "
    "path that lets gradients through the stack is gone",
    ENCODER,
)
SUBLAYER_ORDER = Mistake(
    "sublayers in the wrong order",
    "a decoder layer first attends over what it has written so far (masked self-attention), then asks the source "
    "(cross-attention), then applies the feed-forward network; cross-attention first asks the source with queries "
    "that have not yet looked at the rest of the target",
    DECODER,
)
NORM_MISMATCH = Mistake(
    "norm placement disagrees with norm_first",
    "the layer computes the other arrangement than its norm_first attribute says (pre-norm: x + f(norm(x)); "
    "post-norm: norm(x + f(x))): set norm_first to what forward does",
    ENCODER,
)
NO_RELU = Mistake(
    "feed-forward network without its ReLU",
    "the feed-forward network is W2 ReLU(W1 x + b1) + b2: without the ReLU its two linear layers collapse into one "
    "linear map, and the layer loses its only nonlinearity",
    ENCODER,
)
CACHED_CROSS_UNMASKED = Mistake(
    "source padding not masked in cached cross-attention",
    "with a cache, cross-attention still needs the source's padding mask: attend over cache.memory with src_mask. "
    "Without it the cached steps read the padded source positions that the uncached pass masks, so cached and "
    "uncached decoding differ wherever a source is padded",
    DECODER,
)
CACHED_KV_UNNORMED = Mistake(
    "cached keys and values projected from the un-normalised input",
    "in a pre-norm layer self-attention reads norm1(x), for its keys and values as for its queries: on the cached "
    "path project_kv must get the normalised newest position too, or cached decoding disagrees with the uncached pass",
    DECODER,
)
FIRST_POSITION = Mistake(
    "next token read from the first position",
    "the next token comes from the logits of the last position, logits[:, -1]: with the whole prefix as input the "
    "decoder returns one row of logits per position, and the first row predicts the word after <bos> at every step. "
    "With a cache there is one position only, which is why the cached decoding looks right",
    GREEDY,
)
MASK_IGNORED = Mistake(
    "padding mask ignored",
    "the encoder's self-attention did not use `mask`, so real tokens attend to <pad> positions and the "
    "output changes with the amount of padding",
    ENCODER,
)
SELF_CACHE_NOT_ADVANCED = Mistake(
    "self-attention cache not advanced",
    "with a cache, the newest position's keys and values must be appended to cache.self_attn and attention must "
    "read all of them: k, v = cache.self_attn.update(*project_kv(self.self_attn, h)). Attending to the newest "
    "position's own keys and values only makes every step forget the tokens before it",
    DECODER,
)
MEMORY_REPROJECTED = Mistake(
    "memory re-projected at every step",
    "the source sentence does not change while it is translated: project memory once, at the first step "
    "(cache.memory = project_kv(self.cross_attn, memory)), and reuse cache.memory at every later step. "
    "Calling cross_attn(h, memory, memory, ...) with a cache multiplies the whole source by W_k and W_v again",
    DECODER,
)
INPUTS_REPROJECTED = Mistake(
    "cached positions re-projected",
    "with a cache, x is the newest position only: project its keys and values (project_kv) and append them to "
    "the KVCache, which returns every earlier position's already projected. Projecting every position again at "
    "each step gives the right output with none of the saving",
    DECODER,
)
CACHE_NOT_ADVANCED = Mistake(
    "cache not advanced",
    "with use_cache=True the same cache must be passed to every step, each time with only the newest token "
    "(ys[:, -1:]): a fresh cache per step, or feeding the first token again, makes each step forget the "
    "tokens before it",
    GREEDY,
)
WHOLE_PREFIX = Mistake(
    "whole prefix fed with the cache",
    "with a cache, each step feeds only the newest token, ys[:, -1:]: the cache already holds the earlier "
    "positions, so feeding all of ys stores them again and gives every later token the wrong position and context",
    GREEDY,
)
NO_STOP = Mistake(
    "sequences not finished at <eos>",
    "once a sequence has produced <eos>, every later position of that row is <pad> (model.pad_id); "
    "keep a `finished` flag per row and stop when all rows are finished",
    GREEDY,
)
EOS_PADDED = Mistake(
    "<eos> itself replaced by <pad>",
    "the row's <eos> must stay in the output, followed by <pad>: mask the tokens of rows that were finished "
    "*before* this step, then mark the rows whose new token is <eos> (finished |= next_token == eos_id) after it",
    GREEDY,
)
FLOOR_IS_EPSILON = Mistake(
    "the smoothing share taken for the floor",
    "the floor is not ε itself: it is the lowest cross-entropy any prediction reaches against the smoothed target. "
    "Cross-entropy H(q, p) = H(q) + KL(q || p) is smallest when the prediction p equals the target q, so the floor "
    "is the entropy of the smoothed target, which depends on the number of classes as well as on ε",
    TRAINING,
)
TRUE_CLASS_SHARE = Mistake(
    "the true class left out of the ε/V share",
    "PyTorch spreads ε/V over every class, the true one included: the target puts 1 − ε + ε/V on the true class and "
    "ε/V on each of the V − 1 others. Putting 1 − ε on the true class (with ε/V or ε/(V − 1) on the others) is "
    "another convention, and another floor",
    TRAINING,
)
FLOOR_IN_BITS = Mistake(
    "entropy in bits (log2)",
    "nn.CrossEntropyLoss measures in nats, with the natural logarithm (log_softmax): the floor must use the same "
    "logarithm as the loss it bounds. log2 gives bits, larger by a factor 1/ln 2 ≈ 1.44",
    TRAINING,
)
ONE_HOT_FLOOR = Mistake(
    "the loss of a one-hot prediction",
    "a prediction that puts all its probability on the right word pays −(ε/V) · log 0 = ∞ for each of the other "
    "words, since the smoothed target asks for ε/V on every one of them. The best prediction is not the one-hot "
    "answer but the smoothed target itself, and the floor is that target's entropy",
    TRAINING,
)
LP_INVERTED = Mistake(
    "length penalty inverted",
    "the score of a finished hypothesis is its total log-probability divided by len ** length_penalty; "
    "multiplying makes long hypotheses (more negative sums) look even worse, which is the bias the penalty "
    "is there to remove",
    BEAM,
)
NO_LP = Mistake(
    "length penalty ignored",
    "finished hypotheses were compared by their total log-probability: every extra token makes the sum "
    "more negative, so the shortest hypothesis wins; divide by len ** length_penalty",
    BEAM,
)
SCORE_NOT_CUMULATIVE = Mistake(
    "hypotheses ranked by their last token, not their cumulative log-probability",
    "a hypothesis' log-probability is the sum over its tokens: add each hypothesis' running total to the "
    "log-probabilities of its extensions (scores[:, None] + log_probs) before choosing the best. Ranking by the "
    "last token's log-probability alone chooses greedily per step, and the score returned is that token's only",
    BEAM,
)
PROBABILITIES_ADDED = Mistake(
    "probabilities added instead of log-probabilities",
    "log p(y) is the sum of the tokens' log-probabilities (log_softmax), the log of the product of their "
    "probabilities; adding the probabilities themselves (softmax) gives a number that is no likelihood, and "
    "longer hypotheses get larger sums",
    BEAM,
)
LOGITS_ADDED = Mistake(
    "raw logits added instead of log-probabilities",
    "the logits are unnormalised scores: turn them into log-probabilities with log_softmax over the vocabulary "
    "before adding them up, or the sum depends on an arbitrary offset of each step's logits and is not log p(y)",
    BEAM,
)

# Sizes of the hidden inputs.
LAYER = dict(d_model=24, num_heads=4, d_ff=40)
EOS_BIAS = 3.0
MODEL = dict(src_vocab_size=17, tgt_vocab_size=19, d_model=32, num_heads=4, d_ff=48, num_layers=2, max_len=40)


# -- reference layers (the course's naming: self_attn/cross_attn.W_q..W_o, linear1/2, norm1/2/3) -------------
def _lin(p, name, x):
    return F.linear(x, p[f"{name}.weight"], p.get(f"{name}.bias"))


def _ln(p, name, x):
    return F.layer_norm(x, (x.shape[-1],), p[f"{name}.weight"], p[f"{name}.bias"])


def _mha(p, prefix, query, key, value, mask, h):
    B, Lq, D = query.shape
    Lk = key.shape[1]

    def heads(t, L):
        return t.view(B, L, h, D // h).transpose(1, 2)

    q = heads(_lin(p, f"{prefix}.W_q", query), Lq)
    k = heads(_lin(p, f"{prefix}.W_k", key), Lk)
    v = heads(_lin(p, f"{prefix}.W_v", value), Lk)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D // h)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, Lq, D)
    return _lin(p, f"{prefix}.W_o", out)


def _ffn(p, x, mistake=None):
    hidden = _lin(p, "linear1", x)
    return _lin(p, "linear2", hidden if mistake == "no_relu" else F.relu(hidden))


def _normed_residual(mistake, i):
    """Whether sublayer i adds its output to norm(x) (the mistake "residual": every sublayer; "residual:i": one)."""
    return mistake == "residual" or mistake == f"residual:{i}"


def _kept(mistake, i, x):
    """What sublayer i adds its output to: x, or nothing at all (the mistake "no_residual:i")."""
    return 0.0 if mistake == f"no_residual:{i}" else x


def reference_encoder_layer(p, x, mask, h, norm_first=True, mistake=None):
    attn_mask = None if mistake == "mask_ignored" else mask
    if norm_first:
        n = _ln(p, "norm1", x)
        x = (n if _normed_residual(mistake, 0) else _kept(mistake, 0, x)) + _mha(p, "self_attn", n, n, n, attn_mask, h)
        n = _ln(p, "norm2", x)
        return (n if _normed_residual(mistake, 1) else _kept(mistake, 1, x)) + _ffn(p, n, mistake)
    x = _ln(p, "norm1", _kept(mistake, 0, x) + _mha(p, "self_attn", x, x, x, attn_mask, h))
    return _ln(p, "norm2", _kept(mistake, 1, x) + _ffn(p, x, mistake))


def reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first=True, mistake=None):
    self_mask = None if mistake == "no_mask" else tgt_mask

    def cross(q):
        if mistake == "cross_from_decoder":
            return _mha(p, "cross_attn", q, q, q, None, h)
        if mistake == "cross_swapped":  # the source asks, the decoder answers (runs only where Ls == Lt)
            return _mha(p, "cross_attn", memory, q, q, None, h)
        if mistake == "cross_unmasked":
            return _mha(p, "cross_attn", q, memory, memory, None, h)
        return _mha(p, "cross_attn", q, memory, memory, src_mask, h)

    if norm_first:
        n = _ln(p, "norm1", x)
        kv = x if mistake == "kv_unnormed" else n  # keys and values from x itself: the cached path's mistake
        x = (n if _normed_residual(mistake, 0) else _kept(mistake, 0, x)) + _mha(p, "self_attn", n, kv, kv, self_mask, h)
        n = _ln(p, "norm2", x)
        x = (n if _normed_residual(mistake, 1) else _kept(mistake, 1, x)) + cross(n)
        n = _ln(p, "norm3", x)
        return (n if _normed_residual(mistake, 2) else _kept(mistake, 2, x)) + _ffn(p, n, mistake)
    x = _ln(p, "norm1", _kept(mistake, 0, x) + _mha(p, "self_attn", x, x, x, self_mask, h))
    x = _ln(p, "norm2", _kept(mistake, 1, x) + cross(x))
    return _ln(p, "norm3", _kept(mistake, 2, x) + _ffn(p, x, mistake))


def _decoder_cross_first(p, x, memory, tgt_mask, src_mask, h, norm_first, norms_move):
    """The decoder layer with cross-attention before self-attention; `norms_move`: each norm goes with its sublayer
    (norm2 before cross-attention), else the norms stay in their places (norm1 before cross-attention)."""
    first, second = ("norm2", "norm1") if norms_move else ("norm1", "norm2")

    def self_attn(q):
        return _mha(p, "self_attn", q, q, q, tgt_mask, h)

    def cross(q):
        return _mha(p, "cross_attn", q, memory, memory, src_mask, h)

    if norm_first:
        x = x + cross(_ln(p, first, x))
        x = x + self_attn(_ln(p, second, x))
        return x + _ffn(p, _ln(p, "norm3", x))
    x = _ln(p, first, x + cross(x))
    x = _ln(p, second, x + self_attn(x))
    return _ln(p, "norm3", x + _ffn(p, x))


def _mha_kv(p, prefix, query, k, v, mask, h):
    """Attention of `query` over keys and values already projected, (B, Lk, D) each."""
    B, Lq, D = query.shape

    def heads(t):
        return t.view(B, t.shape[1], h, D // h).transpose(1, 2)

    scores = heads(_lin(p, f"{prefix}.W_q", query)) @ heads(k).transpose(-2, -1) / math.sqrt(D // h)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return _lin(p, f"{prefix}.W_o", (scores.softmax(-1) @ heads(v)).transpose(1, 2).reshape(B, Lq, D))


def reference_last_step(old, new, x, memory, src_mask, h, norm_first=True, mistake=None):
    """The output at the last position of `x` when a cached decoder layer ran positions 0..T-2 with the weights `old`
    and the last one with `new` (only W_k and W_v differ): the earlier keys and values and the source's were projected
    with `old`. mistake "reproject_self" / "reproject_memory": those were projected again with `new`."""
    n = _ln(old, "norm1", x) if norm_first else x
    before = new if mistake == "reproject_self" else old
    k = torch.cat([_lin(before, "self_attn.W_k", n[:, :-1]), _lin(new, "self_attn.W_k", n[:, -1:])], dim=1)
    v = torch.cat([_lin(before, "self_attn.W_v", n[:, :-1]), _lin(new, "self_attn.W_v", n[:, -1:])], dim=1)
    source = new if mistake == "reproject_memory" else old
    mk, mv = _lin(source, "cross_attn.W_k", memory), _lin(source, "cross_attn.W_v", memory)
    last = x[:, -1:]
    if norm_first:
        x1 = last + _mha_kv(new, "self_attn", n[:, -1:], k, v, None, h)
        x2 = x1 + _mha_kv(new, "cross_attn", _ln(new, "norm2", x1), mk, mv, src_mask, h)
        return x2 + _ffn(new, _ln(new, "norm3", x2))
    x1 = _ln(new, "norm1", last + _mha_kv(new, "self_attn", last, k, v, None, h))
    x2 = _ln(new, "norm2", x1 + _mha_kv(new, "cross_attn", x1, mk, mv, src_mask, h))
    return _ln(new, "norm3", x2 + _ffn(new, x2))


def layer_params(g, d_model, d_ff, decoder=False):
    """Random weights in the course's naming; LayerNorm weights away from 1 so a missing norm shows."""
    p = {}
    for block in ("self_attn", "cross_attn") if decoder else ("self_attn",):
        for name in ("W_q", "W_k", "W_v", "W_o"):
            p[f"{block}.{name}.weight"] = torch.randn(d_model, d_model, generator=g) / math.sqrt(d_model)
            p[f"{block}.{name}.bias"] = torch.randn(d_model, generator=g) * 0.1
    p["linear1.weight"] = torch.randn(d_ff, d_model, generator=g) / math.sqrt(d_model)
    p["linear1.bias"] = torch.randn(d_ff, generator=g) * 0.1
    p["linear2.weight"] = torch.randn(d_model, d_ff, generator=g) / math.sqrt(d_ff)
    p["linear2.bias"] = torch.randn(d_model, generator=g) * 0.1
    for i in range(1, 4 if decoder else 3):
        p[f"norm{i}.weight"] = 1 + 0.3 * torch.randn(d_model, generator=g)
        p[f"norm{i}.bias"] = 0.1 * torch.randn(d_model, generator=g)
    return p


def to_torch_layer(p, d_model, h, d_ff, norm_first, decoder=False):
    """PyTorch's own layer holding the same weights (in_proj = W_q, W_k, W_v stacked; out_proj = W_o)."""
    cls = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    layer = cls(d_model, h, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first).eval()
    state = {}
    for ours, theirs in (("self_attn", "self_attn"), ("cross_attn", "multihead_attn")):
        if f"{ours}.W_q.weight" not in p:
            continue
        state[f"{theirs}.in_proj_weight"] = torch.cat([p[f"{ours}.W_{c}.weight"] for c in "qkv"])
        state[f"{theirs}.in_proj_bias"] = torch.cat([p[f"{ours}.W_{c}.bias"] for c in "qkv"])
        state[f"{theirs}.out_proj.weight"] = p[f"{ours}.W_o.weight"]
        state[f"{theirs}.out_proj.bias"] = p[f"{ours}.W_o.bias"]
    for k, v in p.items():
        if k.startswith(("linear", "norm")):
            state[k] = v
    layer.load_state_dict(state)
    return layer


def reference_decoder_mask(tgt, pad_id, mistake=None):
    L = tgt.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    if mistake == "upper":
        causal = causal.T
    keys = (tgt != pad_id)[:, None, None, :]
    if mistake == "no_causal":
        return keys.expand(-1, 1, L, L)
    if mistake == "no_padding":
        return causal.expand(tgt.shape[0], 1, L, L)
    if mistake == "pad_rows":
        return causal & (tgt != pad_id)[:, None, :, None]
    return causal & keys


# -- reference decoders on a Translator ---------------------------------------------------------------
@torch.no_grad()
def reference_greedy(model, src, max_len, mistake=None):
    memory, src_mask = model.encode(src)
    B = src.shape[0]
    ys = torch.full((B, 1), model.bos_id, dtype=torch.long)
    cache = model.new_cache()
    done = torch.zeros(B, dtype=torch.bool)
    for _step in range(max_len):
        if mistake == "cache_not_advanced":
            logits = model.decode(ys[:, -1:], memory, src_mask, model.new_cache())
        elif mistake == "whole_prefix":
            logits = model.decode(ys, memory, src_mask, cache)
        elif mistake == "first_position":  # uncached: every position's logits, and the first row read
            logits = model.decode(ys, memory, src_mask)[:, :1]
        else:
            logits = model.decode(ys[:, -1:], memory, src_mask, cache)
        nxt = logits[:, -1].argmax(-1)
        if mistake not in ("no_stop", "no_pad"):
            nxt = nxt.masked_fill(done, model.pad_id)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == model.eos_id
        if mistake != "no_stop" and done.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def reference_beam(model, src, beam_size, max_len, length_penalty=1.0, mistake=None):
    def final(logp, n):
        if mistake == "lp_inverted":
            return logp * n ** length_penalty
        if mistake == "no_lp":
            return logp
        return logp / n ** length_penalty

    memory, src_mask = model.encode(src)
    beams = torch.full((1, 1), model.bos_id, dtype=torch.long)
    scores = torch.zeros(1)
    finished = []
    for _step in range(max_len):
        k = beams.shape[0]
        logits = model.decode(beams, memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1))
        logp = logits[:, -1].log_softmax(-1)
        V = logp.shape[-1]
        top, idx = (scores[:, None] + logp).flatten().topk(min(beam_size, k * V))
        beams = torch.cat([beams[idx // V], (idx % V)[:, None]], dim=1)
        scores = top
        ended = beams[:, -1] == model.eos_id
        n = beams.shape[1] - 1
        finished += [(beams[b, 1:], final(scores[b].item(), n)) for b in ended.nonzero().flatten().tolist()]
        beams, scores = beams[~ended], scores[~ended]
        if beams.shape[0] == 0:
            break
    n = beams.shape[1] - 1
    finished += [(beams[b, 1:], final(scores[b].item(), n)) for b in range(beams.shape[0])]
    best = max(range(len(finished)), key=lambda i: finished[i][1])
    tokens = finished[best][0]
    true_score = reference_score(model, src, tokens, length_penalty)
    return tokens, true_score


@torch.no_grad()
def reference_log_prob(model, src, tokens):
    """log p(tokens | src) (tokens after <bos>), by teacher forcing."""
    memory, src_mask = model.encode(src)
    tgt = torch.cat([torch.tensor([model.bos_id]), tokens])[None]
    logp = model.decode(tgt[:, :-1], memory, src_mask).log_softmax(-1)[0]
    return logp.gather(-1, tokens[:, None]).sum().item()


@torch.no_grad()
def _token_terms(model, src, tokens):
    """Per returned token: its raw logit, its log-probability and its probability, by teacher forcing."""
    memory, src_mask = model.encode(src)
    tgt = torch.cat([torch.tensor([model.bos_id]), tokens])[None]
    logits = model.decode(tgt[:, :-1], memory, src_mask)[0]
    chosen = tokens[:, None]
    logp = logits.log_softmax(-1).gather(-1, chosen)[:, 0]
    return logits.gather(-1, chosen)[:, 0], logp, logp.exp()


@torch.no_grad()
def reference_score(model, src, tokens, length_penalty):
    """The length-normalised log-probability of `tokens` (after <bos>) given `src`."""
    memory, src_mask = model.encode(src)
    tgt = torch.cat([torch.tensor([model.bos_id]), tokens])[None]
    logp = model.decode(tgt[:, :-1], memory, src_mask).log_softmax(-1)[0]
    total = logp.gather(-1, tokens[:, None]).sum().item()
    return total / len(tokens) ** length_penalty


def model_params(g):
    """Weights for the hidden decoding tests: random, shaped so that the tokens depend on the source and on the
    tokens before them, and an <eos> bias that ends some (not all) sequences within 12 steps."""
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
    model = Translator(**MODEL).eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    d, V = MODEL["d_model"], MODEL["tgt_vocab_size"]
    state["generator.weight"] = torch.randn(V, d, generator=g) * 0.6
    state["generator.bias"] = torch.zeros(V)
    state["generator.bias"][[model.pad_id, model.bos_id]] = -10.0  # a trained model never predicts these
    state["generator.bias"][model.eos_id] = EOS_BIAS
    for name in state:  # a strong cross-attention and a faint target embedding: the output depends on the source
        if ".multihead_attn." in name and name.endswith("weight"):
            state[name] = state[name] * 6
    state["tgt_embed.weight"] = state["tgt_embed.weight"] * 0.2
    return state


def local_model(state):
    model = Translator(**MODEL).eval()
    model.load_state_dict(state)
    return model


def _sources(g, B, lengths, vocab):
    src = torch.randint(4, vocab, (B, max(lengths) + 2), generator=g)
    src[:, 0] = 1
    for b, n in enumerate(lengths):
        src[b, n + 1] = 2
        src[b, n + 2:] = 0
    return src


def make_references() -> dict[str, torch.Tensor]:
    """Hidden inputs and expected outputs; `attn references 08_transformer_translator` stores them."""
    g = torch.Generator().manual_seed(80808)
    refs: dict[str, torch.Tensor] = {}
    tgt = torch.randint(3, 30, (3, 7), generator=g)
    tgt[0, 5:] = 0
    tgt[1, 2:] = 0
    refs["mask.tgt"] = tgt
    refs["mask.out"] = reference_decoder_mask(tgt, 0)
    d, h, ff = LAYER["d_model"], LAYER["num_heads"], LAYER["d_ff"]
    for kind in ("enc", "dec"):
        p = layer_params(g, d, ff, decoder=kind == "dec")
        refs.update({f"{kind}.{k}": v for k, v in p.items()})
    refs["enc.x"] = torch.randn(2, 6, d, generator=g)
    refs["enc.mask"] = (torch.arange(6) < torch.tensor([6, 4])[:, None])[:, None, None, :]
    for norm_first in (True, False):
        refs[f"enc.out.{int(norm_first)}"] = reference_encoder_layer(
            _strip(refs, "enc"), refs["enc.x"], refs["enc.mask"], h, norm_first)
    refs["dec.x"] = torch.randn(2, 5, d, generator=g)
    refs["dec.memory"] = torch.randn(2, 7, d, generator=g)
    refs["dec.src_mask"] = (torch.arange(7) < torch.tensor([7, 3])[:, None])[:, None, None, :]
    dec_tgt = torch.tensor([[1, 5, 6, 7, 8], [1, 5, 6, 0, 0]])
    refs["dec.tgt_mask"] = reference_decoder_mask(dec_tgt, 0)
    for norm_first in (True, False):
        refs[f"dec.out.{int(norm_first)}"] = reference_decoder_layer(
            _strip(refs, "dec"), refs["dec.x"], refs["dec.memory"], refs["dec.tgt_mask"], refs["dec.src_mask"], h,
            norm_first)
    state = model_params(g)
    refs.update({f"model.{k}": v for k, v in state.items()})
    model = local_model(state)
    src = _sources(g, 6, [6, 3, 9, 4, 7, 8], MODEL["src_vocab_size"])
    refs["greedy.src"] = src
    refs["greedy.out"] = reference_greedy(model, src, 12)
    return refs


def _strip(refs, prefix):
    n = len(prefix) + 1
    return {k[n:]: v for k, v in refs.items() if k.startswith(prefix + ".") and ("_attn." in k or
                                                                              k[n:].startswith(("linear", "norm")))}


# -- helpers -------------------------------------------------------------------------------------------
def _build(cls, what, *args):
    module = cls(*args)
    if not isinstance(module, nn.Module):
        raise CheckFailure(_("{what} should be an nn.Module (subclass torch.nn.Module), got {type}.").format(
            what=what, type=type_name(module)))
    return module


def _norm_first(module, what):
    value = module.norm_first
    if not isinstance(value, bool):
        raise CheckFailure(_("{what}.norm_first should be True (pre-norm) or False (post-norm), got {value}.").format(
            what=what, value=repr(value)))
    return value


ENC_NEEDS = N_("self_attn (a MultiHeadAttention with W_q, W_k, W_v, W_o), linear1 (d_model -> d_ff), "
               "linear2 (d_ff -> d_model), norm1 and norm2 (nn.LayerNorm)")
DEC_NEEDS = N_("self_attn and cross_attn (MultiHeadAttention, each with W_q, W_k, W_v, W_o), linear1, linear2, "
               "norm1, norm2 and norm3")


def _layer(cls, p, decoder):
    d, h, ff = LAYER["d_model"], LAYER["num_heads"], LAYER["d_ff"]
    what = "DecoderLayer" if decoder else "EncoderLayer"
    module = _build(cls, what, d, h, ff, 0.0).eval()
    load_weights(module, p, DEC_NEEDS if decoder else ENC_NEEDS)
    return module, _norm_first(module, what)


# -- hidden tests ----------------------------------------------------------------------------------------
def test_decoder_mask(check, refs, decoder_mask):
    with check("matches the reference on a hidden batch (B=3, L=7, padding of different lengths)"):
        tgt = refs["mask.tgt"]
        check.close(decoder_mask(tgt, 0), refs["mask.out"], "decoder_mask(tgt, 0)",
                    mistakes={m: reference_decoder_mask(tgt, 0, k) for m, k in (
                        (NO_CAUSAL_MASK, "no_causal"), (NO_PADDING, "no_padding"), (PAD_ROWS, "pad_rows"),
                        (UPPER, "upper"))})
    with check("works with another pad_id and longer sequences (pad_id=3, L=11)", weight=2):
        tgt = torch.randint(4, 50, (4, 11))
        for b, n in enumerate((11, 1, 6, 9)):
            tgt[b, n:] = 3
        check.close(decoder_mask(tgt, 3), reference_decoder_mask(tgt, 3), "decoder_mask(tgt, pad_id=3)",
                    mistakes={m: reference_decoder_mask(tgt, 3, k) for m, k in (
                        (NO_CAUSAL_MASK, "no_causal"), (NO_PADDING, "no_padding"), (PAD_ROWS, "pad_rows"),
                        (UPPER, "upper"))})
    with check("leaves the target ids unchanged"):
        tgt = torch.randint(1, 9, (2, 5))
        before = tgt.clone()
        decoder_mask(tgt, 0)
        check.true(torch.equal(tgt, before), "decoder_mask changed its tgt argument: build a new tensor instead.")


def _nearest(actual, variants):
    """The variant `actual` reproduces, else the first (one catalogue entry standing for several forms)."""
    if isinstance(actual, torch.Tensor):
        for v in variants:
            if v.shape == actual.shape and torch.allclose(actual.detach(), v, atol=1e-4):
                return v
    return variants[0]


def _encoder_mistakes(p, x, mask, h, norm_first, actual=None):
    residual = [reference_encoder_layer(p, x, mask, h, norm_first, m) for m in ("residual", "residual:0", "residual:1")]
    return {
        RESIDUAL_NORMED: _nearest(actual, residual) if norm_first else None,
        NORM_MISMATCH: reference_encoder_layer(p, x, mask, h, not norm_first),
        MASK_IGNORED: reference_encoder_layer(p, x, mask, h, norm_first, "mask_ignored"),
        NO_RESIDUAL: _nearest(actual, [reference_encoder_layer(p, x, mask, h, norm_first, f"no_residual:{i}")
                                       for i in (0, 1)]),
        NO_RELU: reference_encoder_layer(p, x, mask, h, norm_first, "no_relu"),
    }


def _drop_none(d):
    return {k: v for k, v in d.items() if v is not None}


def test_encoder_layer(check, refs, EncoderLayer):
    h = LAYER["num_heads"]
    p = _strip(refs, "enc")
    with check("supplied weights reproduce the stored output (pre- or post-norm, as norm_first says)", weight=2):
        layer, norm_first = _layer(EncoderLayer, p, decoder=False)
        x, mask = refs["enc.x"], refs["enc.mask"]
        with torch.no_grad():
            out = layer(x, mask)
        check.close(out, refs[f"enc.out.{int(norm_first)}"], "EncoderLayer output (hidden input)",
                    mistakes=_drop_none(_encoder_mistakes(p, x, mask, h, norm_first, out)), atol=1e-4)
    with check("equals torch.nn.TransformerEncoderLayer with the same weights on fresh inputs", weight=2):
        layer, norm_first = _layer(EncoderLayer, p, decoder=False)
        reference = to_torch_layer(p, LAYER["d_model"], h, LAYER["d_ff"], norm_first)
        x = torch.randn(3, 9, LAYER["d_model"])
        mask = (torch.arange(9) < torch.tensor([9, 2, 5])[:, None])[:, None, None, :]
        with torch.no_grad():
            out = layer(x, mask)
            want = reference(x, src_mask=torch_mask(mask.expand(3, 1, 9, 9), h))
        check.close(out, want, "EncoderLayer output vs PyTorch's", atol=1e-4,
                    mistakes=_drop_none(_encoder_mistakes(p, x, mask, h, norm_first, out)))
    with check("dropout is off in eval mode: EncoderLayer(..., dropout=0.5).eval() is deterministic"):
        layer = _build(EncoderLayer, "EncoderLayer", LAYER["d_model"], h, LAYER["d_ff"], 0.5).eval()
        load_weights(layer, p, ENC_NEEDS)
        x = torch.randn(2, 4, LAYER["d_model"])
        with torch.no_grad():
            first, second = layer(x, None), layer(x, None)
        check.close(second, first, "a second call in eval mode")
    with check("leaves its input unchanged"):
        layer, _norm_first = _layer(EncoderLayer, p, decoder=False)
        x = torch.randn(2, 4, LAYER["d_model"])
        before = x.clone()
        with torch.no_grad():
            layer(x, None)
        check.true(torch.equal(x, before), "EncoderLayer changed x in place (x += ...): write x = x + ... instead.")


def _decoder_mistakes(p, x, memory, tgt_mask, src_mask, h, norm_first, actual=None):
    args = (p, x, memory, tgt_mask, src_mask, h, norm_first)
    residual = [reference_decoder_layer(*args, m) for m in ("residual", "residual:0", "residual:1", "residual:2")]
    return _drop_none({
        DECODER_NO_MASK: reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first, "no_mask"),
        CROSS_FROM_DECODER: reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first,
                                                    "cross_from_decoder"),
        CROSS_SWAPPED: (reference_decoder_layer(*args, "cross_swapped") if x.shape[1] == memory.shape[1] else None),
        RESIDUAL_NORMED: _nearest(actual, residual) if norm_first else None,
        NORM_MISMATCH: reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, not norm_first),
        NO_RESIDUAL: _nearest(actual, [reference_decoder_layer(*args, f"no_residual:{i}") for i in (0, 1, 2)]),
        CROSS_UNMASKED: reference_decoder_layer(*args, "cross_unmasked") if src_mask is not None else None,
        SUBLAYER_ORDER: _nearest(actual, [_decoder_cross_first(*args, moved) for moved in (False, True)]),
        NO_RELU: reference_decoder_layer(*args, "no_relu"),
    })


def test_decoder_layer(check, refs, DecoderLayer, LayerCache):
    h, d = LAYER["num_heads"], LAYER["d_model"]
    p = _strip(refs, "dec")
    with check("supplied weights reproduce the stored output (causal + padding masks, Ls != Lt)", weight=2):
        layer, norm_first = _layer(DecoderLayer, p, decoder=True)
        args = refs["dec.x"], refs["dec.memory"], refs["dec.tgt_mask"], refs["dec.src_mask"]
        with torch.no_grad():
            out = layer(*args)
        check.close(out, refs[f"dec.out.{int(norm_first)}"], "DecoderLayer output (hidden input)", atol=1e-4,
                    mistakes=_decoder_mistakes(p, *args, h, norm_first, out))
    with check("equals torch.nn.TransformerDecoderLayer with the same weights (no source padding)", weight=2):
        layer, norm_first = _layer(DecoderLayer, p, decoder=True)
        reference = to_torch_layer(p, d, h, LAYER["d_ff"], norm_first, decoder=True)
        x, memory = torch.randn(2, 6, d), torch.randn(2, 8, d)
        tgt_mask = torch.ones(6, 6, dtype=torch.bool).tril()[None, None].expand(2, 1, 6, 6)
        with torch.no_grad():
            out = layer(x, memory, tgt_mask, None)
            want = reference(x, memory, tgt_mask=torch_mask(tgt_mask, h))
        check.close(out, want, "DecoderLayer output vs PyTorch's", atol=1e-4,
                    mistakes=_decoder_mistakes(p, x, memory, tgt_mask, None, h, norm_first, out))
    with check("cross-attention: the decoder asks, the source answers (Ls = Lt, so swapped arguments would run)"):
        layer, norm_first = _layer(DecoderLayer, p, decoder=True)
        x, memory = torch.randn(2, 5, d), torch.randn(2, 5, d)
        tgt_mask = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
        with torch.no_grad():
            out = layer(x, memory, tgt_mask, None)
        check.close(out, reference_decoder_layer(p, x, memory, tgt_mask, None, h, norm_first),
                    "DecoderLayer output with a source as long as the target", atol=1e-4,
                    mistakes=_decoder_mistakes(p, x, memory, tgt_mask, None, h, norm_first, out))
    with check("with a cache, one position at a time equals the full causal pass", weight=2):
        layer, norm_first = _layer(DecoderLayer, p, decoder=True)
        x, memory = torch.randn(2, 5, d), torch.randn(2, 4, d)
        src_mask = (torch.arange(4) < torch.tensor([4, 2])[:, None])[:, None, None, :]
        tgt_mask = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
        want = reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first)
        forgetful = reference_decoder_layer(p, x, memory, torch.eye(5, dtype=torch.bool)[None, None], src_mask, h,
                                            norm_first)  # each position attending to itself only
        cache = LayerCache()  # with the course's own KVCache stand-in: a bug in your KVCache costs only 06
        with torch.no_grad():
            steps = [layer(x[:, t:t + 1], memory, None, src_mask, cache=cache) for t in range(5)]
        got = torch.cat([s for s in steps], dim=1)
        unmasked = reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first, "cross_unmasked")
        check.close(got, want, "outputs of cached decoding, one position at a time", atol=1e-4,
                    mistakes=_drop_none({
                        SELF_CACHE_NOT_ADVANCED: forgetful, CACHED_CROSS_UNMASKED: unmasked,
                        CACHED_KV_UNNORMED: (reference_decoder_layer(p, x, memory, tgt_mask, src_mask, h, norm_first,
                                                                     "kv_unnormed") if norm_first else None)}))
    with check("the cache saves work: each position's keys and values projected once, memory's once per sentence"):
        # Change W_k and W_v before the last step: a real cache keeps the earlier positions' (and the source's) keys
        # and values as they were projected; a layer that re-projects them at every step uses the new weights.
        layer, norm_first = _layer(DecoderLayer, p, decoder=True)
        g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
        B, T, Ls = 2, 5, 4
        x, memory, cache = torch.randn(B, T, d, generator=g), torch.randn(B, Ls, d, generator=g), LayerCache()
        src_mask = (torch.arange(Ls) < torch.tensor([Ls, 3])[:, None])[:, None, None, :]
        changed = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in p.items()
                   if k.split(".")[0] in ("self_attn", "cross_attn") and k.split(".")[1] in ("W_k", "W_v")}
        new = {**p, **changed}
        with torch.no_grad():
            for t in range(T - 1):
                layer(x[:, t:t + 1], memory, None, src_mask, cache=cache)
            load_weights(layer, changed, DEC_NEEDS)
            got = layer(x[:, T - 1:], memory, None, src_mask, cache=cache)
        want = reference_last_step(p, new, x, memory, src_mask, h, norm_first)
        check.close(got, want, "the last step's output after W_k and W_v changed", atol=1e-4, mistakes={
            INPUTS_REPROJECTED: reference_last_step(p, new, x, memory, src_mask, h, norm_first, "reproject_self"),
            MEMORY_REPROJECTED: reference_last_step(p, new, x, memory, src_mask, h, norm_first, "reproject_memory")})
        check.true(len(cache) == T,
                   _("after {T} steps the cache holds {n} positions, not {T}").format(T=T, n=len(cache)),
                   SELF_CACHE_NOT_ADVANCED)
    with check("dropout is off in eval mode, and the inputs are left unchanged"):
        layer = _build(DecoderLayer, "DecoderLayer", d, h, LAYER["d_ff"], 0.5).eval()
        load_weights(layer, p, DEC_NEEDS)
        x, memory = torch.randn(2, 3, d), torch.randn(2, 4, d)
        before = x.clone(), memory.clone()
        with torch.no_grad():
            first, second = layer(x, memory, None, None), layer(x, memory, None, None)
        check.close(second, first, "a second call in eval mode")
        check.true(torch.equal(x, before[0]) and torch.equal(memory, before[1]),
                   "DecoderLayer changed x or memory in place: write x = x + ... instead of x += ...")


def _worker_model(Translator_, refs):
    model = Translator_(**MODEL)
    state = {k[len("model."):]: v for k, v in refs.items() if k.startswith("model.")}
    model.load_state_dict(state)
    model.eval()
    return model, local_model(state)


def _tokens(result, what):
    if not isinstance(result, torch.Tensor):
        raise CheckFailure(_("{what} should return a tensor of token ids, got {type}.").format(
            what=what, type=type_name(result)))
    if result.dtype != torch.long:
        raise CheckFailure(_("{what} should return token ids as torch.long, got {dtype}.").format(
            what=what, dtype=result.dtype))
    return result


def _no_stop(actual, local, src, max_len):
    """Rows that go on after <eos>: to max_len, or until every row has ended (nothing padded after <eos>)."""
    return _nearest(actual, [reference_greedy(local, src, max_len, m) for m in ("no_stop", "no_pad")])


def _eos_padded(local, want):
    """{EOS_PADDED: the expected tokens with every <eos> turned into <pad>}."""
    return {EOS_PADDED: want.masked_fill(want == local.eos_id, local.pad_id)}


def _whole_prefix(local, src, max_len):
    """{WHOLE_PREFIX: its tokens}, or nothing where the duplicated positions outgrow the model's max_len."""
    try:
        return {WHOLE_PREFIX: reference_greedy(local, src, max_len, "whole_prefix")}
    except ValueError:
        return {}


def test_greedy_decode(check, refs, greedy_decode, Translator_):
    src = refs["greedy.src"]
    with check("with the cache: the stored tokens for a hidden batch (6 sentences, a hidden model)", weight=2):
        model, local = _worker_model(Translator_, refs)
        got = _tokens(greedy_decode(model, src, 12, use_cache=True), "greedy_decode")
        check.close(got, refs["greedy.out"], "greedy_decode(model, src, 12)", mistakes={
            CACHE_NOT_ADVANCED: reference_greedy(local, src, 12, "cache_not_advanced"),
            **_whole_prefix(local, src, 12), **_eos_padded(local, refs["greedy.out"]),
            NO_STOP: _no_stop(got, local, src, 12)})
    with check("without the cache: the same tokens"):
        model, local = _worker_model(Translator_, refs)
        got = _tokens(greedy_decode(model, src, 12, use_cache=False), "greedy_decode(..., use_cache=False)")
        check.close(got, refs["greedy.out"], "greedy_decode(model, src, 12, use_cache=False)",
                    mistakes={NO_STOP: _no_stop(got, local, src, 12), **_eos_padded(local, refs["greedy.out"]),
                              FIRST_POSITION: reference_greedy(local, src, 12, "first_position")})
    with check("fresh sources, max_len 3 and 20: cached equals uncached equals the reference", weight=2):
        model, local = _worker_model(Translator_, refs)
        g = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,))))
        fresh = _sources(g, 4, [int(n) for n in torch.randint(1, 10, (4,))], MODEL["src_vocab_size"])
        for max_len in (20, 3):
            with check.case():
                want = reference_greedy(local, fresh, max_len)
                for use_cache in (True, False):
                    got = _tokens(greedy_decode(model, fresh, max_len, use_cache=use_cache), "greedy_decode")
                    wrong = {NO_STOP: _no_stop(got, local, fresh, max_len), **_eos_padded(local, want)}
                    if use_cache:  # a cache that is never advanced shows only where the cache is used
                        wrong[CACHE_NOT_ADVANCED] = reference_greedy(local, fresh, max_len, "cache_not_advanced")
                        wrong.update(_whole_prefix(local, fresh, max_len))
                    else:  # with a cache the first position is the last: that mistake shows only without one
                        wrong[FIRST_POSITION] = reference_greedy(local, fresh, max_len, "first_position")
                    check.close(got, want, f"greedy_decode(model, src, {max_len}, use_cache={use_cache})",  # code
                                mistakes=wrong)
    with check("leaves src unchanged"):
        model, _local = _worker_model(Translator_, refs)
        before = src.clone()
        greedy_decode(model, src, 5)
        check.true(torch.equal(src, before), "greedy_decode changed src in place.")


def _beam(beam_search, model, src, k, max_len, lp, what):
    result = beam_search(model, src, k, max_len, lp)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise CheckFailure(_("{what} should return a tuple (tokens, score), got {type}.").format(
            what=what, type=type_name(result)))
    tokens, score = result
    tokens = _tokens(tokens, what)
    if tokens.dim() != 1:
        raise CheckFailure(_("{what}: tokens should be 1-D (T,), got shape {shape}.").format(
            what=what, shape=tuple(tokens.shape)))
    if isinstance(score, torch.Tensor) and score.numel() == 1:
        score = score.item()
    if not isinstance(score, (int, float)) or isinstance(score, bool):
        raise CheckFailure(_("{what}: the score should be a number, got {type}.").format(what=what,
                                                                                         type=type_name(score)))
    return tokens, float(score)


def test_beam_search(check, refs, beam_search, Translator_):
    src_all = refs["greedy.src"]
    with check("beam_size=1 is greedy decoding (hidden sources)"):
        model, local = _worker_model(Translator_, refs)
        for b in range(src_all.shape[0]):
            src = src_all[b:b + 1]
            tokens, _score = _beam(beam_search, model, src, 1, 12, 1.0, "beam_search(model, src, 1, 12, 1.0)")
            want = reference_greedy(local, src, 12)[0]
            check.close(tokens, want, _("beam_search with beam_size=1, sentence {b}").format(b=b))
    with check("beam_size 3 and 5 (length_penalty 1.0 and 0.6): one finished hypothesis, scored "
               "log p(tokens) / len(tokens) ** length_penalty as the model computes it", weight=3):
        # Properties every correct beam search has, whichever variant (a shrinking beam, a full beam of the top
        # 2k as in fairseq and Hugging Face, an early stop): the tokens are one finished hypothesis and the score
        # is that hypothesis' length-normalised log-probability.
        model, local = _worker_model(Translator_, refs)
        for lp in (1.0, 0.6):
            for k in (5, 3):
                for b in (0, 1, 3, 4):
                    with check.case():
                        src = src_all[b:b + 1]
                        what = _("beam_search(model, src, {k}, 12, {lp}), sentence {b}").format(k=k, lp=lp, b=b)
                        tokens, score = _beam(beam_search, model, src, k, 12, lp, what)
                        listed = tokens.tolist()
                        check.true(len(listed) >= 1 and (listed[-1] == local.eos_id or len(listed) == 12),
                                   _("{what}: the tokens should end with <eos> (id {eos}) or be max_len long; got {n} "
                                     "tokens ending in {end}").format(what=what, eos=local.eos_id, n=len(listed),
                                                                      end=listed[-1:]))
                        check.true(local.eos_id not in listed[:-1],
                                   _("{what}: <eos> in the middle of the tokens: a hypothesis that produced <eos> is "
                                     "finished and is not extended").format(what=what))
                        check.true(local.pad_id not in listed and local.bos_id not in listed,
                                   _("{what}: the tokens contain <pad> or <bos>: return the hypothesis without "
                                     "<bos>").format(what=what))
                        logp, n = reference_log_prob(local, src, tokens), len(listed)
                        raw, token_logp, prob = _token_terms(local, src, tokens)
                        check.close(torch.tensor(score), torch.tensor(logp / n ** lp),
                                    _("score of the returned tokens, {what}").format(what=what),
                                    atol=1e-4, mistakes={LP_INVERTED: torch.tensor(logp * n ** lp),
                                                         NO_LP: torch.tensor(logp),
                                                         SCORE_NOT_CUMULATIVE: token_logp[-1] / n ** lp,
                                                         PROBABILITIES_ADDED: prob.sum() / n ** lp,
                                                         LOGITS_ADDED: raw.sum() / n ** lp})


# -- label_smoothing_floor: a prediction checked by the training run ------------------------------------------
def reference_floor(V: int, eps: float, mistake: str | None = None) -> float:
    """The entropy of PyTorch's smoothed target (1 − ε + ε/V on the true class, ε/V on the others), in nats; or what
    a catalogued mistake computes."""
    def h(ps):  # entropy of the probabilities `ps` given as (value, how many), 0 · log 0 = 0
        log = math.log2 if mistake == "log2" else math.log
        return -sum(n * p * log(p) for p, n in ps if p > 0)

    if mistake == "epsilon":
        return eps
    if mistake == "one_hot":
        return math.inf if eps > 0 else 0.0
    if mistake == "no_true_share":  # 1 − ε on the true class, ε/V on the others (sums to 1 − ε/V)
        return h([(1 - eps, 1), (eps / V, V - 1)])
    if mistake == "other_convention":  # 1 − ε on the true class, ε/(V − 1) on the others
        return h([(1 - eps, 1), (eps / (V - 1), V - 1)])
    return h([(1 - eps + eps / V, 1), (eps / V, V - 1)])


def _floor_value(answer, what):
    """The learner's floor as a float64 0-d tensor (a Python number or a 0-d tensor), else a failure that says why."""
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        return answer.detach().reshape(()).double()
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return torch.tensor(float(answer), dtype=torch.float64)
    raise CheckFailure(_("{what} should return a number (a float), got {type}.").format(what=what,
                                                                                       type=type_name(answer)))


def _floor_mistakes(V, eps, actual):
    wrong = {FLOOR_IS_EPSILON: reference_floor(V, eps, "epsilon"), FLOOR_IN_BITS: reference_floor(V, eps, "log2"),
             ONE_HOT_FLOOR: reference_floor(V, eps, "one_hot")}
    forms = [reference_floor(V, eps, m) for m in ("no_true_share", "other_convention")]
    wrong[TRUE_CLASS_SHARE] = min(forms, key=lambda f: abs(f - float(actual)) if math.isfinite(float(actual)) else 0)
    return {m: torch.tensor(v, dtype=torch.float64) for m, v in wrong.items()}


FLOOR_TOLERANCE = dict(rtol=1e-5, atol=1e-6)  # float32 arithmetic on the learner's side stays well inside this


def test_label_smoothing_floor(check, refs, label_smoothing_floor):
    with check("the floor for hidden vocabulary sizes and smoothing shares", weight=3):
        cases = [(289, 0.1), (32_000, 0.1), (int(torch.randint(3, 60, ())), round(float(torch.rand(())) * 0.8 + 0.1, 3)),
                 (int(torch.randint(100, 5000, ())), round(float(torch.rand(())) * 0.3 + 0.01, 3)), (2, 0.5)]
        for V, eps in cases:
            with check.case():
                what = f"label_smoothing_floor({V}, {eps})"
                got = _floor_value(label_smoothing_floor(V, eps), what)
                check.close(got, torch.tensor(reference_floor(V, eps), dtype=torch.float64), what,
                            mistakes=_floor_mistakes(V, eps, got), **FLOOR_TOLERANCE)
    with check("the edges: ε = 0 gives 0 (not NaN: 0 · log 0 counts as 0), ε = 1 gives log V", weight=0.5):
        for V in (7, 1000):
            with check.case():
                zero = _floor_value(label_smoothing_floor(V, 0.0), f"label_smoothing_floor({V}, 0.0)")
                check.true(not torch.isnan(zero), _(
                    "label_smoothing_floor({V}, 0.0) is NaN: with ε = 0 the other classes have probability 0, and "
                    "0 · log 0 is NaN in floating point although its limit, and the entropy's convention, is 0. "
                    "Leave out the terms whose probability is 0.").format(V=V))
                check.close(zero, torch.tensor(0.0, dtype=torch.float64), f"label_smoothing_floor({V}, 0.0)",
                            mistakes={FLOOR_IS_EPSILON: torch.tensor(0.0, dtype=torch.float64)}, **FLOOR_TOLERANCE)
                one = _floor_value(label_smoothing_floor(V, 1.0), f"label_smoothing_floor({V}, 1.0)")
                check.close(one, torch.tensor(math.log(V), dtype=torch.float64), f"label_smoothing_floor({V}, 1.0)",
                            mistakes=_floor_mistakes(V, 1.0, one), **FLOOR_TOLERANCE)
    with check("ε outside [0, 1] and fewer than 2 classes raise ValueError", weight=0.5):
        for args, why in (((100, -0.1), _("ε is a share of the target's probability, so it lies in [0, 1]")),
                          ((100, 1.5), _("ε is a share of the target's probability, so it lies in [0, 1]")),
                          ((1, 0.1), _("one class leaves nothing to spread ε over: a vocabulary has at least 2")),
                          ((0, 0.1), _("one class leaves nothing to spread ε over: a vocabulary has at least 2"))):
            with check.case():
                try:
                    label_smoothing_floor(*args)
                    raised = False
                except ValueError:
                    raised = True
                check.true(raised, _("label_smoothing_floor{args} should raise ValueError: {why}.").format(
                    args=args, why=why))
    with check("grows with ε, and with V (a target spread over more classes is less certain)", weight=0.5):
        shares = [label_smoothing_floor(50, e) for e in (0.05, 0.2, 0.5, 0.9)]
        sizes = [label_smoothing_floor(v, 0.1) for v in (10, 100, 10_000)]
        values = [float(_floor_value(x, "label_smoothing_floor")) for x in shares + sizes]
        check.true(all(a < b for a, b in zip(values[:4], values[1:4])),
                   _("label_smoothing_floor(50, ε) should grow with ε (ε = 0.05, 0.2, 0.5, 0.9): the more of the "
                     "target is spread out, the less certain it is and the higher its entropy."))
        check.true(all(a < b for a, b in zip(values[4:], values[5:])),
                   _("label_smoothing_floor(V, 0.1) should grow with V (V = 10, 100, 10 000): the same ε spread "
                     "over more classes makes the target less certain."))


HIDDEN_TESTS = {
    "decoder_mask": test_decoder_mask,
    "EncoderLayer": test_encoder_layer,
    "DecoderLayer": test_decoder_layer,
    "greedy_decode": test_greedy_decode,
    "label_smoothing_floor": test_label_smoothing_floor,
    "beam_search": test_beam_search,
}
