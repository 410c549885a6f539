"""The translator of notebook 08: a Transformer assembled from the learner's own parts, trained on the CPU.

What lives here is plumbing that is not an exercise: finding the learner's parts in their earlier notebooks
(`load_parts`), the embeddings-to-logits wrapper (`Translator`), batches, the training loop with a progress bar,
checkpoints and BLEU, and attention capture for the heatmaps. The exercises of notebook 08 (the decoder's mask, the
encoder and decoder layers, greedy decoding, beam search) are the learner's; where the course needs stand-ins for
them (grading one exercise without the learner's other answers) it uses PyTorch's own layers.

Interfaces the learner's parts plug into (masks are boolean, True = may attend):

- ``EncoderLayer(d_model, num_heads, d_ff, dropout)``: ``layer(x, mask) -> x``, ``x`` (B, L, d_model), ``mask``
  (B, 1, 1, L) or (B, 1, L, L).
- ``DecoderLayer(d_model, num_heads, d_ff, dropout)``: ``layer(x, memory, tgt_mask, src_mask, cache=None) -> x``.
  With a cache (a :class:`LayerCache`), ``x`` holds only the newest position. The self-attention projects the
  newest position's keys and values once (``project_kv``) and appends them to ``cache.self_attn`` (a KVCache with
  notebook 06's interface: ``update(k_new, v_new) -> (k, v)``, ``len()``); the cross-attention projects ``memory``
  once per sentence into ``cache.memory`` and reuses it at every later step; ``attend`` runs attention on keys and
  values that are already projected.
- ``Translator.encode(src) -> (memory, src_mask)``, ``Translator.decode(tgt, memory, src_mask, cache=None) ->
  logits`` (B, Lt, vocabulary), ``Translator.new_cache()``, and the ids ``pad_id``, ``bos_id``, ``eos_id``.
"""

from __future__ import annotations

from typing import Any

#: Submodules, imported as such (never through `model`): `corpus` and `cli` need no torch.
_SUBMODULES = frozenset({"cli", "corpus", "model"})


def __getattr__(name: str) -> Any:
    """`utils.translator.Translator` and the rest come from `model`, imported on first use: it imports torch, and the
    `attn` command builds its command line from `utils.translator.cli` (`attn check` and `attn --help` need no
    translator: they start 1.2 s sooner)."""
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import model

    try:
        return getattr(model, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    from . import model

    return sorted(set(globals()) | set(model.__all__))
