"""Issue 32: the sanitiser and the views of a submission are bounded, audit the page as nbconvert makes it, and
the feedback page carries a Content-Security-Policy of its own.

The four attacks that worked are pinned here: html.parser's quadratic input (CVE-2025-6069) that stopped a class's
grading, the 9 MB answer that exhausted memory when its feedback was rendered, the two audit bypasses (a tag split
across two cells, a `files/javascript:` link) and Bootstrap's modal covering Formgrader's page. The views are built
from the course's own nbgrader_config.py as nbgrader builds them: Formgrader's exporter from FormgradeExtension's
configuration (nbgrader/server_extensions/formgrader/formgrader.py), the feedback's as GenerateFeedback's converter
makes it. Time bounds are generous (ten times what is measured here or more); what took minutes before takes
seconds.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import nh3
import pytest
from nbconvert import HTMLExporter
from nbconvert.preprocessors import Preprocessor

from utils import notebooks as nbs
from utils import sanitize
from utils.sanitize import (
    CLASSES,
    LEFT_OPEN,
    MARKDOWN_CAP,
    VIEW_BUDGET,
    VIEW_CELLS,
    VIEW_CODE_CAP,
    SanitizeSubmission,
    clean_html,
    feedback_policy,
    html_problems,
    markdown_problems,
    render_markdown,
    sanitize_notebook,
    strip_files_prefix,
    with_feedback_policy,
)

from .untrusted import MARK, audit_html, benign_notes, hostile, payload, vector_ids, vectors

NB = "01_attention_intuition"
ROOT = nbs.ROOT


# -- the views, as nbgrader builds them from the course's configuration -------------------------------------------
@functools.cache
def _formgrade_extension():
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension

    extension = FormgradeExtension()
    extension.root_dir = str(ROOT)
    with contextlib.chdir(ROOT):  # where Formgrader reads nbgrader_config.py: the server's folder, the course's root
        extension.initialize([])
    return extension


def formgrader_exporter() -> HTMLExporter:
    """Formgrader's submission page: `HTMLExporter(config=self.config)` (FormgradeExtension.init_tornado_settings;
    utils.formgrader_csp's rendering threads copy it the same way, `type(shared)(config=shared.config)`)."""
    return HTMLExporter(config=_formgrade_extension().config)


def feedback_exporter() -> HTMLExporter:
    """generate_feedback's exporter: the converter's configuration (the course's nbgrader_config.py, read as nbgrader's
    apps read it), its exporter and preprocessors as BaseConverter.start registers them, GetGrades left out (it reads
    the gradebook: `page()` puts the scores in)."""
    from nbgrader.apps.baseapp import NbGrader
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades

    from utils.submissions import SafeGenerateFeedback

    app = NbGrader()
    with contextlib.chdir(ROOT):
        app.load_config_file()
    converter = SafeGenerateFeedback(coursedir=CourseDirectory(root=str(ROOT)), parent=app)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for preprocessor in converter.preprocessors:
        exporter.register_preprocessor(_Scores if preprocessor is GetGrades else preprocessor, enabled=True)
    return exporter


