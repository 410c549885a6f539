"""Plots the notebooks share: attention heatmaps and simple line plots, all via seaborn/matplotlib."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure


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


def explore(draw: Callable[..., Figure], **controls: Any) -> None:
    """Show `draw(**values)` as an ordinary figure, then the controls; moving one redraws the figure in place.

    `draw` returns a matplotlib Figure for the controls' current values; `controls` are ipywidgets (sliders,
    dropdowns) named like `draw`'s parameters. Without a live JupyterLab (nbval, grading, a static viewer) the
    figure at the starting values is what shows, so the notebook's output does not depend on a widget manager.
    """
    from IPython.display import display

    def current() -> dict[str, Any]:
        return {name: widget.value for name, widget in controls.items()}

    fig = draw(**current())
    handle = display(fig, display_id=True)
    plt.close(fig)

    def redraw(_change: Any = None) -> None:
        new = draw(**current())
        handle.update(new)
        plt.close(new)

    for widget in controls.values():
        widget.observe(redraw, names="value")
    import ipywidgets

    display(ipywidgets.HBox(list(controls.values())))
