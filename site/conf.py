"""Sphinx configuration of the course site, one build per language (`python -m utils.site` runs both).

utils/site.py lays out each language's source folder under build/site/<lang>/ (the landing page, the notebooks with
their stored outputs, the docs pages) and runs `sphinx-build -c site -D language=<lang>`; this file is the same for
both. Nothing here fetches anything: the theme's files come in its wheel, MathJax 3 from the django-static-mathjax
wheel (utils.site.copy_mathjax puts the files the pages load under build/site/static/mathjax/), and no notebook is
run.
"""

from __future__ import annotations

import os
import posixpath
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from utils import course  # noqa: E402
from utils import site as attn_site  # noqa: E402

LANG = os.environ.get("ATTN_SITE_LANG", "en")
project = "Attention, from intuition to a working translator"
author = {"zh": "注意力课程"}.get(LANG, "the attention course")
copyright = {"zh": "注意力课程的作者们"}.get(LANG, "the attention course's authors")  # noqa: A001 (Sphinx's name)
language = "en"  # -D language=zh for the Chinese site

extensions = ["myst_nb", "sphinx.ext.mathjax"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
html_static_path = ["_static", str(attn_site.static_dir())]
html_css_files = ["site.css"]
html_copy_source = False  # no _sources/: the page is the notebook, and only what the page shows is published
html_show_sourcelink = False
html_show_sphinx = False
html_last_updated_fmt = None
html_title = {"zh": "注意力机制：从直觉到翻译器"}.get(LANG, project)
suppress_warnings = ["myst.header"]  # a notebook's "### Exercise" under "## 3." is the notebooks' style

# MyST and MyST-NB: notebooks are rendered from their stored outputs, never executed.
nb_execution_mode = "off"
nb_merge_streams = True  # a table printed line by line is one block
nb_output_stderr = "show"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "html_image", "attrs_inline"]
myst_heading_anchors = 4  # [text](install.md#fonts) between the docs pages
myst_update_mathjax = False  # the MathJax configuration below is the site's own

# MathJax 3 from the django-static-mathjax wheel, served from the site (never a CDN), only in the elements Sphinx
# marks as maths.
mathjax_path = f"{attn_site.MATHJAX_DIRNAME}/es5/tex-chtml.js"
mathjax3_config = attn_site.MATHJAX_CONFIG

html_theme = "sphinx_book_theme"
html_theme_options = {
    "repository_url": course.REPOSITORY,
    "repository_branch": course.REF,
    "use_repository_button": True,
    "use_download_button": False,  # its .ipynb download would be the page's notebook, outputs included: not needed
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "article_header_end": ["lang-switch.html", "article-header-buttons.html"],
    "navigation_with_keys": False,
    "navbar_persistent": [],  # the search field is the sidebar's; pydata-sphinx-theme's header would repeat it
}
html_context = {"default_mode": "light"}  # the stored figures are drawn on white

#: Sphinx 9.0's Chinese search names a ChineseStemmer that it never defines (it stems with the English one): every
#: Chinese page threw "ChineseStemmer is not defined" (sphinx-doc/sphinx#14229, fixed by #14416 in releases that need
#: Python 3.12). Defined here, before language_data.js runs; unused where Sphinx defines it.
ZH_STEMMER = "window.ChineseStemmer = window.ChineseStemmer || function () { return new EnglishStemmer(); };"


def _other_language(app, pagename, templatename, context, doctree):
    """The same page in the other language, as a link relative to this page (the language switch)."""
    lang = app.config.language
    depth = pagename.count("/")
    up = "../" * depth
    if lang == "en":
        href = f"{up}zh/{pagename}.html"
    else:
        href = f"{up}../{pagename}.html"
    context["attn_lang"] = lang
    context["attn_other_lang_href"] = posixpath.normpath(href) if href else "index.html"
    context["attn_other_lang_label"] = attn_site.LANGUAGE_SWITCH[lang]


def setup(app):
    app.connect("html-page-context", _other_language)
    if LANG == "zh":
        app.add_js_file(None, body=ZH_STEMMER, priority=100)