class _Scores(Preprocessor):
    """What nbgrader's GetGrades adds to each grade cell (from the gradebook, which these tests do not make)."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade"):
                cell.metadata.nbgrader.setdefault("score", 0)
        return nb, resources


def page(exporter: HTMLExporter, nb: nbformat.NotebookNode, student: str = "mallory") -> str:
    nb = copy.deepcopy(nb)
    resources = {"base_url": "/", "submission_id": "s", "notebook_id": NB, "assignment_id": NB, "index": 0,
                 "total": 1, "student": student, "notebook_path": "x",
                 "nbgrader": {"notebook": NB, "student": student, "score": 0, "max_score": 3, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources=resources)[0]


def views() -> dict[str, HTMLExporter]:
    return {"formgrader": formgrader_exporter(), "feedback": feedback_exporter()}


def submission(*markdown: str) -> nbformat.NotebookNode:
    nb = nbs.read(nbs.release_path(NB))
    nb.cells.extend(nbformat.v4.new_markdown_cell(text) for text in markdown)
    return nb


def timed(fn, *args):
    start = time.monotonic()
    result = fn(*args)
    return result, time.monotonic() - start


def test_formgraders_exporter_and_feedbacks_get_the_course_configuration():
    """c.HTMLExporter in nbgrader_config.py reaches the exporter Formgrader builds and generate_feedback's (and the
    copy each of Formgrader's rendering threads makes of it, utils.formgrader_csp.thread_exporter)."""
    from utils import formgrader_csp

    exporters = {**views(), "formgrader's thread": formgrader_csp.thread_exporter(formgrader_exporter())}
    for name, exporter in exporters.items():
        names = [type(p).__name__ for p in exporter._preprocessors]
        assert "BoundedView" in names, (name, names)
        assert exporter.filters["markdown2html"] is sanitize.SafeMarkdown2HTML, name
        assert exporter.filters["strip_files_prefix"] is sanitize.clean_strip_files_prefix, name
    assert formgrader_exporter().template_name == "formgrade" and feedback_exporter().template_name == "feedback"
    # feedback: the views' bound first (the exporter's own), then the converter's sanitiser, hidden tests, CSS
    names = [type(p).__name__ for p in feedback_exporter()._preprocessors if p.enabled]
    assert names.index("BoundedView") < names.index("SanitizeSubmission") < names.index("ClearHiddenTests")


