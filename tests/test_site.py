"""The course site (`make site`, utils/site.py): built once, then read by a real browser.

The build: every notebook has a page in each language, every docs page is there, nothing secret reached it, and no
notebook was executed to make it. Then headless Chromium (Playwright, Debian's Chromium as tests/test_browser.py
drives it) visits every page once over a local HTTP server of the built site, with every request outside that
server refused: no console error, no broken internal link or anchor, every image loaded and described, maths
rendered by MathJax, Chinese pages in Chinese, the language switch and the start buttons where they say, and no
serious or critical finding of axe-core (.ci/node/node_modules/axe-core, installed by .ci/run; required in CI).
Screenshots of the landing pages and notebook 01's pages go to .pytest_cache/site/.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

import pytest

from utils import course, site
from utils import notebooks as nbs

from .conftest import free_port
from .test_browser import CHROMIUM, _require_browser

# One worker builds the site and runs its browser: every test here that uses them (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("test_site.py")
slow = pytest.mark.slow  # builds the site (about 15 s) or reads it in a browser (about a minute)

ARTIFACTS = nbs.ROOT / ".pytest_cache" / "site"
AXE = nbs.ROOT / ".ci" / "node" / "node_modules" / "axe-core" / "axe.min.js"
NB = course.NOTEBOOKS[0].id
#: A Chinese page's text outside code: at least this share of its letters are Chinese characters (the zh notebooks'
#: prose keeps English terms in brackets and code names; the measured shares run from 0.56 to 0.96).
CJK_SHARE = 0.4
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The site, built once for this module (into a folder of its own, scratch included)."""
    scratch = tmp_path_factory.mktemp("site-build")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(site, "BUILD", scratch)
        site.build(scratch / "_site")
    return scratch / "_site"


def _pages(root: Path) -> list[str]:
    """Every page of the site, as a path relative to its root."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.html") if not p.name.startswith("_")
                  and "/_static/" not in f"/{p.relative_to(root).as_posix()}" and not p.is_relative_to(root / "planted"))


# -- the build ----------------------------------------------------------------------------------------------------
@slow
def test_every_notebook_and_docs_page_is_built_in_each_language(built):
    pages = set(_pages(built))
    for lang in site.LANGS:
        prefix = "" if lang == "en" else f"{lang}/"
        assert f"{prefix}index.html" in pages
        for nb in course.NOTEBOOKS:
            assert f"{prefix}notebooks/{nb.id}.html" in pages, f"no {lang} page for {nb.id}"
        for name, _ in site.DOCS:
            assert f"{prefix}docs/{name}.html" in pages, f"no {lang} page for docs/{name}.md"


@slow
def test_nothing_secret_reached_the_site(built):
    assert site.leaks(built) == []


@slow
def test_the_leak_check_catches_an_answer_a_hidden_test_and_a_grader_file(built, tmp_path):
    """Plant each kind of secret into a copy of one page (and one file) and show that `leaks` names it."""
    solution = nbs.read(nbs.solution_path(NB))
    answer = next(line for c in solution.cells for line in site._blocks(c.source, "BEGIN SOLUTION", "END SOLUTION")
                  if line in site.secrets()["answer"])
    hidden = next(line for c in solution.cells
                  for line in site._blocks(c.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
                  if line in site.secrets()["hidden test"])
    copy = tmp_path / "site"
    page = copy / "notebooks" / f"{NB}.html"
    page.parent.mkdir(parents=True)
    clean = (built / "notebooks" / f"{NB}.html").read_text(encoding="utf-8")
    page.write_text(clean, encoding="utf-8")
    assert site.leaks(copy) == []
    for planted, expected in ((f"<pre><span>{answer}</span></pre>", "a line of an answer"),
                              (f"<pre>{hidden.replace('<', '&lt;')}</pre>", "a line of an hidden test"),
                              ('{"nbgrader": {"checksum": "0123"}}', "checksum")):
        page.write_text(clean.replace("</main>", planted + "\n</main>", 1), encoding="utf-8")
        found = site.leaks(copy)
        assert any(expected in f for f in found), (planted, found)
    page.write_text(clean, encoding="utf-8")
    grader_file = next(nbs.grader_dir().glob("*.py"))
    (copy / "_static").mkdir()
    shutil.copyfile(grader_file, copy / "_static" / "x.txt")
    assert any(f"a copy of grader/{grader_file.name}" in f for f in site.leaks(copy))


@slow
def test_the_pages_show_the_student_copy_with_the_stored_outputs_and_no_notebook_ran(built):
    """Every exercise as the learner gets it; the stored outputs of the solution's plain cells (a timing measured
    when the solution notebook was run, which a new run would not repeat) and none under an answer or a test cell;
    MyST-NB said nothing of executing."""
    for lang in site.LANGS:
        log = (built.parent / f"{lang}.log").read_text(encoding="utf-8")
        assert "execution_mode='off'" in log and "build succeeded" in log, log[-2000:]
        assert not re.search(r"Executing|Executed|execution client", log), "MyST-NB ran a notebook"
    solution = nbs.read(nbs.solution_path(NB))
    measured = next(c for c in solution.cells if c.source.startswith("# NBVAL_IGNORE_OUTPUT") and site.takes_outputs(c)
                    and any(o.output_type == "stream" for o in c.outputs))
    timing = max("".join(o.text for o in measured.outputs if o.output_type == "stream").splitlines(), key=len).strip()
    for lang in site.LANGS:
        page = (built / ("" if lang == "en" else lang) / "notebooks" / f"{NB}.html").read_text(encoding="utf-8")
        cells = [(c, site.html.unescape(site._TAG.sub("", c)))
                 for c in re.split(r'<div class="cell docutils container', page)[1:]]
        answers = [c for c, text in cells if "raise NotImplementedError()" in text]
        tests = [c for c, text in cells if "check = Checker(" in text]
        assert len(answers) == len(course.notebook(NB).exercises) == len(tests)
        for cell in answers + tests:
            assert "cell_output" not in cell, "an answer or a test cell shows an output"
        assert site.html.escape(timing, quote=False) in page, f"the stored output {timing!r} is not on the page"


def test_the_dev_extra_pulls_in_the_site_extra():
    """`make test` installs lab and dev, and builds the site: dev repeats the site extra's lines (one list for
    environment.yml's check, tests/test_environment.py)."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((nbs.ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["site"] and set(extras["site"]) <= set(extras["dev"])


