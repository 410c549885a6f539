"""The course registry: its notebooks, in order, with their graded exercises and points. One table, here.

Everything that names an exercise is derived from it or checked against it: the solution notebooks' grade cells and
points and their test cells' `Checker` (tests/test_course_structure.py), each grader's `HIDDEN_TESTS` and
`STAND_INS`, README's course table and docs/COURSE.md's table of points (`attn docs` writes both; a test fails when
they differ), and a test cell's `Checker("softmax")` and `check.hidden(softmax)`, which take their points and their
notebook from here. A new exercise is one `Exercise(...)` line here, plus its cells, its hidden tests and its plants.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Exercise:
    """A graded function or class: its name (the answer cell's grade_id, `test_<name>` for its test cell), and a
    module it `needs` that installs on some systems only (graded where it is there, left out of the total elsewhere)."""

    name: str
    points: float
    needs: str | None = None


@dataclass(frozen=True)
class Notebook:
    """One notebook and one nbgrader assignment: `id` names its folders in solutions/, notebooks/ and grader/."""

    id: str
    topics: str  # what it teaches, as docs/learners.md and the site's course map say it
    exercises: tuple[Exercise, ...]
    #: Course functions ("module:function") that the grading engine's zygote runs once before this notebook's workers
    #: start, so that every worker inherits what they computed (08's corpus: 1.5 s a grading otherwise).
    warm: tuple[str, ...] = ()

    @property
    def number(self) -> str:
        return self.id[:2]

    @property
    def points(self) -> float:
        return sum(e.points for e in self.exercises)


NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("01_attention_intuition",
             "attention as a soft dictionary lookup (and why the hard one cannot learn), self-attention vs RNNs and "
             "CNNs, why softmax (not sigmoids), attention pooling as Nadaraya–Watson kernel regression with a learned "
             "bandwidth, additive vs dot-product scores, Bahdanau's translation alignment",
             (Exercise("softmax", 3), Exercise("attention_pool", 3), Exercise("nadaraya_watson", 3),
              Exercise("additive_scores", 4))),
    Notebook("02_scaled_dot_product_attention",
             "the equation, why divide by √d_k, dropout on the weights, naming the bug behind a broken attention's output, "
             "self- vs cross-attention, your `SelfAttention` trained on a lookup task (with and without the scaling), "
             "the O(n²) cost measured; going further: half precision, a race against PyTorch's kernels",
             (Exercise("scaled_dot_product_attention", 6), Exercise("name_the_bug", 4), Exercise("SelfAttention", 4))),
    Notebook("03_masking",
             "padding, causal and sliding-window masks (True = may attend), `-inf` vs `-1e9` and the fully masked "
             "row, causality proven through gradients (your `influence` finds a leak), O(n·w) local attention, "
             "going further: block-sparse, linear and low-rank attention timed and tested",
             (Exercise("causal_mask", 2), Exercise("padding_mask", 2), Exercise("sliding_window_mask", 3),
              Exercise("masked_softmax", 4), Exercise("build_attention_mask", 3),
              Exercise("influence", 4))),
    Notebook("04_multi_head_attention",
             "why several heads, split → attend → merge → W_o, the view-without-transpose bug, heads trained until "
             "they split two jobs, encoder-only / decoder-only / encoder-decoder, equality with "
             "`nn.MultiheadAttention`, GPT-2's attention weights ported into yours, parameter count (LLaMA-7B: 67 M per "
             "layer)",
             (Exercise("split_heads", 2), Exercise("merge_heads", 2), Exercise("MultiHeadAttention", 6),
              Exercise("load_gpt2_attention", 3), Exercise("mha_parameter_count", 2))),
    Notebook("05_positional_encoding",
             "attention is blind to order, sinusoidal encoding and its offset rotation, learned and relative "
             "encodings, ALiBi, RoPE and why its scores depend only on m − n, naming the bug behind a broken RoPE's "
             "output",
             (Exercise("sinusoidal_encoding", 3), Exercise("offset_rotation", 2), Exercise("PositionalEncoding", 2),
              Exercise("apply_rope", 3), Exercise("name_the_rope_bug", 3))),
    Notebook("06_grouped_query_attention",
             "why decoding is memory-bound, MHA / GQA / MQA as one family, `repeat` vs `repeat_interleave`, "
             "mean-pooling a multi-head checkpoint into GQA, a KV cache that decodes token by token exactly like one "
             "causal pass (RoPE included), telling a correct cache from a broken one by what it returned, the cache's "
             "speed-up measured, KV-cache sizes of real models (a sliding window included)",
             (Exercise("repeat_kv", 2), Exercise("GroupedQueryAttention", 6), Exercise("KVCache", 2),
              Exercise("cache_is_correct", 3), Exercise("kv_cache_bytes", 2))),
    Notebook("07_flash_attention",
             "the GPU memory hierarchy and why attention is IO-bound, online softmax derived and checked, tiled "
             "attention with the logsumexp and causal block skipping, naming the bug behind a broken tiled attention's "
             "output, an HBM-traffic model (Θ(N²d²/M), not O(Nd)), "
             "peak memory measured at N = 8192, a backward pass that recomputes from the logsumexp, the forward pass "
             "in Triton (interpreted on the CPU; compiled on an H200: 84–100 % of FlashAttention-2's speed)",
             (Exercise("online_softmax", 2), Exercise("flash_attention", 4), Exercise("name_the_flash_bug", 3),
              Exercise("hbm_traffic", 2), Exercise("FlashAttentionFunction", 4),
              Exercise("flash_attention_triton", 3, needs="triton"))),
    Notebook("08_transformer_translator",
             "a corpus the course generates (English → a German-like language with case, verb-second, participles "
             "and verbs at the end, gold word alignments), an encoder–decoder Transformer assembled from your own "
             "parts of 03–06 (PyTorch's built-ins where one is missing), with a decoder cache that projects each "
             "token's keys and values once into 06's `KVCache` and the source's once per sentence, pre- or "
             "post-norm layers checked against PyTorch's, training on one CPU thread to held-out BLEU ≥ 95 "
             "(sacrebleu) in about 3 minutes after predicting the label-smoothing floor its loss meets, greedy "
             "decoding with that cache (many times faster than without for long outputs in a batch, as §11 measures on "
             "your machine), beam search with a length "
             "penalty (graded by properties every correct beam search has), cross-attention heatmaps and measured "
             "alignment, `attn train` / `attn translate`",
             (Exercise("decoder_mask", 2), Exercise("EncoderLayer", 4), Exercise("DecoderLayer", 5),
              Exercise("greedy_decode", 4), Exercise("label_smoothing_floor", 2), Exercise("beam_search", 4)),
             warm=("utils.translator.corpus:warm",)),
)


#: Where the course is published, and the version (a branch or a tag) that its Colab and Binder buttons open and
#: that a notebook's first cell installs on Colab. A fork or a release changes these two lines and runs `attn docs`.
REPOSITORY = "https://github.com/attention-course/attention-course"
REF = "main"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BINDER_BADGE = "https://mybinder.org/badge_logo.svg"
CODESPACES_BADGE = "https://github.com/codespaces/badge.svg"


def _github_path() -> str:
    return REPOSITORY.removeprefix("https://github.com/").removesuffix(".git")


def notebook_path(notebook_id: str, lang: str = "en") -> str:
    """The student copy's path in the repository: notebooks/<id>/<id>.ipynb, or notebooks/<lang>/<id>/..."""
    return "notebooks/" + ("" if lang == "en" else f"{lang}/") + f"{notebook_id}/{notebook_id}.ipynb"


def colab_url(notebook_id: str, lang: str = "en") -> str:
    return f"https://colab.research.google.com/github/{_github_path()}/blob/{REF}/{notebook_path(notebook_id, lang)}"


def codespaces_url() -> str:
    """A GitHub Codespace on the repository (its .devcontainer/ runs `make install`, then `make lab`)."""
    return f"https://codespaces.new/{_github_path()}?quickstart=1"


def binder_url(lang: str = "en") -> str:
    return f"https://mybinder.org/v2/gh/{_github_path()}/{REF}?urlpath=lab/tree/notebooks" + (
        "" if lang == "en" else f"/{lang}")


def colab_badge(notebook_id: str, lang: str = "en") -> str:
    """The first cell of every student notebook: a link that opens it on Colab. A link, not Colab's badge image: an
    image would be fetched from Google whenever the notebook is opened (a broken picture offline, a request that
    Formgrader's feedback pages refuse), and the notebook must render the same everywhere with nothing fetched."""
    text = {"en": "Open this notebook in Colab", "zh": "在 Colab 中打开本笔记本"}.get(lang, "Open this notebook in Colab")
    return f"[▶ {text}]({colab_url(notebook_id, lang)})"


#: The first lines of every notebook's setup cell: on Colab (or where $ATTN_COLAB stands in for it) they fetch the
#: course at REF and install what the notebooks need (utils/bootstrap.py keeps Colab's PyTorch); where the course can
#: be imported already they do nothing. `attn docs` writes them; $ATTN_COURSE_REPOSITORY points them elsewhere.
COLAB_SETUP = f"""\
import importlib.util, os, subprocess, sys
if ("google.colab" in sys.modules or os.environ.get("ATTN_COLAB")) and not (
        importlib.util.find_spec("utils") and importlib.util.find_spec("utils.course")):
    # On Colab: fetch the course at this notebook's version, install what it needs, keep Colab's PyTorch.
    course = os.path.abspath("attention-course")
    if not os.path.isdir(course):
        url = os.environ.get("ATTN_COURSE_REPOSITORY", "{REPOSITORY}")
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", "{REF}", url, course], check=True)
    subprocess.run([sys.executable, "-m", "utils.bootstrap", "--extras", ""], cwd=course, check=True)
    sys.path.insert(0, course)
"""


class UnknownName(KeyError):
    """A notebook id or exercise name that is not in the registry; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def notebook(notebook_id: str) -> Notebook:
    """The registry's entry for `notebook_id` (``01_attention_intuition``)."""
    for nb in NOTEBOOKS:
        if nb.id == notebook_id:
            return nb
    raise UnknownName(f"no notebook {notebook_id!r} in the course (known: {', '.join(n.id for n in NOTEBOOKS)})")


def exercise(name: str) -> tuple[Notebook, Exercise]:
    """The notebook and entry of the exercise called `name` (names are unique in the whole course)."""
    for nb in NOTEBOOKS:
        for ex in nb.exercises:
            if ex.name == name:
                return nb, ex
    raise UnknownName(f"no exercise {name!r} in the course's registry (utils/course.py)")


def points(value: float) -> str:
    """Points as the tables print them: 3, not 3.0."""
    return f"{value:g}"


def points_rows() -> list[str]:
    """docs/COURSE.md's table of exercises and points, and its totals line (`attn docs` writes them)."""
    rows = [f"| {nb.number} | `{nb.id}` | `{e.name}` | {points(e.points)} |" for nb in NOTEBOOKS for e in nb.exercises]
    totals = ", ".join(f"{nb.number} {points(nb.points)}" for nb in NOTEBOOKS)
    return [*rows, "", f"Totals: {totals} points."]