# -- 1. html.parser's quadratic input (CVE-2025-6069) ---------------------------------------------------------------
@pytest.mark.parametrize("size", [30_000, 65_536, 1_000_000])
def test_the_html_parser_cve_input_is_audited_in_linear_time_and_shown_as_text(size):
    """An unterminated comment and many `<a`: 64 KB took html.parser 13.9 s, 600 KB about 26 minutes. Audited (under
    the cap) or left unrendered (over it), the cell is shown as text, with a line in the log, in well under a second;
    the pages of both views, BeautifulSoup's parse included, take seconds."""
    cve = "<!--" + "<a" * ((size - 4) // 2)
    nb = submission(cve)
    notes, took = timed(sanitize_notebook, nb)
    assert took < 10, f"{took:.1f} s"
    assert nb.cells[-1].source.startswith("*[Shown as text by the course") and cve in nb.cells[-1].source
    index = len(nb.cells) - 1
    line = next(n for n in notes if f"cell {index}" in n)
    assert "markdown shown as text" in line
    assert (LEFT_OPEN in line) if size <= MARKDOWN_CAP else (f"over {MARKDOWN_CAP} characters" in line)
    for name, exporter in views().items():
        html, took = timed(page, exporter, nb)
        assert took < 30, f"{name}: {took:.1f} s"
        assert "Shown as text by the course" in html and "&lt;!--&lt;a&lt;a" in html, name
    # An autograded notebook made by an older configuration (never sanitised) is bounded in the views too.
    html, took = timed(page, formgrader_exporter(), submission(cve))
    assert took < 30 and "<!--<a" not in html, f"{took:.1f} s"


# -- 3a. a tag split across two cells --------------------------------------------------------------------------------
@pytest.mark.parametrize("html_", [
    "<details open title='", '<img src="x" alt="', "<b>bold", '<a href="https://example.org">left open', "x</div>",
    "<div><div>x</div>", "text <!-- comment", "<table><tr><td>x", "<ul><li>x", "<p title='x'>y</p><span",
    "<![CDATA[x", "<?php x", "<!x",
])
def test_a_cell_must_close_what_it_opens(html_):
    assert LEFT_OPEN in html_problems(html_), html_


@pytest.mark.parametrize("html_", [
    "<p>x</p>", "<p>open paragraph", "x <!-- a comment --> y", "<b>x</b> <i>y</i>", "</p>", "<br>", "a &amp; b < c",
    "<table><tr><td>1</td></tr></table>", "$a&lt;b$", '<details><summary>more</summary>hidden</details>',
])
def test_markup_that_closes_is_self_contained(html_):
    assert LEFT_OPEN not in html_problems(html_), html_


def test_a_tag_split_across_two_cells_is_shown_as_text_and_dead_in_every_view():
    name, _where, apply = next(v for v in vectors() if v[0] == "markdown tag split across two cells")
    raw = nbformat.v4.new_notebook()
    apply(raw)
    first, second = (c.source for c in raw.cells)
    assert markdown_problems(second) == [], "the second cell alone is plain text: only the page shows the attack"
    assert markdown_problems(first) == [LEFT_OPEN]
    nb = submission(first, second)
    notes = sanitize_notebook(nb)
    assert any("markdown shown as text (" + LEFT_OPEN in n for n in notes), notes
    for view, exporter in views().items():
        html = page(exporter, nb)
        assert "ontoggle=" not in html.replace("ontoggle='(function", ""), view  # only as text, never an attribute
        assert audit_html(html) == [], view
    # Defence at render time: never sanitised, an older autograded notebook's markdown is cleaned where it renders.
    for view, exporter in views().items():
        assert vector_ids(audit_html(page(exporter, submission(first, second)))) == set(), view


def test_the_page_is_audited_as_a_whole(monkeypatch):
    """Each learner cell kept as markup passes alone; the cells joined as the page joins them are audited once more,
    and should that find anything, every one of them is shown as text, with one line in the log."""
    real = sanitize.html_problems
    seen = []

    def joined_is_bad(text):
        seen.append(text)
        return ["<joined>"] if text.count("<div>") >= 2 and "first" in text and "second" in text else real(text)

    monkeypatch.setattr(sanitize, "html_problems", joined_is_bad)
    nb = submission("my *first* note", "my **second** note")
    notes = sanitize_notebook(nb, nbs_markdown := frozenset(c.source for c in nbs.read(nbs.release_path(NB)).cells))
    assert nbs_markdown
    assert [c.source.startswith("*[Shown as text") for c in nb.cells[-2:]] == [True, True]
    assert sum("the cells together" in n for n in notes) == 1, notes
    assert any("first" in s and "second" in s for s in seen)


# -- 3b. a files/javascript: link ------------------------------------------------------------------------------------
def test_a_files_link_is_audited_after_nbconverts_rewriting():
    text = "[my notes](files/javascript:alert(1))"
    assert 'href="files/javascript:' in render_markdown(text), "mistune lets it through as a relative link"
    assert 'href="javascript:' in strip_files_prefix(render_markdown(text)), "the templates' filter rewrites it"
    assert any("javascript:" in p for p in markdown_problems(text))
    assert markdown_problems("[my notes](files/notes.txt)") == []
    # render time: the rewritten link never reaches a page, sanitised or not
    for view, exporter in views().items():
        assert "javascript:" not in page(exporter, submission(text)).split('id="notebook-container"')[1], view


def test_nbconverts_files_prefix_rewriting_is_linear_here():
    """nbconvert's strip_files_prefix is quadratic on a line of '[' (32,000 took 5.8 s): the sanitiser's and the
    views' own does the same rewriting in linear time, and the audit refuses what nbconvert's would choke on."""
    line = "files/ " + "[" * 200_000
    _, took = timed(strip_files_prefix, line)
    assert took < 2, f"{took:.1f} s"
    assert strip_files_prefix('<a href="files/x.txt">[x](files/y.png)</a>') == '<a href="x.txt">[x](y.png)</a>'
    problems, took = timed(markdown_problems, ("files/ " + "[" * 31_000))
    assert took < 5 and problems and "not rendered" in problems[0]


# -- time and size: what mistune, html5ever and nbconvert take superlinear time on ---------------------------------
@pytest.mark.parametrize("name, text", [
    ("maths openers", "\\\\[" * 10_000), ("maths environments", "\\begin{a}" * 3_500),
    ("maths openers before another's closer", "\\begin{a}" * 3_500 + "\\end{b}"),
    ("nested divs", "<div>" * 6_000), ("nested blockquotes", "> " * 15_000 + "x"),
    ("emphasis", "*_" * 15_000), ("setext headings", "a\n=\n" * 7_500),
])
def test_markdown_that_renders_in_superlinear_time_is_bounded(name, text):
    nb = submission(text)
    _, took = timed(sanitize_notebook, nb)
    assert took < 10, f"{name}: {took:.1f} s"


def test_an_html_output_too_deep_to_parse_in_bounded_time_is_dropped():
    """html5ever's tree builder is quadratic in nesting depth (40,000 nested <div> took 4 s): an HTML output with
    more tags than HTML_TAG_CAP is not parsed; its text stays."""
    nb = nbs.read(nbs.release_path(NB))
    cell = nbformat.v4.new_code_cell("show()", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<div>" * 200_000,
                                                                  "text/plain": "<HTML>"})]
    nb.cells.append(cell)
    notes, took = timed(sanitize_notebook, nb)
    assert took < 5, f"{took:.1f} s"
    assert nb.cells[-1].outputs[0].data == {"text/plain": "<HTML>"}
    assert any("output types removed: text/html" in n for n in notes)


