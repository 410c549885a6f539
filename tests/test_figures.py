"""Figures everyone can read: every stored figure says what it shows (alt text, in English and in Chinese), and the
colours the figures use stay apart for readers with protanopia or deuteranopia (tests/cvd_simulate.py)."""

import ast
import re

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests.cvd_simulate import DEFICIENCIES, closest_pair, lightness_profile  # noqa: E402
from utils import notebooks as nbs  # noqa: E402
from utils import viz  # noqa: E402
from utils.viz import PALETTE, figure_alts, show  # noqa: E402

NOTEBOOKS = nbs.assignments()
_CJK = re.compile(r"[\u3400-\u9fff]")
_ENGLISH_WORD = re.compile(r"\b[A-Za-z]{3,}\b")

#: CIEDE2000 difference two colours of one figure must keep under each simulated deficiency. 1 is about the smallest
#: difference seen side by side on large patches and 2.3 a just-noticeable one (Sharma, Wu & Dalal 2005); lines,
#: markers and small cells need several times more (Stone, Szafir & Setlur 2014: the noticeable difference grows as
#: marks shrink), so a pair must stay 10 apart, which Okabe-Ito's closest pair (orange and yellow for a deuteranope,
#: 11.6) keeps and tab10's orange and green (1.3 for a protanope) does not.
DISTINCT = 10.0


def _stored_figures(nb) -> list[tuple[str, list]]:
    """(cell id, its stored image outputs) of every code cell that stored a figure."""
    return [(nbs.nbgrader_meta(c).get("grade_id", "?"), imgs) for c in nbs.code_cells(nb)
            if (imgs := [o for o in c.get("outputs", []) if "image/png" in o.get("data", {})])]


# -- alt text ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_every_stored_figure_carries_alt_text_of_a_sentence(notebook):
    nb = nbs.read(nbs.solution_path(notebook))
    figures = _stored_figures(nb)
    assert figures, f"{notebook} stores no figure: run `attn execute {notebook}`"
    for cell_id, images in figures:
        for image in images:
            alt = image.get("metadata", {}).get("image/png", {}).get("alt", "")
            assert len(alt.split()) >= 8, (f"{notebook}: cell {cell_id} stores a figure without alt text of a sentence "
                                           f"({alt!r}): end the cell with show(alt=\"...\") and run "
                                           f"`attn execute {notebook}`")


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_each_figure_cell_names_as_many_alts_as_it_stores_figures(notebook):
    nb = nbs.read(nbs.solution_path(notebook))
    for cell in nbs.code_cells(nb):
        images = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        alts = figure_alts(cell.source)
        assert len(alts) == len(images), (f"{notebook}: cell {nbs.nbgrader_meta(cell).get('grade_id')} stores "
                                          f"{len(images)} figures but its source names {len(alts)} alt texts")
        stored = [o.get("metadata", {}).get("image/png", {}).get("alt") for o in images]
        assert stored == [a.strip() for a in alts], "the stored alt texts are not the source's: re-execute"


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_student_copies_carry_alts_in_their_own_language(notebook):
    english = nbs.read(nbs.release_path(notebook))
    chinese = nbs.read(nbs.release_path(notebook, nbs.NOTEBOOKS / "zh"))
    en_alts = [a for c in nbs.code_cells(english) for a in figure_alts(c.source)]
    zh_alts = [a for c in nbs.code_cells(chinese) for a in figure_alts(c.source)]
    stored = sum(len(images) for _, images in _stored_figures(nbs.read(nbs.solution_path(notebook))))
    assert len(en_alts) == len(zh_alts) == stored
    for en, zh in zip(en_alts, zh_alts):
        assert not _CJK.search(en) and len(_ENGLISH_WORD.findall(en)) >= 8, f"not an English alt text: {en!r}"
        assert len(_CJK.findall(zh)) >= 10, f"the Chinese copy's alt text is not in Chinese: {zh!r}"


