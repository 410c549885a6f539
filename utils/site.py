"""`attn site` (`make site`, `python -m utils.site`): the course website, in English and Chinese, built into _site/.

Sphinx with MyST-NB and sphinx-book-theme, all from PyPI, built offline: the theme's files come in its wheel, MathJax
3 from the django-static-mathjax wheel (only the files the pages load are copied), and no notebook is executed.
Each notebook's page is its STUDENT copy (exercises as the learner gets them: signature, docstring,
`raise NotImplementedError()`, hints) with the stored outputs of its plain cells taken from the solution notebook
(English outputs, matched by `utils.i18n.cell_key`); answer cells and test cells get no outputs. The docs pages are
docs/*.md as DOCS lists them; the Chinese site shows them under Chinese titles and links to the English pages unless
docs/zh/NAME.md exists. `leaks()` proves that nothing secret reached the built site (the site's side of
tests/test_release.py's check on the student copies), and `build()` refuses to publish a site that fails it.

Layout: site/ holds conf.py, the landing pages' templates, _templates/ and _static/; each language's sources are laid
out under build/site/<lang>/ and built by its own sphinx-build process (the two run in parallel); the result is
_site/ (English) and _site/zh/ (Chinese).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from string import Template

import nbformat
from nbformat import NotebookNode

from . import course, docs, i18n
from . import notebooks as nbs

ROOT = nbs.ROOT
SITE_SRC = ROOT / "site"  # conf.py, landing templates, _templates/, _static/
#: Scratch: each language's sources, the MathJax files and each build's log ($ATTN_SITE_BUILD moves it, as the tests do).
BUILD = Path(os.environ.get("ATTN_SITE_BUILD") or ROOT / "build" / "site")
OUT = ROOT / "_site"
LANGS = ("en", "zh")
GITHUB_BLOB = f"{course.REPOSITORY}/blob/{course.REF}/"

#: The docs pages of the site, in the navigation's order: docs/NAME.md for each NAME, with its title on the Chinese
#: site (where it links to the English page, marked "English", unless docs/zh/NAME.md exists). A listed file that is
#: missing stops the build, unless its NAME is also in DOCS_PENDING (a page still being written: left out, said).
DOCS: tuple[tuple[str, str], ...] = (
    ("learners", "学习者指南"),
    ("install", "安装与启动"),
    ("commands", "attn 命令"),
    ("instructors", "教师指南"),
    ("submissions", "提交的作业能做什么、不能做什么"),
    ("maintainers", "维护者指南"),
    ("COURSE", "课程约定"),
    ("glossary", "术语表"),
)
DOCS_PENDING: frozenset[str] = frozenset()

#: The one picture of each notebook on the course map: the cell (its `cell_key`) whose first stored figure it is;
#: a notebook not listed shows its first stored figure.
MAP_FIGURES = {
    "01_attention_intuition": "xiaoming_heatmap",
    "08_transformer_translator": "heatmaps",
}

LANGUAGE_SWITCH = {"en": ("中文", "zh", "阅读本页的中文版"), "zh": ("English", "en", "Read this page in English")}
#: What the Chinese site says of a docs page that has only an English version, and of the English outputs.
ENGLISH_ONLY = "English"
ZH_OUTPUTS_NOTE = ("本页的代码输出和图来自英文版笔记本的运行结果（图中文字为英文）；练习单元格保持学习者拿到时的样子。"
                   "Outputs come from the English run.")

# -- MathJax ------------------------------------------------------------------------------------------------------
MATHJAX_DIRNAME = "mathjax"
#: The files of MathJax 3.2 (the django-static-mathjax wheel: MathJax's own es5 distribution and nothing else; no
#: dependencies) that the pages load: TeX in, CommonHTML out, with its web fonts and the TeX extensions that
#: `autoload` fetches for a macro outside the core (35 MB in the wheel, under 2 MB on the site).
MATHJAX_FILES = ("LICENSE", "es5/tex-chtml.js", "es5/output/chtml/fonts/woff-v2/*.woff", "es5/input/tex/extensions/*.js")
MATHJAX_CONFIG = {
    # Only the elements Sphinx marks as maths (class "math"): a "$" or "\(" in prose, code or an output stays text.
    "options": {"ignoreHtmlClass": ".*", "processHtmlClass": "math"},
    "tex": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]]},
}


def static_dir() -> Path:
    """Files that Sphinx copies into each build's _static/ (mathjax/)."""
    return BUILD / "static"


