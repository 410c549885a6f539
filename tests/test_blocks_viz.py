"""Unit tests of the building blocks and plotting helpers the notebooks share."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from utils.blocks import get_device, peak_memory_bytes, seed_everything, time_call  # noqa: E402
from utils.viz import heatmap, heatmaps  # noqa: E402


def test_seed_everything_makes_reruns_identical():
    seed_everything(3)
    a = torch.randn(4)
    seed_everything(3)
    assert torch.equal(a, torch.randn(4))


def test_device_is_cpu_without_a_gpu():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert get_device().type == expected


def test_time_call_returns_a_positive_median_and_rejects_zero_repeats():
    calls = []
    assert time_call(lambda: calls.append(1), repeat=3, warmup=2) >= 0
    assert len(calls) == 5
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        time_call(lambda: None, repeat=0)


def test_peak_memory_sees_a_temporary_that_is_freed_before_returning():
    n = 1 << 20  # 4 MiB of float32

    def work():
        big = torch.ones(n)
        return float(big.sum())

    peak = peak_memory_bytes(work)
    assert 4 * n <= peak < 8 * n + 65536


def test_heatmap_labels_axes_and_rejects_3d_input():
    ax = heatmap(torch.rand(2, 3), ["a", "b", "c"], ["q1", "q2"], title="t")
    assert ax.get_xlabel() == "key" and ax.get_ylabel() == "query" and ax.get_title() == "t"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="index a head/batch first"):
        heatmap(torch.rand(2, 2, 2))
    plt.close("all")


def test_heatmaps_lays_out_one_panel_per_map():
    fig = heatmaps([torch.rand(3, 3)] * 5, [f"h{i}" for i in range(5)], cols=4)
    visible = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in visible] == [f"h{i}" for i in range(5)]
    with pytest.raises(ValueError, match="got 2 maps but 1 titles"):
        heatmaps([torch.rand(2, 2)] * 2, ["only one"])
    plt.close("all")