def test_no_alt_text_just_says_figure_or_repeats_its_title():
    for notebook in NOTEBOOKS:
        for cell in nbs.code_cells(nbs.read(nbs.solution_path(notebook))):
            titles = {n.value.strip().lower() for n in ast.walk(ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", cell.source)))
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            for alt in figure_alts(cell.source):
                assert not re.fullmatch(r"(a |the )?(figure|plot|image|chart|heatmap)\.?", alt.strip().lower()), alt
                assert alt.strip().lower() not in titles - {alt.strip().lower()}, f"an alt that is a title: {alt!r}"
                assert not re.search(r"\d+(\.\d+)? ?(ms|s|MiB|seconds)\b", alt), f"a run's measurement in {alt!r}"


def _recording_display(monkeypatch) -> list:
    """IPython's display, replaced by one that records what it was given (the kernel run of `attn execute` is the
    end-to-end check: test_every_stored_figure_carries_alt_text_of_a_sentence)."""
    import IPython.display

    sent = []

    class Handle:
        def update(self, obj, **kwargs):
            sent.append(("update", obj, kwargs.get("metadata")))

    def display(*objs, **kwargs):
        for obj in objs:
            sent.append(("display", obj, kwargs.get("metadata")))
        return Handle() if kwargs.get("display_id") else None

    monkeypatch.setattr(IPython.display, "display", display)
    return sent


def test_show_puts_the_alt_text_in_the_image_outputs_metadata_and_closes_the_figure(monkeypatch):
    sent = _recording_display(monkeypatch)
    plt.close("all")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    show("  A line falling from 1 to 0.  ")
    assert sent == [("display", fig, {"image/png": {"alt": "A line falling from 1 to 0."}})]
    assert not plt.fignum_exists(fig.number)
    other, _ = plt.subplots()
    show("An empty set of axes.", fig=other)
    assert sent[-1][1] is other and not plt.get_fignums()


def test_show_refuses_an_empty_alt_and_a_missing_figure():
    plt.close("all")
    fig, _ = plt.subplots()
    for empty in ("", "   ", None):
        with pytest.raises(ValueError, match="a figure needs alt text"):
            show(empty, fig)
    plt.close("all")
    with pytest.raises(ValueError, match="found no figure to show"):
        show("A sentence about a figure that was never drawn.")


def test_explore_sends_the_alt_text_with_the_first_figure_and_every_redraw(monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    sent = _recording_display(monkeypatch)
    slider = ipywidgets.IntSlider(value=1, min=1, max=3)
    viz.explore(lambda n: plt.subplots()[0], alt="Bars that change with n.", n=slider)
    slider.value = 2
    alt = {"image/png": {"alt": "Bars that change with n."}}
    figures = [(kind, meta) for kind, obj, meta in sent if isinstance(obj, plt.Figure)]
    assert figures == [("display", alt), ("update", alt)]
    with pytest.raises(ValueError, match="a figure needs alt text"):
        viz.explore(lambda n: plt.subplots()[0], alt=" ", n=slider)
    plt.close("all")


def test_figure_alts_reads_the_literals_in_order_and_ignores_other_calls():
    source = '''%matplotlib inline
plt.show()
with requires("x"):
    heatmap(w, title="not an alt")
    show(alt="First: one "
             "literal in two pieces.")
    fig.show()
    ax.set(alt="not a show call")
viz.show(alt="Second, through the module.")
explore(draw, alt="Third, a slider figure.", n=slider)
'''
    assert figure_alts(source) == ["First: one literal in two pieces.", "Second, through the module.",
                                   "Third, a slider figure."]
    assert figure_alts("x = 1\nplt.show()") == []
    with pytest.raises(ValueError, match="must be a string literal"):
        figure_alts('show(alt=f"h = {h}")')


# -- colour vision -------------------------------------------------------------------------------------------------
def test_the_cvd_simulation_and_the_colour_difference_match_their_papers():
    from tests.cvd_simulate import ciede2000, simulate

    # Sharma, Wu & Dalal (2005), Table 1: pairs 1, 7, 17 and 25 of their test data
    pairs = [((50, 2.6772, -79.7751), (50, 0, -82.7485), 2.0425), ((50, 0, 0), (50, -1, 2), 2.3669),
             ((50, 2.5, 0), (73, 25, -18), 27.1492), ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387),
                                                      1.2644)]
    for lab1, lab2, expected in pairs:
        assert float(ciede2000(np.array(lab1), np.array(lab2))) == pytest.approx(expected, abs=1e-4)
    # a dichromat's matrix keeps grey grey (its rows sum to 1) and merges red and green
    for deficiency in DEFICIENCIES:
        assert simulate(np.array([0.5, 0.5, 0.5]), deficiency) == pytest.approx([0.5, 0.5, 0.5], abs=1e-3)
    assert closest_pair(["#d62728", "#2ca02c"], "deuteranopia")[0] < closest_pair(["#d62728", "#2ca02c"])[0] / 2


def _used_colour_names() -> dict[str, list[str]]:
    """{where: the colours named in one figure cell (or in utils/viz.py)}: string literals that matplotlib reads as a
    colour, in a cell that stores a figure. The cycle's own colours (C0, C1, ...) are the palette's."""
    from matplotlib.colors import is_color_like

    found = {}
    for notebook in NOTEBOOKS:
        for cell in nbs.code_cells(nbs.read(nbs.solution_path(notebook))):
            if not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
                continue
            tree = ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", cell.source))
            names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                     and len(n.value) > 1 and is_color_like(n.value)}
            if names:
                found[f"{notebook}: {nbs.nbgrader_meta(cell).get('grade_id')}"] = sorted(names)
    return found