class SiteError(Exception):
    """The site cannot be built as asked; the message says what to fix."""


def mathjax_source() -> Path:
    """MathJax 3 as the django-static-mathjax wheel ships it (a package named `mathjax` holding MathJax's files)."""
    try:
        import mathjax
    except ImportError:
        raise SiteError("MathJax is not installed (django-static-mathjax, in pyproject.toml's site extra): make install"
                        ) from None
    return Path(mathjax.__file__).parent / "static" / "mathjax"


def copy_mathjax(dest: Path | None = None) -> int:
    """Copy MATHJAX_FILES into `dest` (default: the builds' static folder); returns the bytes copied."""
    source, total, dest = mathjax_source(), 0, dest or static_dir() / MATHJAX_DIRNAME
    if dest.exists():
        shutil.rmtree(dest)
    for pattern in MATHJAX_FILES:
        found = [p for p in source.glob(pattern) if p.is_file()]
        if not found:
            raise SiteError(f"MathJax: nothing matches {pattern!r} in {source} (has django-static-mathjax changed?)")
        for path in found:
            target = dest / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            total += path.stat().st_size
    return total


# -- notebook pages -----------------------------------------------------------------------------------------------
def takes_outputs(cell: NotebookNode) -> bool:
    """Whether the site shows this solution cell's stored outputs: plain code cells only. An answer cell (nbgrader
    solution) would show what the answer computed, a test cell (nbgrader grade) the visible and hidden tests'
    results; the setup cell's output is Colab's install chatter."""
    meta = nbs.nbgrader_meta(cell)
    return (cell.cell_type == "code" and not meta.get("solution") and not meta.get("grade")
            and i18n.cell_key(cell) != "setup")


def _shown(output: NotebookNode) -> bool:
    """Outputs a static page can show: not a widget's view (no widget state is stored; the figure above it is)."""
    return "application/vnd.jupyter.widget-view+json" not in output.get("data", {})


def page_notebook(assignment: str, lang: str, missing_alts: list[str]) -> NotebookNode:
    """The notebook a page renders: `lang`'s student copy, clean of nbgrader's metadata, with the stored outputs of the
    English solution's plain cells, each figure carrying its alt text in `lang` (missing ones are added to
    `missing_alts`)."""
    from .docs import _COLAB_BLOCK  # the Colab block atop every setup cell (utils/docs.py writes it)
    from .viz import figure_alts  # the alt literals of a cell's show(alt=...) calls, in order

    student = nbs.read(nbs.release_path(assignment, nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang))
    solution = {i18n.cell_key(c): c for c in nbs.read(nbs.solution_path(assignment)).cells}
    page = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    for cell in student.cells:
        key = i18n.cell_key(cell)
        fresh = NotebookNode({k: v for k, v in cell.items() if k not in ("metadata", "outputs", "execution_count",
                                                                          "attachments")})
        fresh.metadata = NotebookNode({"attn_key": key})  # which course cell it is (the course map looks it up)
        if cell.cell_type != "code":
            page.cells.append(fresh)
            continue
        fresh.outputs, fresh.execution_count = [], None
        if key == "setup":
            fresh.source = _COLAB_BLOCK.sub("", cell.source, count=1)  # Colab's install block: not for a reader
        source = solution.get(key)
        if source is not None and takes_outputs(source) and takes_outputs(cell):
            alts = figure_alts(cell.source)
            figure = 0
            for output in source.outputs:
                if not _shown(output):
                    continue
                output = nbformat.from_dict(output)
                if "image/png" in output.get("data", {}):
                    alt = alts[figure] if figure < len(alts) else output.get("metadata", {}).get(
                        "image/png", {}).get("alt")
                    if not alt:
                        missing_alts.append(f"{assignment} ({lang}) cell {key!r}, figure {figure + 1}")
                    output.metadata = NotebookNode({"image/png": {"alt": alt}})
                    figure += 1
                fresh.outputs.append(output)
            if fresh.outputs:
                fresh.execution_count = source.execution_count
        page.cells.append(fresh)
    if lang != "en":
        title = next(i for i, c in enumerate(page.cells) if c.cell_type == "markdown" and c.source.startswith("# "))
        page.cells.insert(title + 1, nbformat.v4.new_markdown_cell(f":::{{note}}\n{ZH_OUTPUTS_NOTE}\n:::"))
    return page


