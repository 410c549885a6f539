"""Plots the notebooks share: attention heatmaps and simple line plots, all via seaborn/matplotlib, and the way a
figure is shown: with alt text that says what it shows, for readers who cannot see it."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns
import torch
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: The colours of the course's lines and bars, in order (C0, C1, ... in a plot call): Okabe & Ito's palette for colour
#: universal design (2008; Wong, Nature Methods 8:441, 2011), blue, orange, bluish green, vermillion, reddish purple,
#: sky blue, black, yellow. Every pair stays apart under protanopia and deuteranopia (tests/test_figures.py measures
#: it); matplotlib's default, tab10, puts its orange and green 1.3 CIEDE2000 apart for a protanope.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
plt.rcParams["axes.prop_cycle"] = cycler(color=PALETTE)  # every notebook imports this module in its setup cell


def heatmap(
    weights: torch.Tensor,
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    title: str = "",
    ax: Axes | None = None,
    annot: bool | None = None,
    cmap: str = "Blues",
    xlabel: str = "key",
    ylabel: str = "query",
    vmin: float | None = 0.0,
    vmax: float | None = None,
) -> Axes:
    """Draw a 2-D tensor (rows = queries, columns = keys) as a labelled heatmap."""
    w = weights.detach().float().cpu()
    if w.dim() != 2:
        raise ValueError(f"heatmap needs a 2-D tensor (Lq, Lk); got shape {tuple(w.shape)} — index a head/batch first")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * w.shape[1] + 2.5, 0.45 * w.shape[0] + 1.5))
    if annot is None:
        annot = w.numel() <= 100
    sns.heatmap(
        w.numpy(),
        ax=ax,
        annot=annot,
        fmt=".2f",
        cmap=cmap,
        vmin=vmin,
        vmax=vmax,
        cbar=not annot,
        xticklabels=list(x_labels) if x_labels is not None else "auto",
        yticklabels=list(y_labels) if y_labels is not None else "auto",
        square=w.shape[0] == w.shape[1],
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=45 if x_labels is not None else 0)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def heatmaps(
    maps: Sequence[torch.Tensor],
    titles: Sequence[str],
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    cols: int = 4,
    **kwargs,
) -> plt.Figure:
    """Several heatmaps side by side (e.g. one per head or one per mask)."""
    if len(maps) != len(titles):
        raise ValueError(f"got {len(maps)} maps but {len(titles)} titles")
    cols = min(cols, len(maps))
    rows = (len(maps) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[len(maps):]:
        ax.axis("off")
    for ax, m, t in zip(axes.flat, maps, titles):
        heatmap(m, x_labels, y_labels, title=t, ax=ax, annot=False, **kwargs)
    fig.tight_layout()
    return fig


def alignment_heatmaps(
    maps: Sequence[torch.Tensor],
    titles: Sequence[str],
    src_words: Sequence[str],
    tgt_words: Sequence[str],
    alignment: Sequence[int | None] | None,
    source_offset: int = 0,
    cols: int = 4,
) -> plt.Figure:
    """Attention maps (target words × source words) side by side, one colour scale for all, with the gold
    alignment outlined in red: target word t translates source word alignment[t] (column alignment[t] +
    source_offset, e.g. 1 when the source starts with <bos>)."""
    from matplotlib.patches import Rectangle

    vmax = max(float(m.max()) for m in maps)
    fig = heatmaps(maps, titles, x_labels=src_words, y_labels=tgt_words, cols=cols, vmax=vmax, xlabel="source",
                   ylabel="target")
    for ax in fig.axes[: len(maps)]:
        ax.tick_params(axis="x", labelrotation=90)
        for t, s in enumerate(alignment or []):
            if s is not None and t < len(tgt_words):
                ax.add_patch(Rectangle((s + source_offset, t), 1, 1, fill=False, edgecolor="red", linewidth=1.2))
    return fig


def _alt_metadata(alt: str) -> dict[str, dict[str, str]]:
    """The output metadata that carries a figure's alt text: {"image/png": {"alt": ...}}, the key nbconvert's HTML
    export and the Jupyter alt-text proposal (jupyter/enhancement-proposals#120) read."""
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("a figure needs alt text: say in a sentence or two what it shows and what a reader should "
                         "see in it (axes, what is plotted, the pattern that matters), e.g. "
                         "show(alt=\"Heatmap of the attention weights, queries as rows and keys as columns: ...\")")
    return {"image/png": {"alt": alt.strip()}}


def show(alt: str, fig: Figure | None = None) -> None:
    """Show `fig` (default: the current figure) as `plt.show()` would inline, with `alt` in the output's metadata so
    that a screen reader, the exported HTML and the course site can say what the figure shows; then close it."""
    from IPython.display import display

    metadata = _alt_metadata(alt)
    if fig is None:
        if not plt.get_fignums():
            raise ValueError("show(alt=...) found no figure to show: draw one first (plt.subplots, heatmap, ...)")
        fig = plt.gcf()
    display(fig, metadata=metadata)
    plt.close(fig)


def explore(draw: Callable[..., Figure], *, alt: str, **controls: Any) -> None:
    """Show `draw(**values)` as an ordinary figure, then the controls; moving one redraws the figure in place.

    `draw` returns a matplotlib Figure for the controls' current values; `controls` are ipywidgets (sliders,
    dropdowns) named like `draw`'s parameters; `alt` says what the figure shows, whatever the controls' values (every
    redraw carries it). Without a live JupyterLab (nbval, grading, a static viewer) the figure at the starting
    values is what shows, so the notebook's output does not depend on a widget manager.
    """
    from IPython.display import display

    metadata = _alt_metadata(alt)

    def current() -> dict[str, Any]:
        return {name: widget.value for name, widget in controls.items()}

    fig = draw(**current())
    handle = display(fig, display_id=True, metadata=metadata)
    plt.close(fig)

    def redraw(_change: Any = None) -> None:
        new = draw(**current())
        handle.update(new, metadata=metadata)
        plt.close(new)

    for widget in controls.values():
        widget.observe(redraw, names="value")
    import ipywidgets

    display(ipywidgets.HBox(list(controls.values())))


_SHOWS = ("show", "explore")
_MAGIC = re.compile(r"^\s*[%!]", re.MULTILINE)


def figure_alts(source: str) -> list[str]:
    """The alt texts of a code cell's figures, in the order they appear: the `alt=` string of each `show(...)`,
    `viz.show(...)`, `explore(...)` or `viz.explore(...)` call. Read from the syntax tree, not the running
    notebook, so that the site can put each stored figure's alt text in the language of the copy it renders.
    A ValueError when an alt is not a string literal (then no copy of the cell can know its words)."""
    tree = ast.parse(_MAGIC.sub("#", source))  # a line magic (%time, !pip) is no Python: blank it
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_show(node.func)]
    alts = []
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        value = next((k.value for k in call.keywords if k.arg == "alt"), None)
        if value is None:
            continue
        if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
            raise ValueError(f"line {call.lineno}: alt= must be a string literal (the translations and the site read "
                             f"it from the source), got {ast.unparse(value)[:60]}")
        alts.append(value.value)
    return alts


def _is_show(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in _SHOWS
    return isinstance(func, ast.Attribute) and func.attr in _SHOWS and isinstance(func.value, ast.Name) \
        and func.value.id == "viz"