def test_a_notebooks_markdown_has_a_budget_and_one_line_in_the_log(monkeypatch):
    monkeypatch.setattr(sanitize, "NOTEBOOK_BUDGET_CHARS", 2_000)
    course = sanitize.course_markdown(NB)
    nb = submission(*[f"note {i}: " + "words " * 100 for i in range(12)])
    notes = sanitize_notebook(nb, course)
    literal = [c for c in nb.cells[-12:] if c.source.startswith("*[Shown as text by the course")]
    assert 8 <= len(literal) <= 11, len(literal)  # the first cells were rendered; the rest are text
    budget = [n for n in notes if "over this notebook's budget" in n]
    assert len(budget) == 1 and len(notes) == 1, notes
    monkeypatch.setattr(sanitize, "NOTEBOOK_BUDGET_SECONDS", 0.0)
    nb = submission(*[f"note {i}" for i in range(300)])
    notes = sanitize_notebook(nb, course)
    assert all(c.source.startswith("*[Shown as text") for c in nb.cells[-300:])
    assert len(notes) == 1 and "cells" in notes[0] and "and 290 more" in notes[0], notes
    # the course's own markdown is never on the budget
    assert [c.source for c in nb.cells[:-300]] == [c.source for c in nbs.read(nbs.release_path(NB)).cells]


# -- 2. rendering is bounded: the 9 MB answer ------------------------------------------------------------------------
def _nine_mb_answer() -> nbformat.NotebookNode:
    nb = nbs.read(nbs.release_path(NB))
    answer = next(c for c in nb.cells if nbs.is_answer_cell(c))
    answer.source = "x = " + "1+" * 4_500_000 + "1\n" + answer.source
    return nb


def render_nine_mb_feedback() -> dict:
    """The 9 MB answer's feedback page and Formgrader page, rendered here: seconds, peak memory, what the page says."""
    nb = _nine_mb_answer()
    sanitized = copy.deepcopy(nb)
    SanitizeSubmission().preprocess(sanitized, {"nbgrader": {"notebook": NB, "student": "mallory"}})
    start = time.monotonic()
    feedback = with_feedback_policy(page(feedback_exporter(), sanitized))
    formgrader = page(formgrader_exporter(), sanitized)
    seconds = time.monotonic() - start
    return {"seconds": round(seconds, 2), "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "feedback_bytes": len(feedback), "formgrader_bytes": len(formgrader),
            "noted": all(re.search(r"This cell was cut here by the course: 9\d{6} characters, the first 20000 shown",
                                   p) for p in (feedback, formgrader)),
            "graded_whole": len(next(c for c in sanitized.cells if nbs.is_answer_cell(c)).source) > 9_000_000}