def stored_figure(assignment: str, lang: str) -> tuple[bytes, str]:
    """The course map's picture of a notebook (MAP_FIGURES) and its alt text in `lang`."""
    wanted = MAP_FIGURES.get(assignment)
    missing: list[str] = []
    page = page_notebook(assignment, lang, missing)
    for cell in page.cells:
        if cell.cell_type != "code" or (wanted and cell.metadata.get("attn_key") != wanted):
            continue
        for output in cell.outputs:
            if "image/png" in output.get("data", {}):
                return base64.b64decode(output.data["image/png"]), output.metadata["image/png"]["alt"]
    raise SiteError(f"{assignment}: no stored figure {'in cell ' + repr(wanted) if wanted else ''} for the course map "
                    f"(MAP_FIGURES in utils/site.py)")


# -- landing pages ------------------------------------------------------------------------------------------------
_MAP_TEXT = {
    "en": {"open": "Open in Colab", "exercises": "You write", "page": "Read it here"},
    "zh": {"open": "在 Colab 中打开", "exercises": "你要写的", "page": "在本站阅读"},
}


def _tagline(assignment: str, lang: str) -> str:
    """The notebook's one-line promise: the italic paragraph under its title (used where the registry's English
    `topics` cannot be: the Chinese course map)."""
    copy = nbs.read(nbs.release_path(assignment, nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang))
    for cell in copy.cells:
        if cell.cell_type == "markdown" and re.search(r"^# ", cell.source, re.M):
            found = re.search(r"^\*([^*\n].*?)\*\s*$", cell.source, re.M | re.S)
            return found.group(1).replace("\n", " ").strip() if found else ""
    return ""


def course_map(lang: str, images: Path) -> str:
    """The course map, in MyST: one card per notebook of the registry, with its picture, title, what you build (its
    maths rendered like the notebook's) and its Colab button. Writes the pictures into `images` (in the sources)."""
    text = _MAP_TEXT[lang]
    cards = []
    images.mkdir(parents=True, exist_ok=True)
    for nb in course.NOTEBOOKS:
        png, alt = stored_figure(nb.id, lang)
        (images / f"{nb.id}.png").write_bytes(png)
        what = nb.topics if lang == "en" else _tagline(nb.id, lang)
        names = ", ".join(f"`{e.name}`" for e in nb.exercises)
        cards.append(f"""\
:::{{container}} attn-card
```{{image}} /{images.name}/{nb.id}.png
:alt: {" ".join(alt.split())}
:target: notebooks/{nb.id}.html
```

**[{nb.number} · {docs.title(nb.id, lang)}](notebooks/{nb.id}.ipynb)**

{what}

{text["exercises"]}: {names}

[▶ {text["open"]}]({course.colab_url(nb.id, lang)}){{.attn-button}}
:::
""")
    return "::::{container} attn-map\n" + "\n".join(cards) + "::::\n"


def start_buttons(lang: str) -> str:
    """The one-click starts, with README's URLs: Colab (the first notebook), Binder, Codespaces."""
    first = course.NOTEBOOKS[0].id
    labels = {"en": ("Open in Colab", "Launch on Binder", "Open in GitHub Codespaces"),
              "zh": ("在 Colab 中打开", "在 Binder 上启动", "在 GitHub Codespaces 中打开")}[lang]
    links = zip(("colab", "binder", "codespaces"), labels,
                (course.colab_url(first, lang), course.binder_url(lang), course.codespaces_url()))
    return '<p class="attn-starts">\n' + "\n".join(
        f'<a class="attn-button attn-{kind}" href="{html.escape(url, quote=True)}">▶ {label}</a>'
        for kind, label, url in links) + "\n</p>"