def test_the_course_palette_stays_distinguishable_under_protanopia_and_deuteranopia():
    assert plt.rcParams["axes.prop_cycle"].by_key()["color"] == list(PALETTE)
    for deficiency in (None, *DEFICIENCIES):
        delta, i, j = closest_pair(list(PALETTE), deficiency)
        assert delta >= DISTINCT, f"{PALETTE[i]} and {PALETTE[j]} are {delta:.1f} apart for {deficiency or 'normal'}"


def test_the_colours_each_figure_names_stay_distinguishable_under_both_deficiencies():
    from matplotlib.colors import to_hex

    used = _used_colour_names()
    assert len(used) >= 10, used  # the scan sees the figures' colours
    for where, names in used.items():
        # "tab:gray" and "grey" are one colour; white is the page, or text on a dark cell, never a category
        colours = sorted({to_hex(c) for c in names} - {"#ffffff"})
        for deficiency in (None, *DEFICIENCIES):
            delta, i, j = closest_pair(colours, deficiency)
            assert delta >= DISTINCT, (f"{where}: {colours[i]} and {colours[j]} are {delta:.1f} CIEDE2000 apart for "
                                       f"{deficiency or 'normal vision'}; pick from utils.viz.PALETTE or add a line "
                                       f"style")


def test_the_palette_check_fails_on_a_red_green_pair_and_on_tab10():
    for bad in (["#d62728", "#2ca02c"], ["tab:orange", "tab:green"]):
        assert min(closest_pair(bad, d)[0] for d in DEFICIENCIES) < DISTINCT
        assert closest_pair(bad)[0] >= DISTINCT  # apart for normal vision: only the simulation catches them


#: The colour maps the figures use, by kind: a sequential map must get lighter (or darker) all the way, so it reads
#: without hue; a diverging one lighter towards its middle from both ends, its two sides told apart.
SEQUENTIAL = {"Blues", "viridis", "mako"}
DIVERGING = {"RdBu_r"}


def _used_colour_maps() -> set[str]:
    import inspect

    found = {inspect.signature(viz.heatmap).parameters["cmap"].default}
    sources = [c.source for nb in NOTEBOOKS for c in nbs.code_cells(nbs.read(nbs.solution_path(nb)))]
    for source in sources:
        for node in ast.walk(ast.parse(re.sub(r"(?m)^\s*[%!].*$", "", source))):
            if isinstance(node, ast.keyword) and node.arg == "cmap" and isinstance(node.value, ast.Constant):
                found.add(node.value.value)
            if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "colormaps" and isinstance(node.slice, ast.Constant)):
                found.add(node.slice.value)
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "cm"
                    and node.attr not in ("get_cmap", "ScalarMappable")):
                found.add(node.attr)  # plt.cm.viridis(...)
    return found


def _monotone(lightness: np.ndarray, slack: float = 0.5) -> bool:
    steps = np.diff(lightness)
    return bool((steps >= -slack).all() or (steps <= slack).all())


def _reads_as_sequential(name: str) -> bool:
    return all(_monotone(lightness_profile(name, deficiency=d)) for d in (None, *DEFICIENCIES))


def _reads_as_diverging(name: str) -> bool:
    import matplotlib as mpl

    for deficiency in (None, *DEFICIENCIES):
        lightness = lightness_profile(name, n=65, deficiency=deficiency)
        if not (_monotone(lightness[:33]) and _monotone(lightness[32:]) and lightness[32] >= lightness.max() - 1):
            return False
        ends = [mpl.colors.to_hex(mpl.colormaps[name](t)) for t in (0.1, 0.9)]  # the two sides, away from white
        if closest_pair(ends, deficiency)[0] < DISTINCT:
            return False
    return True


def test_every_colour_map_in_use_is_judged_and_reads_without_hue():
    used = _used_colour_maps()
    assert {"Blues", "RdBu_r"} <= used, used
    unjudged = used - SEQUENTIAL - DIVERGING
    assert not unjudged, f"colour maps not judged yet: {unjudged}: add each to SEQUENTIAL or DIVERGING"
    for name in used & SEQUENTIAL:
        assert _reads_as_sequential(name), f"{name}: its lightness is not monotone"
    for name in used & DIVERGING:
        assert _reads_as_diverging(name), f"{name}: not lightest in the middle, or its sides merge"


def test_the_colour_map_checks_fail_on_jet_rainbow_and_a_red_green_diverging_map():
    assert not _reads_as_sequential("jet") and not _reads_as_sequential("rainbow")
    assert _reads_as_sequential("cividis")
    assert not _reads_as_diverging("RdYlGn")  # red and green sides merge for a deuteranope
    assert not _reads_as_diverging("jet")