def test_a_nine_mb_answer_renders_cut_with_a_note_under_a_memory_cap():
    """Issue 32: 9.1 MB of `1+1+...` graded fine, then generate_feedback was killed at 8 GB after 504 s and
    Formgrader's page froze its server. Here both pages render in a process limited to 3 GB of address space."""
    limit = 3 << 30

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.run([sys.executable, "-c", "import json, tests.test_sanitize_bounds as t; "
                           "print(json.dumps(t.render_nine_mb_feedback()))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, preexec_fn=cap,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print("9 MB answer:", result)
    assert result["noted"] and result["graded_whole"], result
    assert result["seconds"] < 60 and result["feedback_bytes"] < 5_000_000, result


def test_the_views_cut_cells_outputs_and_pages_but_never_the_courses():
    nb = nbs.read(nbs.release_path(NB))
    course = [c.source for c in nb.cells]
    for i in range(VIEW_CELLS + 500):
        nb.cells.append(nbformat.v4.new_code_cell(f"x = {i}"))
    loud = nbformat.v4.new_code_cell("print('x' * 10**7)", execution_count=1)
    loud.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 10_000_000)]
    nb.cells.insert(3, loud)
    html, took = timed(page, formgrader_exporter(), nb)
    assert took < 60, f"{took:.1f} s"
    assert "x" * 10_000_000 not in html and "This output was cut here by the course: 10000000 characters" in html
    assert f"501 more cells of the learner's are not shown here: over {VIEW_CELLS} cells" in html
    view = copy.deepcopy(nb)
    sanitize.bound_view(view, sanitize.course_sources(NB))
    assert [c.source for c in view.cells if c.source in course] == course, "the course's cells are all shown, whole"
    shown = sum(len(c.source) for c in view.cells if c.source not in course and c.cell_type == "code")
    assert shown <= VIEW_BUDGET + 200 * (VIEW_CELLS + 1), shown
    longest = max(len(c.source) for a in nbs.assignments() for c in nbs.read(nbs.solution_path(a)).cells)
    assert min(VIEW_CODE_CAP, sanitize.VIEW_TEXT_CAP, MARKDOWN_CAP) >= 4 * longest, "room for any cell like the course's"


def test_grading_never_cuts():
    """SanitizeSubmission runs in autograde: the 9 MB answer and a huge markdown note stay whole (the note as text)."""
    nb = _nine_mb_answer()
    nb.cells.append(nbformat.v4.new_markdown_cell("note " * 100_000))
    sanitize_notebook(nb)
    assert len(next(c for c in nb.cells if nbs.is_answer_cell(c)).source) > 9_000_000
    assert "note " * 100_000 in nb.cells[-1].source


# -- 3. the feedback page's own policy -------------------------------------------------------------------------------
def test_the_feedback_page_carries_a_strict_policy_of_its_own():
    nb = copy.deepcopy(hostile(nbs.read(nbs.release_path(NB))))
    nb.cells = [c for c in nb.cells if '"' not in str(c.get("id"))]  # nbconvert refuses the invalid id
    written = with_feedback_policy(page(feedback_exporter(), nb))
    head = written[:written.index("</head>")]
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', head)
    assert meta and head.index(meta.group(0)) < head.index("<meta charset") < head.index("<script"), head[:400]
    policy = dict(rule.split(" ", 1) for rule in meta.group(1).split("; "))
    assert policy["script-src"] == "'none'", "nbgrader's feedback template has no script of its own to allow"
    assert policy["default-src"] == policy["connect-src"] == policy["object-src"] == "'none'"
    assert policy["form-action"] == policy["base-uri"] == policy["frame-src"] == "'none'"
    assert policy["img-src"] == "data:" and "unsafe-inline" not in policy["script-src"]
    assert "http" not in meta.group(1), "nothing is fetched from outside (MathJax included)"
    assert "points</b>" in written or "softmax" in written
    # A page whose template has an inline script of its own gets it allowed by hash, and only it.
    own = "<html><head><script>var a = 1;</script></head><body><div id=\"notebook-container\"><script>evil()" \
          "</script></div></body></html>"
    script_src = dict(r.split(" ", 1) for r in feedback_policy(own).split("; "))["script-src"]
    assert script_src.startswith("'sha256-") and script_src.count("sha256") == 1


def test_safe_generate_feedback_writes_the_policy(tmp_path):
    from nbconvert.writers import FilesWriter
    from nbgrader.coursedir import CourseDirectory

    from utils.submissions import SafeGenerateFeedback

    converter = SafeGenerateFeedback(coursedir=CourseDirectory(root=str(tmp_path)))
    converter.writer = FilesWriter(parent=converter)
    converter.write_single_notebook("<!DOCTYPE html>\n<html>\n<head>\n<title>x</title></head><body>x</body></html>",
                                    {"nbgrader": {"assignment": "a1", "student": "ann"}, "unique_key": "nb",
                                     "output_extension": ".html"})
    written = (tmp_path / "feedback" / "ann" / "a1" / "nb.html").read_text()
    assert written.startswith('<!DOCTYPE html>\n<html>\n<head>\n<meta http-equiv="Content-Security-Policy"')