def landing_page(lang: str, source: Path) -> str:
    """index.md of `lang`'s site, from site/index.<lang>.md."""
    template = Template((SITE_SRC / f"index.{lang}.md").read_text(encoding="utf-8"))
    notebooks = "\n".join(f"notebooks/{nb.id}" for nb in course.NOTEBOOKS)
    docs = "\n".join(f"docs/{name}" for name, _ in docs_present())
    return template.substitute(course_map=course_map(lang, source / "map"), starts=start_buttons(lang),
                               notebooks=notebooks, docs=docs)


# -- docs pages ---------------------------------------------------------------------------------------------------
def docs_present() -> list[tuple[str, str]]:
    """DOCS whose file exists; a missing one that is not pending stops the build."""
    missing = [name for name, _ in DOCS if not (ROOT / "docs" / f"{name}.md").is_file()]
    if stopped := [name for name in missing if name not in DOCS_PENDING]:
        raise SiteError(f"docs/{stopped[0]}.md is listed in DOCS (utils/site.py) but missing: write it, or take it "
                        f"off DOCS (or put it in DOCS_PENDING while it is being written)")
    return [(name, zh) for name, zh in DOCS if name not in missing]


_MD_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(\s+\"[^\"]*\")?\s*\)")
_REMOTE_IMAGE = re.compile(r"!\[([^\]]*)\]\(\s*<?(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)[^)]*\)")
_HTML_ATTR = re.compile(r"""\b(href|src)=(["'])([^"']+)\2""")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


#: A link from one language's pages to the other's is written as this made-up address plus the path from the site's
#: root (each build knows only its own pages); `cross_links` turns it into a relative link after both builds.
OTHER_SITE = "https://attn-site.invalid/"


def docs_source(name: str, lang: str) -> Path | None:
    """docs/NAME.md, or docs/<lang>/NAME.md for another language (None where that page has no translation)."""
    path = ROOT / "docs" / ("" if lang == "en" else f"{lang}/") / f"{name}.md"
    return path if path.is_file() else None


def _page_url(lang: str, path: str) -> str:
    """The path of a page from the site's root (English at the root, another language under <lang>/)."""
    return ("" if lang == "en" else f"{lang}/") + path


def site_target(target: str, page: str, docs: set[str], lang: str = "en") -> str:
    """Where a link of a docs page (repository path `page`, on `lang`'s site) points on the site: a docs page or a
    notebook's page stays internal (in its own language: another language's page is reached through OTHER_SITE), a
    picture under docs/images/ is copied with the page, anything else of the repository becomes its file on
    GitHub."""
    if _EXTERNAL.match(target) or target.startswith("#"):
        return target
    path, _, fragment = target.partition("#")
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(page), path)) if path else page
    anchor = f"#{fragment}" if fragment else ""
    if (m := re.fullmatch(r"docs/(?:(\w\w)/)?([\w.-]+)\.md", repo_path)) and m.group(2) in docs:
        their = m.group(1) or "en"
        if their == lang and (lang == "en" or docs_source(m.group(2), lang)):
            return f"{m.group(2)}.md{anchor}"
        return f"{OTHER_SITE}{_page_url(their, f'docs/{m.group(2)}.html')}{anchor}"
    if m := re.fullmatch(r"notebooks/(?:(\w\w)/)?(\d\d_\w+)/\2\.ipynb", repo_path):
        their = m.group(1) or "en"
        if their == lang:
            return f"../notebooks/{m.group(2)}.ipynb{anchor}"
        return f"{OTHER_SITE}{_page_url(their, f'notebooks/{m.group(2)}.html')}{anchor}"
    if repo_path.startswith("docs/images/"):
        return repo_path.removeprefix("docs/")  # every docs page is built as docs/NAME, beside docs/images/
    if repo_path.startswith(".."):
        raise SiteError(f"{page}: the link {target!r} leaves the repository")
    return GITHUB_BLOB + repo_path + anchor