def test_docs_links_to_repository_files_go_to_github_and_pages_stay_internal():
    docs = {"install", "glossary"}
    page = "docs/learners.md"
    assert site.site_target("install.md#fonts", page, docs) == "install.md#fonts"
    assert site.site_target("../utils/course.py", page, docs) == site.GITHUB_BLOB + "utils/course.py"
    assert site.site_target("../Makefile", page, docs) == site.GITHUB_BLOB + "Makefile"
    assert site.site_target(f"../notebooks/{NB}/{NB}.ipynb", page, docs) == f"../notebooks/{NB}.ipynb"
    assert site.site_target("https://example.org/x", page, docs) == "https://example.org/x"
    # the Chinese page of a docs page links to the English page it names (a page of the other site)
    assert site.site_target("../install.md#fonts", "docs/zh/learners.md", docs, "zh") == \
        site.OTHER_SITE + "docs/install.html#fonts"
    text = "[Binder ![b](https://mybinder.org/badge_logo.svg)](https://mybinder.org)\n```\n[x](../Makefile)\n```\n"
    out = site.docs_markdown(text, page, docs)
    assert "badge_logo.svg" not in out and "[x](../Makefile)" in out, "a remote picture became text; code kept"


# -- in the browser -----------------------------------------------------------------------------------------------
_COLLECT = r"""async () => {
  if (window.MathJax && MathJax.Hub) { await new Promise(r => MathJax.Hub.Queue(r)); }
  await Promise.all([...document.images].map(i => i.complete ? null :
                     new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  const main = document.querySelector('article') || document.querySelector('main') || document.body;
  const prose = main.cloneNode(true);
  prose.querySelectorAll('pre, code, script, style, .MathJax, .MathJax_Display, .MathJax_Preview, .cell_output')
       .forEach(e => e.remove());
  return {
    lang: document.documentElement.lang,
    images: [...document.images].map(i => ({src: i.currentSrc || i.src, width: i.naturalWidth, alt: i.getAttribute('alt')})),
    links: [...document.querySelectorAll('a[href]')].map(a => ({href: a.href, cls: a.className})),
    math: document.querySelectorAll('span.math, div.math').length,
    rendered: document.querySelectorAll('.MathJax, .MathJax_Display').length,
    text: prose.innerText,
  };
}"""
#: axe-core on a page: every rule, on everything but the inside of code blocks (thousands of highlighted tokens, whose
#: colour contrast took 3 of every 4 seconds axe spent on a notebook's page), which FULL_AXE's pages check as well.
_AXE = """async (whole) => {
  const r = await axe.run(whole ? document : {exclude: [['div.highlight pre']]},
                          {resultTypes: ['violations'], preload: false});
  return r.violations.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length, help: v.help,
                                target: String(v.nodes[0] && v.nodes[0].target)}));
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the test reports what matters
        pass


def _serve(root: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()),
                                             functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _axe_available() -> bool:
    if AXE.is_file():
        return True
    if os.environ.get("ATTN_REQUIRE_BROWSER") == "1":
        pytest.fail(f"axe-core is missing ({AXE}): npm install --prefix .ci/node axe-core@4.14.1 (.ci/run does)")
    return False


def visit(browser, base: str, paths: list[str], *, axe: bool, shots: dict[str, str] | None = None) -> dict:
    """Open each page once in one context; return what each showed: console errors, external requests, images,
    links, maths, its prose, axe's violations."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def route(r) -> None:
        if r.request.url.startswith(base):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    seen: dict[str, dict] = {}
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("response", lambda r: errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
    for path in paths:
        errors.clear()
        outside.clear()
        page.goto(base + path, wait_until="load")
        found = page.evaluate(_COLLECT)
        if shots and path in shots:  # before axe, which scrolls what it looks at
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / f"{shots[path]}.png"), full_page=path.endswith("index.html"))
        if axe:
            page.add_script_tag(path=str(AXE))
            found["axe"] = page.evaluate(_AXE, path in FULL_AXE)
        found["errors"], found["outside"] = list(errors), list(outside)
        seen[path] = found
    context.close()
    return seen


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def served(built):
    server = _serve(built)
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


