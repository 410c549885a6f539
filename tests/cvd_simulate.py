"""How the course's figures look to a reader with protanopia or deuteranopia, and the colour differences the figure
tests measure.

Simulation: Machado, Oliveira & Fernandes, "A Physiologically-based Model for Simulation of Color Vision
Deficiency", IEEE TVCG 15(6), 2009: a 3x3 matrix on linear RGB per deficiency and severity; severity 1.0 (a
dichromat, the strongest case) from the paper's table. Colour difference: CIEDE2000 (Sharma, Wu & Dalal, Color
Research & Application 30(1), 2005), on CIELAB under D65. Both written out here (numpy only) so the checks need no
colour library.

Run as a script, it writes the stored figures of every solution notebook and their two simulations side by side
into .pytest_cache/cvd/ to look at:  .venv/bin/python -m tests.cvd_simulate [notebook ...]
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

#: Machado et al. (2009), Table 1 at severity 1.0, acting on linear RGB.
MACHADO = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
DEFICIENCIES = tuple(MACHADO)

_SRGB_TO_XYZ = np.array([[0.4124564, 0.3575761, 0.1804375],
                         [0.2126729, 0.7151522, 0.0721750],
                         [0.0193339, 0.1191920, 0.9503041]])
_WHITE = _SRGB_TO_XYZ.sum(axis=1)  # D65, Y = 1


def to_linear(srgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] -> linear light (IEC 61966-2-1)."""
    srgb = np.asarray(srgb, dtype=float)
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def to_srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate(srgb: np.ndarray, deficiency: str) -> np.ndarray:
    """Colours (..., 3) in sRGB [0, 1] as a reader with `deficiency` sees them, in sRGB [0, 1]."""
    return to_srgb(to_linear(srgb) @ MACHADO[deficiency].T)


def lab(srgb: np.ndarray) -> np.ndarray:
    """sRGB [0, 1] (..., 3) -> CIELAB (D65)."""
    xyz = (to_linear(srgb) @ _SRGB_TO_XYZ.T) / _WHITE
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def ciede2000(lab1: np.ndarray, lab2: np.ndarray) -> np.ndarray:
    """CIEDE2000 colour difference of CIELAB colours (..., 3), kL = kC = kH = 1 (Sharma et al. 2005, eqs. 1-17)."""
    L1, a1, b1 = np.moveaxis(np.asarray(lab1, dtype=float), -1, 0)
    L2, a2, b2 = np.moveaxis(np.asarray(lab2, dtype=float), -1, 0)
    C_bar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    G = 0.5 * (1 - np.sqrt(C_bar**7 / (C_bar**7 + 25.0**7)))
    a1p, a2p = (1 + G) * a1, (1 + G) * a2
    C1p, C2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360
    dLp, dCp = L2 - L1, C2p - C1p
    dhp = h2p - h1p
    dhp = np.where(dhp > 180, dhp - 360, np.where(dhp < -180, dhp + 360, dhp))
    dhp = np.where(C1p * C2p == 0, 0.0, dhp)
    dHp = 2 * np.sqrt(C1p * C2p) * np.sin(np.radians(dhp) / 2)
    Lp_bar, Cp_bar = (L1 + L2) / 2, (C1p + C2p) / 2
    hsum = h1p + h2p
    hp_bar = np.where(np.abs(h1p - h2p) > 180, np.where(hsum < 360, (hsum + 360) / 2, (hsum - 360) / 2), hsum / 2)
    hp_bar = np.where(C1p * C2p == 0, hsum, hp_bar)
    T = (1 - 0.17 * np.cos(np.radians(hp_bar - 30)) + 0.24 * np.cos(np.radians(2 * hp_bar))
         + 0.32 * np.cos(np.radians(3 * hp_bar + 6)) - 0.20 * np.cos(np.radians(4 * hp_bar - 63)))
    d_theta = 30 * np.exp(-(((hp_bar - 275) / 25) ** 2))
    R_C = 2 * np.sqrt(Cp_bar**7 / (Cp_bar**7 + 25.0**7))
    S_L = 1 + 0.015 * (Lp_bar - 50) ** 2 / np.sqrt(20 + (Lp_bar - 50) ** 2)
    S_C = 1 + 0.045 * Cp_bar
    S_H = 1 + 0.015 * Cp_bar * T
    R_T = -np.sin(np.radians(2 * d_theta)) * R_C
    return np.sqrt((dLp / S_L) ** 2 + (dCp / S_C) ** 2 + (dHp / S_H) ** 2 + R_T * (dCp / S_C) * (dHp / S_H))


def closest_pair(colours: list, deficiency: str | None = None) -> tuple[float, int, int]:
    """The smallest CIEDE2000 difference between two of `colours` (any matplotlib colour), as seen with
    `deficiency` (None: normal vision), and which two they are."""
    from matplotlib.colors import to_rgb

    rgb = np.array([to_rgb(c) for c in colours])
    if deficiency:
        rgb = simulate(rgb, deficiency)
    lab_ = lab(rgb)
    best = (float("inf"), -1, -1)
    for i in range(len(rgb)):
        for j in range(i + 1, len(rgb)):
            best = min(best, (float(ciede2000(lab_[i], lab_[j])), i, j))
    return best


def lightness_profile(cmap_name: str, n: int = 64, deficiency: str | None = None) -> np.ndarray:
    """CIELAB lightness L* along a matplotlib/seaborn colour map, from its low end to its high end."""
    import matplotlib
    import seaborn  # noqa: F401 - registers seaborn's maps (mako, rocket, ...) with matplotlib

    rgb = matplotlib.colormaps[cmap_name](np.linspace(0, 1, n))[:, :3]
    if deficiency:
        rgb = simulate(rgb, deficiency)
    return lab(rgb)[:, 0]


# -- the stored figures, simulated ---------------------------------------------------------------------------------
def stored_figures(notebook: Path) -> list[tuple[str, bytes]]:
    """(name, PNG bytes) of every image output stored in a notebook, named by cell id."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    out = []
    for index, cell in enumerate(nb["cells"]):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or f"cell{index}"
        pngs = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        out += [(f"{grade_id}{'' if len(pngs) == 1 else f'_{k}'}", base64.b64decode(p)) for k, p in enumerate(pngs)]
    return out


def side_by_side(png: bytes) -> np.ndarray:
    """The figure as stored, then as a protanope, then as a deuteranope sees it, one above the other (RGB uint8)."""
    import matplotlib.image as mpimg

    rgb = mpimg.imread(io.BytesIO(png), format="png")[..., :3].astype(float)
    rows = [rgb] + [simulate(rgb, d) for d in DEFICIENCIES]
    gap = np.ones((6, rgb.shape[1], 3))
    return (np.concatenate([x for r in rows for x in (r, gap)][:-1]) * 255).round().astype(np.uint8)


def main(names: list[str]) -> None:
    import matplotlib.image as mpimg

    out = ROOT / ".pytest_cache" / "cvd"
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        if names and not any(notebook.stem.startswith(n) for n in names):
            continue
        for name, png in stored_figures(notebook):
            mpimg.imsave(out / f"{notebook.stem[:2]}_{name}.png", side_by_side(png))
            count += 1
    print(f"{count} figures, each as stored / protanopia / deuteranopia (Machado 2009, severity 1.0), in "
          f"{out.relative_to(ROOT)}/")


if __name__ == "__main__":
    main(sys.argv[1:])