def docs_markdown(text: str, page: str, docs: set[str], lang: str = "en") -> str:
    """A docs page as the site publishes it: links rewritten by `site_target`, and a picture fetched from another
    site (a badge) replaced by its text, so that no page loads anything from outside the site."""

    def link(m: re.Match) -> str:
        bang, label, target, title_ = m.groups()
        return f"{bang}[{label}]({site_target(target, page, docs, lang)}{title_ or ''})"

    def attr(m: re.Match) -> str:
        name, quote, target = m.groups()
        return f"{name}={quote}{site_target(target, page, docs, lang)}{quote}"

    in_code, lines = False, []
    for line in text.splitlines(keepends=True):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
        lines.append(line if in_code else _HTML_ATTR.sub(attr, _MD_LINK.sub(link, _REMOTE_IMAGE.sub(r"\1", line))))
    return "".join(lines)


def english_only_page(name: str, zh_title: str) -> str:
    """The Chinese site's stand-in for a docs page that has only an English version: its place in the navigation,
    under a Chinese title marked English; `cross_links` points every link to it at the English page."""
    return (f"# {zh_title}（{ENGLISH_ONLY}）\n\n本页目前只有英文版。\n\n"
            f'<p><a class="attn-button" href="{OTHER_SITE}docs/{name}.html" hreflang="en">{ENGLISH_ONLY}: '
            f"{zh_title}</a></p>\n")


# -- the build ----------------------------------------------------------------------------------------------------
def lay_out(lang: str, dest: Path) -> list[str]:
    """Write `lang`'s Sphinx sources into `dest`; returns the figures that have no alt text."""
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "notebooks").mkdir(parents=True)
    missing: list[str] = []
    for nb in course.NOTEBOOKS:
        nbformat.write(page_notebook(nb.id, lang, missing), str(dest / "notebooks" / f"{nb.id}.ipynb"))
    present = docs_present()
    names = {name for name, _ in present}
    (dest / "docs").mkdir()
    if (ROOT / "docs" / "images").is_dir():
        shutil.copytree(ROOT / "docs" / "images", dest / "docs" / "images")
    for name, zh_title in present:
        if source := docs_source(name, lang):
            page = source.relative_to(ROOT).as_posix()
            text = docs_markdown(source.read_text(encoding="utf-8"), page, names, lang)
        else:
            text = english_only_page(name, zh_title)
        (dest / "docs" / f"{name}.md").write_text(text, encoding="utf-8")
    (dest / "index.md").write_text(landing_page(lang, dest), encoding="utf-8")
    return missing