#: Pages whose code blocks axe-core checks too (the highlighting's colours are the same on every page).
FULL_AXE = (f"notebooks/{NB}.html", f"zh/notebooks/{NB}.html")
SHOTS = {"index.html": "1-landing-en", "zh/index.html": "2-landing-zh", f"notebooks/{NB}.html": "3-notebook-en",
         f"zh/notebooks/{NB}.html": "4-notebook-zh"}


@pytest.fixture(scope="module")
def visited(built, served, browser) -> dict[str, dict]:
    return visit(browser, served, _pages(built), axe=_axe_available(), shots=SHOTS)


def _ids(root: Path, rel: str, cache: dict[str, set[str]]) -> set[str] | None:
    """The anchors of a site file (None: no such file)."""
    if rel not in cache:
        path = root / rel
        cache[rel] = set(re.findall(r'\b(?:id|name)="([^"]+)"', path.read_text(encoding="utf-8"))) \
            if path.is_file() else None
    return cache[rel]


def broken_links(root: Path, base: str, visited: dict[str, dict]) -> list[str]:
    """Every internal link, fragment included, that leads nowhere."""
    broken, cache = [], {}
    for page, found in visited.items():
        for link in found["links"]:
            href = link["href"]
            if not href.startswith(base):
                continue
            url = urllib.parse.urlsplit(href)
            rel = urllib.parse.unquote(url.path)[len(urllib.parse.urlsplit(base).path):]
            if rel == "" or rel.endswith("/"):
                rel += "index.html"
            ids = _ids(root, rel, cache)
            if ids is None and (root / rel).is_file():
                continue  # a file that is not a page (a picture, a stylesheet)
            if ids is None:
                broken.append(f"{page}: {href} (no such page)")
            elif url.fragment and urllib.parse.unquote(url.fragment) not in ids:
                broken.append(f"{page}: {href} (no anchor #{url.fragment})")
    return broken


@slow
def test_every_page_loads_without_console_errors_or_outside_requests(visited):
    assert len(visited) >= 2 * (1 + len(course.NOTEBOOKS) + len(site.DOCS))
    errors = {p: f["errors"] for p, f in visited.items() if f["errors"]}
    outside = {p: f["outside"] for p, f in visited.items() if f["outside"]}
    assert not errors, errors
    assert not outside, f"pages asked for files outside the site: {outside}"


@slow
def test_no_internal_link_or_anchor_is_broken(built, served, visited):
    assert sum(len(f["links"]) for f in visited.values()) > 1000
    assert broken_links(built, served, visited) == []


@slow
def test_every_image_loads_and_has_alt_text(visited):
    images = [(p, i) for p, f in visited.items() for i in f["images"]]
    assert len(images) >= 2 * len(course.NOTEBOOKS) * 3
    assert [(p, i["src"]) for p, i in images if i["width"] == 0] == [], "images that did not load"
    assert [(p, i["src"]) for p, i in images if not (i["alt"] or "").strip()] == [], "images without alt text"