# -- 4. styles and classes cannot cover or imitate the page ----------------------------------------------------------
COVERS = [
    '<div class="modal" style="display:block">Session expired. <a href="https://attacker.invalid">Log in again</a>'
    '</div>',
    '<div class="navbar navbar-fixed-top">x</div>', '<span class="modal-backdrop in">x</span>',
    '<span style="padding:5000px;background-color:white">x</span>', '<p style="margin-top:-400px">x</p>',
    '<div style="position:fixed;inset:0">x</div>', '<div style="z-index:9999">x</div>',
    '<p style="font-size:900px">x</p>', '<table style="width:5000px"><tr><td>x</td></tr></table>',
    '<p style="border:3000px solid white">x</p>', '<p style="transform:scale(50)">x</p>',
    '<p style="display:none">x</p>', '<span style="vertical-align:-900px">x</span>', '<span class="k pull-right">x</span>',
    '<p style="color:red;padding:100%">x</p>',
]


@pytest.mark.parametrize("cover", COVERS)
def test_styles_and_classes_cannot_cover_or_imitate_the_page(cover):
    assert markdown_problems(cover), cover
    nb = submission(cover)
    sanitize_notebook(nb)
    assert nb.cells[-1].source.startswith("*[Shown as text by the course")
    cleaned = clean_html(cover)
    for cls in re.findall(r'class="([^"]*)"', cleaned):
        assert all(c in CLASSES["span"] | CLASSES["div"] | CLASSES["a"] for c in cls.split()), cleaned
    for style in re.findall(r'style="([^"]*)"', cleaned):
        for declaration in style.split(";"):
            prop = declaration.split(":")[0].strip()
            assert prop and not re.match(r"position|display|z-index|margin|width|height|font-size|transform|inset",
                                         prop), cleaned
            assert not re.search(r"\d{3,}px|%|-\d", declaration), cleaned


def test_a_learners_colours_and_the_courses_tables_keep_their_styles():
    from utils.grading import report_html

    kept = '<span style="color:#cf222e; font-weight:bold">x</span><p style="text-align:center; padding:2px 8px">y</p>'
    assert markdown_problems(kept) == []
    report = {"id": "softmax", "score": 1, "max_score": 3, "graded": True, "checks": [
        {"name": "shape", "passed": True, "hidden": False, "message": ""},
        {"name": "values", "passed": False, "hidden": True, "message": "off by one"}]}
    table = report_html(report)
    assert html_problems(table) == [] and "margin-left:0" in clean_html(table)


def test_no_stylesheet_of_the_pages_positions_or_hides_with_a_class_the_sanitiser_keeps():
    """The classes kept (pygments' tokens, "highlight", "anchor-link") are styled only as code and anchors."""
    from nbgrader.server_extensions.formgrader import handlers

    kept = set().union(*CLASSES.values())
    sheets = [*Path(handlers.static_path).rglob("*.css"),
              *(Path(sys.prefix) / "share" / "jupyter" / "nbconvert" / "templates").rglob("*.css")]
    assert len(sheets) >= 5
    for sheet in sheets:
        text = re.sub(r"/\*.*?\*/", "", sheet.read_text(errors="replace"), flags=re.DOTALL)
        for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
            used = {c for c in re.findall(r"\.([A-Za-z_][\w-]*)", selectors)} & kept
            if used and re.search(r"position\s*:\s*(fixed|absolute|sticky)|z-index|display\s*:\s*none", body):
                pytest.fail(f"{sheet.name}: {selectors.strip()[:80]} {{{body[:80]}}}")


@pytest.mark.parametrize("assignment", nbs.assignments())
def test_the_course_markdown_looks_the_same_through_the_views_cleaning(assignment):
    """Every class, attribute and element of the course's rendered markdown survives the views' nh3 cleaning."""
    for cell in nbs.read(nbs.solution_path(assignment)).cells:
        if cell.cell_type != "markdown":
            continue
        rendered = strip_files_prefix(render_markdown(cell.source, cell.get("attachments")))
        as_is = nh3.clean(rendered, tags=sanitize.TAGS, clean_content_tags=set(), generic_attribute_prefixes={""},
                          link_rel=None, url_schemes=sanitize.URL_SCHEMES | {"data"}, strip_comments=True)
        assert clean_html(rendered).replace(' rel="noopener noreferrer nofollow"', "") == as_is, cell.source[:80]