def sphinx(lang: str, source: Path, out: Path) -> subprocess.CompletedProcess:
    """One language's sphinx-build, warnings shown, its log kept in build/site/<lang>.log."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(SITE_SRC), "-D", f"language={lang}",
           "-d", str(BUILD / f"doctrees-{lang}"), "-E", "--keep-going", str(source), str(out)]
    env = {**os.environ, "PYTHONHASHSEED": "0", "ATTN_SITE_LANG": lang, "ATTN_SITE_BUILD": str(BUILD)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    (BUILD / f"{lang}.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    return proc


def cross_links(site_root: Path, langs: tuple[str, ...]) -> int:
    """After the builds: every OTHER_SITE link becomes a link relative to its page, and on a translated site every link
    to the stand-in of an English-only docs page leads to the English page; returns how many links changed."""
    changed = 0
    stand_ins = {f"{lang}/docs/{name}.html": f"docs/{name}.html" for lang in langs if lang != "en"
                 for name, _ in docs_present() if not docs_source(name, lang)}
    for page in site_root.rglob("*.html"):
        here = page.parent.relative_to(site_root).as_posix()
        text = page.read_text(encoding="utf-8")

        def swap(m: re.Match) -> str:
            nonlocal changed
            href = m.group(1)
            path, _, fragment = href.partition("#")
            if path.startswith(OTHER_SITE):
                target = path.removeprefix(OTHER_SITE)
            elif _EXTERNAL.match(href) or not path.endswith(".html"):
                return m.group(0)
            else:
                target = posixpath.normpath(posixpath.join(here, path))
                if target not in stand_ins or not f"{here}/".startswith(target.split("/")[0] + "/"):
                    return m.group(0)  # the English page's language switch still leads to the stand-in
            target = stand_ins.get(target, target)
            changed += 1
            return f'href="{posixpath.relpath(target, here)}{"#" + fragment if fragment else ""}"'

        fresh = re.sub(r'href="([^"]*)"', swap, text)
        if fresh != text:
            page.write_text(fresh, encoding="utf-8")
    return changed


def build(out: Path = OUT, langs: tuple[str, ...] = LANGS, *, check: bool = True) -> dict[str, float]:
    """Build the site into `out` (English at its root, another language in out/<lang>/); returns seconds per step.
    Stops on a Sphinx warning, a figure without alt text once the course's figures have alt text, and a leak."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    BUILD.mkdir(parents=True, exist_ok=True)
    copy_mathjax()
    missing: list[str] = []
    for lang in langs:
        missing += lay_out(lang, BUILD / lang)
    times["lay out"] = time.perf_counter() - start
    if missing:
        raise SiteError(f"{len(missing)} figures have no alt text, e.g. {missing[0]}: end the cell with "
                        f"`show(alt=...)` (utils/viz.py), then `attn release --lang all` and `attn execute`")
    staged = BUILD / "html"
    if staged.exists():
        shutil.rmtree(staged)
    start = time.perf_counter()
    with ThreadPoolExecutor(len(langs)) as pool:  # one process per language: the two cores work at once
        procs = dict(zip(langs, pool.map(lambda lang: sphinx(lang, BUILD / lang, staged / (
            "" if lang == "en" else lang)), langs)))
    times["sphinx"] = time.perf_counter() - start
    for lang, proc in procs.items():
        problems = [line for line in (proc.stdout + proc.stderr).splitlines() if "WARNING" in line or "ERROR" in line]
        if proc.returncode != 0 or problems:
            raise SiteError(f"sphinx-build ({lang}) failed or warned (build/site/{lang}.log):\n" + "\n".join(
                problems[:20] or [(proc.stdout + proc.stderr)[-3000:]]))
    cross_links(staged, langs)
    tidy(staged)
    if check and (found := leaks(staged)):
        raise SiteError("the built site shows what only the grader may know:\n" + "\n".join(found[:20]))
    if out.exists():
        shutil.rmtree(out)
    shutil.move(str(staged), str(out))
    return times


def tidy(staged: Path) -> None:
    """Drop what no page loads: MyST-NB's copies of the rendered notebooks and their pictures (jupyter_execute/; the
    pages use _images/), the theme's template macros, source maps, Sphinx's build stamp."""
    for folder in staged.rglob("jupyter_execute"):
        shutil.rmtree(folder)
    for pattern in (".buildinfo", "*webpack-macros.html", "*.js.map", "*.css.map"):
        for junk in staged.rglob(pattern):
            junk.unlink()


# -- nothing secret reaches the site ------------------------------------------------------------------------------
_TAG = re.compile(r"<[^>]+>")
_TEXT_SUFFIXES = {".html", ".js", ".json", ".txt", ".css", ".ipynb", ".md", ".xml", ".svg", ".map", ".py"}
#: A secret line shorter than this is too common to tell (`return out`, `else:`).
MIN_SECRET = 16


def _blocks(source: str, begin: str, end: str) -> list[str]:
    """The lines between `### BEGIN X` and `### END X` markers of a cell's source."""
    found, inside = [], False
    for line in source.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            found.append(line.strip())
    return found