@slow
def test_maths_is_rendered_by_mathjax(visited):
    for path, found in visited.items():
        assert found["rendered"] >= found["math"], f"{path}: {found['math']} maths, {found['rendered']} rendered"
        left = re.findall(r"\\\(|\\\[|\$[^$\s][^$\n]{0,80}\$", found["text"])
        assert not left, f"{path}: TeX left as text: {left[:3]}"
    assert sum(f["rendered"] for f in visited.values()) > 100


@slow
def test_chinese_pages_are_in_chinese(visited):
    for path, found in visited.items():
        if not path.startswith("zh/") or path.endswith(("genindex.html", "search.html")):
            continue
        cjk, latin = len(_CJK.findall(found["text"])), len(_LATIN.findall(found["text"]))
        assert found["lang"].startswith("zh"), f"{path}: <html lang={found['lang']!r}>"
        assert cjk / max(1, cjk + latin) >= CJK_SHARE, f"{path}: {cjk} Chinese characters, {latin} Latin letters"


@slow
def test_the_language_switch_and_the_start_buttons_lead_where_they_say(served, visited):
    for path, found in visited.items():
        other = path.removeprefix("zh/") if path.startswith("zh/") else f"zh/{path}"
        switches = [link["href"] for link in found["links"] if "attn-lang-switch" in link["cls"]]
        assert switches == [served + other], f"{path}: language switch {switches}"
    for lang in site.LANGS:
        landing = visited["index.html" if lang == "en" else f"{lang}/index.html"]
        hrefs = [link["href"] for link in landing["links"]]
        first = course.NOTEBOOKS[0].id
        for url in (course.colab_url(first, lang), course.binder_url(lang), course.codespaces_url()):
            assert url in hrefs, f"{lang} landing page: no start button to {url}"
        for nb in course.NOTEBOOKS:
            assert course.colab_url(nb.id, lang) in hrefs, f"{lang} course map: no Colab button for {nb.id}"
            page = visited[f"notebooks/{nb.id}.html" if lang == "en" else f"{lang}/notebooks/{nb.id}.html"]
            assert course.colab_url(nb.id, lang) in [link["href"] for link in page["links"]]


@slow
def test_axe_finds_nothing_serious_or_critical(visited):
    if not _axe_available():
        pytest.skip(f"axe-core is not installed ({AXE}): npm install --prefix .ci/node axe-core@4.14.1")
    serious = {p: [v for v in f["axe"] if v["impact"] in ("serious", "critical")] for p, f in visited.items()}
    assert {p: v for p, v in serious.items() if v} == {}


@slow
def test_screenshots_were_taken(visited):
    for name in SHOTS.values():
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000, name


@slow
def test_the_browser_checks_catch_a_planted_page(built, served, browser):
    """One page with a broken link, a missing anchor, an image without alt text, one that does not load, TeX left
    as text, a console error and a request to another site: every check above names it."""
    planted = built / "planted" / "index.html"
    planted.parent.mkdir(exist_ok=True)
    planted.write_text("""<!DOCTYPE html><html lang="en"><head><title>planted</title></head><body><main>
<a href="../nowhere.html">gone</a> <a href="../index.html#no-such-anchor">anchor</a>
<img src="../_static/images/logo_binder.svg"> <img src="missing.png" alt="missing">
<img src="https://example.org/x.png" alt="remote">
<p>Where $x^2$ stays text and \\(y\\) too.</p><span class="math">\\(z\\)</span>
<script>console.error("planted error")</script></main></body></html>""", encoding="utf-8")
    try:
        found = visit(browser, served, ["planted/index.html"], axe=_axe_available())
    finally:
        shutil.rmtree(planted.parent)
    page = found["planted/index.html"]
    assert any("planted error" in e for e in page["errors"]) and any("404" in e for e in page["errors"])
    assert set(page["outside"]) == {"https://example.org/x.png"}
    broken = broken_links(built, served, found)
    assert any("nowhere.html" in b for b in broken) and any("#no-such-anchor" in b for b in broken)
    assert [i for i in page["images"] if not i["alt"]] and [i for i in page["images"] if i["width"] == 0]
    assert re.findall(r"\\\(|\$[^$\s][^$\n]{0,80}\$", page["text"])
    assert page["rendered"] < page["math"], "no MathJax on the planted page: its maths is not rendered"
    if _axe_available():
        assert any(v["id"] == "image-alt" and v["impact"] == "critical" for v in page["axe"]), page["axe"]