def test_benign_notes_render_in_the_configured_views_as_before():
    nb = benign_notes(nbs.read(nbs.release_path(NB)))
    sanitize_notebook(nb)
    for view, exporter in views().items():
        html = page(exporter, nb, "alice")
        assert "<table" in html and "sqrt{d_k}" in html and "$a&lt;b$" in html, view
        assert 'href="https://arxiv.org/abs/1706.03762"' in html and "color:#cf222e" in html, view
        assert '<span class="n">weights</span>' in html, view


def test_every_vector_is_dead_in_the_configured_views_even_unsanitised():
    """Render-time defence: an autograded notebook made by an older configuration, never sanitised, rendered by the
    views as the course configures them: no markdown or output vector puts script into the page."""
    for name, where, apply in vectors():
        if where not in ("markdown", "output", "attachment"):
            continue  # metadata vectors: the sanitiser's (and test_sanitize's) business
        nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}})
        nb.cells.append(nbformat.v4.new_markdown_cell("# My submission"))
        apply(nb)
        for view, exporter in views().items():
            assert audit_html(page(exporter, nb).split('id="notebook-container"')[1]) == [], (name, view)
    assert MARK in payload(1)


@pytest.mark.slow
def test_nbgraders_own_generate_feedback_of_the_nine_mb_answer_is_bounded(tmp_path):
    """The whole route with nbgrader's own commands: autograde grades the 9 MB answer whole (and the CVE cell and the
    split tag are shown as text, one line each in the log); generate_feedback, in a process limited to 3 GB of
    address space, writes a page with the answer cut, a note, and the page's own policy."""
    import shutil

    from .conftest import fill_answers

    course = tmp_path / "course"
    shutil.copytree(nbs.SOLUTIONS / NB, course / "solutions" / NB)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    env = {**os.environ, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

    def nbgrader(*args: str, limit: int | None = None) -> str:
        def cap() -> None:
            if limit:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                              text=True, timeout=600, preexec_fn=cap)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        return proc.stderr + f"\n[took {time.monotonic() - start:.1f} s]"

    nbgrader("generate_assignment", NB)
    released = nbs.read(course / "release" / NB / f"{NB}.ipynb")
    nb = fill_answers(released, NB)
    answer = next(c for c in nb.cells if nbs.is_answer_cell(c))
    answer.source = "x = " + "1+" * 4_500_000 + "1\n" + answer.source
    split = next(v for v in vectors() if v[0] == "markdown tag split across two cells")[2]
    nb.cells.append(nbformat.v4.new_markdown_cell("<!--" + "<a" * 32_000))
    split(nb)
    nbs.write(nb, course / "submitted" / "mallory" / NB / f"{NB}.ipynb")
    log = nbgrader("autograde", NB, "--create")
    assert "markdown shown as text, unrendered: over 32000 characters" in log
    assert f"markdown shown as text ({LEFT_OPEN})" in log
    graded = nbs.read(course / "autograded" / "mallory" / NB / f"{NB}.ipynb")
    assert max(len(c.source) for c in graded.cells) > 9_000_000, "grading keeps the whole answer"
    log = nbgrader("generate_feedback", NB, limit=3 << 30)
    took = float(re.search(r"\[took ([\d.]+) s\]", log).group(1))
    written = (course / "feedback" / "mallory" / NB / f"{NB}.html").read_text()
    print(f"generate_feedback of the 9 MB answer: {took:.1f} s, page {len(written):,} bytes")
    assert took < 120 and len(written) < 5_000_000
    assert re.search(r"This cell was cut here by the course: 9\d{6} characters, the first 20000 shown", written)
    assert written.index('<meta http-equiv="Content-Security-Policy"') < written.index("<meta charset")
    assert audit_html(written) == [] and "points</b>" in written
