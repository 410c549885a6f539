"""The language a learner reads: check tables, feedback and the attn command's words, in the language now spoken.

A process speaks one language at a time (`set_language`, `speaking`); `_` looks a message up in the gettext
catalogue of that language (utils/locale/<lang>/LC_MESSAGES/attn.mo), then in the grader's wherever the hidden tests
lie (grader/locale/<lang>/LC_MESSAGES/attn-grader.mo: the explanations of mistakes, which never ship with utils;
`utils.grading` adds it when it is imported beside them, and again for each grader folder it loads from). This module imports nothing of the course, so
that the result types (`utils.results`) and everything under them can speak; `utils.i18n` re-exports it with the
notebooks' translation.
"""

from __future__ import annotations

import contextlib
import functools
import gettext as gettext_module
import os
from collections.abc import Iterator
from pathlib import Path

#: The languages of the course, English first (the source); the others are translations.
LANGUAGES = ("en", "zh")
NAMES = {"en": "English", "zh": "简体中文"}
LOCALES = Path(__file__).resolve().parent / "locale"  # gettext catalogues: locale/<lang>/LC_MESSAGES/attn.po (.mo)
_LANGUAGE: list[str | None] = [None]
#: Where the grader's own catalogue lies, once a grader is loaded in this process (`add_grader_catalogue`).
_GRADER_LOCALES: list[Path] = []


def set_language(lang: str) -> None:
    """Speak `lang` from now on in this process: check tables, feedback and messages ("en" or "zh"). A notebook's
    setup cell calls it; `attn check --lang` and the grader (for a notebook whose setup cell says so) too."""
    if lang not in LANGUAGES:
        raise ValueError(f"set_language: {lang!r} is not one of the course's languages ({', '.join(LANGUAGES)})")
    _LANGUAGE[0] = lang
    if lang != "en":
        _use_cjk_font()


@contextlib.contextmanager
def speaking(lang: str) -> Iterator[None]:
    """Speak `lang` inside the block (a grading), then whatever was spoken before."""
    before = _LANGUAGE[0]
    set_language(lang)
    try:
        yield
    finally:
        _LANGUAGE[0] = before


def language() -> str:
    """The language now spoken: set_language's, else $ATTN_LANG's, else English."""
    lang = _LANGUAGE[0] or os.environ.get("ATTN_LANG", "en")
    return lang if lang in LANGUAGES else "en"


@functools.cache
def _catalogue(lang: str) -> gettext_module.NullTranslations:
    catalogue = gettext_module.translation("attn", localedir=LOCALES, languages=[lang], fallback=True)
    for localedir in _GRADER_LOCALES:
        catalogue.add_fallback(gettext_module.translation("attn-grader", localedir=localedir, languages=[lang],
                                                          fallback=True))
    return catalogue


def add_grader_catalogue(localedir: Path) -> None:
    """Say the grader's words too (the explanations of its mistakes): its catalogue lies under `localedir`."""
    if localedir not in _GRADER_LOCALES:
        _GRADER_LOCALES.append(localedir)
        _catalogue.cache_clear()


def _(message: str) -> str:
    """`message` in the language now spoken (gettext; the English itself where no translation exists)."""
    lang = language()
    return message if lang == "en" or not message else _catalogue(lang).gettext(message)


def _use_cjk_font() -> None:
    """Let matplotlib draw Chinese in figure labels with whichever CJK font this machine has (Noto Sans CJK,
    Source Han, WenQuanYi, PingFang, Microsoft YaHei, SimHei), after its own default for Latin text."""
    import sys

    if "matplotlib" not in sys.modules and "matplotlib.pyplot" not in sys.modules:
        try:
            import matplotlib  # noqa: F401 - configured below
        except ImportError:
            return
    from matplotlib import font_manager, rcParams

    wanted = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei", "PingFang SC",
              "Microsoft YaHei", "SimHei")
    have = {f.name for f in font_manager.fontManager.ttflist}
    found = [name for name in wanted if name in have]
    if found and found[0] not in rcParams["font.family"]:
        # A list of families: each glyph comes from the first family that has it (matplotlib >= 3.6).
        latin = [f for f in rcParams["font.sans-serif"] if f in have][:1] or ["DejaVu Sans"]
        rcParams["font.family"] = latin + found[:1]


def N_(message: str) -> str:  # noqa: N802 - gettext's name for "mark for translation, translate later"
    """Mark `message` for the catalogue without translating it now (it is translated where it is shown)."""
    return message