def secrets() -> dict[str, set[str]]:
    """What only the grader may know, by kind: the lines of the answers (BEGIN SOLUTION blocks) and of the hidden
    tests (BEGIN HIDDEN TESTS blocks) in solutions/, the grader's own lines (grader/*.py), and the student copies'
    nbgrader checksums; a line any student copy shows as well, or a short one, is no secret."""
    public: set[str] = set()
    checksums: set[str] = set()
    for lang in i18n.LANGUAGES:
        for nb in course.NOTEBOOKS:
            copy = nbs.read(nbs.release_path(nb.id, nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang))
            for cell in copy.cells:
                public.update(line.strip() for line in cell.source.splitlines())
                if sum_ := nbs.nbgrader_meta(cell).get("checksum"):
                    checksums.add(sum_)
    found: dict[str, set[str]] = {"answer": set(), "hidden test": set(), "grader": set(), "checksum": checksums}
    for nb in course.NOTEBOOKS:
        for cell in nbs.read(nbs.solution_path(nb.id)).cells:
            found["answer"].update(_blocks(cell.source, "BEGIN SOLUTION", "END SOLUTION"))
            found["hidden test"].update(_blocks(cell.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"))
    for path in sorted(nbs.grader_dir().glob("*.py")):
        found["grader"].update(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    for kind in ("answer", "hidden test", "grader"):
        found[kind] = {line for line in found[kind] if len(line) >= MIN_SECRET and line not in public}
    found["grader"] = {line for line in found["grader"] if len(line) >= 30}
    return found


def site_lines(path: Path) -> list[str]:
    """A site file's text as a reader or a script sees it, line by line: tags dropped, entities decoded."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".html":
        text = html.unescape(_TAG.sub("", text))
    return [line.strip() for line in text.splitlines()]


def leaks(site: Path) -> list[str]:
    """Everything in the built site at `site` that only the grader may know: an answer's line, a hidden test's line,
    a line of grader/, a file of grader/, nbgrader's markers or checksums. [] when it is clean."""
    found: list[str] = []
    known = secrets()
    grader_files = {hashlib.sha256(p.read_bytes()).hexdigest(): p.name
                    for p in nbs.grader_dir().rglob("*") if p.is_file() and p.stat().st_size}
    markers = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "check.hidden(")
    for path in sorted(p for p in site.rglob("*") if p.is_file()):
        rel = path.relative_to(site).as_posix()
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in grader_files:
            found.append(f"{rel}: a copy of grader/{grader_files[digest]}")
        if path.suffix not in _TEXT_SUFFIXES:
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        for marker in markers:
            if marker in raw:
                found.append(f"{rel}: nbgrader's marker {marker!r}")
        if re.search(r'"checksum"\s*:', raw) or any(s in raw for s in known["checksum"]):
            found.append(f"{rel}: nbgrader checksum metadata")
        for number, line in enumerate(site_lines(path), 1):
            for kind in ("answer", "hidden test", "grader"):
                if line in known[kind]:
                    found.append(f"{rel}:{number}: a line of {'grader/' if kind == 'grader' else 'an ' + kind}: "
                                 f"{line[:80]!r}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attn site", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where the site goes (default: _site/)")
    parser.add_argument("--lang", choices=[*LANGS, "all"], default="all", help="build one language only")
    args = parser.parse_args(argv)
    langs = LANGS if args.lang == "all" else (args.lang,)
    start = time.perf_counter()
    cpu = os.times()
    print(f"building the course site ({', '.join(langs)}) into {args.out} ...", flush=True)
    try:
        times = build(args.out, langs)
    except SiteError as exc:
        print(f"attn site: {exc}", file=sys.stderr)
        return 1
    used = os.times()
    cpu_s = (used.children_user + used.children_system + used.user + used.system
             - cpu.children_user - cpu.children_system - cpu.user - cpu.system)
    pages = sum(1 for _ in args.out.rglob("*.html"))
    print(f"{pages} pages in {args.out}: {time.perf_counter() - start:.0f} s ({cpu_s:.0f} s of CPU; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()) + ")")
    # Over HTTP, not file://: a browser refuses MathJax's fonts to a page opened from a file.
    print(f"to read it: {sys.executable} -m http.server -d {args.out} 8000, then open http://localhost:8000/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
