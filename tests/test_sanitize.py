"""A submission is data: every script vector in tests/untrusted.py is removed before any view renders it, and a
normal notebook (the course's own, a learner's notes) looks as it did."""

from __future__ import annotations

import copy
import functools
import html
import re
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from nbgrader.server_extensions.formgrader import handlers as formgrader_handlers

from utils import notebooks as nbs
from utils.formgrader_csp import add_nonce, inline_handlers, policy
from utils.sanitize import SanitizeSubmission, clean_html, markdown_problems, sanitize_notebook

from .untrusted import PNG, audit_html, benign_notes, vector_ids, vectors

NB = "01_attention_intuition"
# The views that render a notebook as HTML: nbconvert's two page templates, and nbgrader's Formgrader page and
# feedback page (which extend them).
TEMPLATES = ("lab", "classic", "formgrade", "feedback")


@functools.cache
def exporter(template: str) -> HTMLExporter:
    """nbconvert's exporter for one view (the Formgrader and feedback templates configured as nbgrader does)."""
    bootstrap = Path(formgrader_handlers.static_path) / "node_modules" / "bootstrap" / "dist" / "css"
    return HTMLExporter(template_name=template, extra_template_basedirs=[formgrader_handlers.template_path],
                        extra_template_paths=[str(bootstrap)])


def render(nb: nbformat.NotebookNode, template: str) -> str:
    """The page a view serves for `nb`."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:  # what nbgrader's GetGrades adds before the feedback page is rendered
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader.setdefault("score", 0)
    resources = {"base_url": "/", "submission_id": "s", "notebook_id": NB, "assignment_id": NB, "index": 0,
                 "total": 1, "student": "mallory", "notebook_path": "x",
                 "nbgrader": {"notebook": NB, "score": 0, "max_score": 3, "late_penalty": 0}}
    return exporter(template).from_notebook_node(nb, resources=resources)[0]


def one_vector(apply) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                         "language": "python"}})
    nb.cells.append(nbformat.v4.new_markdown_cell("# My submission"))
    apply(nb)
    return nb


def test_every_vector_runs_in_some_view_before_and_in_none_after():
    before, after = {}, {}
    for name, _where, apply in vectors():
        raw = one_vector(apply)
        for template in TEMPLATES:
            try:
                before.setdefault(name, set()).update(vector_ids(audit_html(render(raw, template))))
            except Exception:  # noqa: BLE001 - nbconvert refuses some hostile notebooks outright (an invalid cell id)
                pass
            clean = copy.deepcopy(raw)
            sanitize_notebook(clean)
            nbformat.validate(clean)  # what the sanitiser writes is a valid notebook
            found = audit_html(render(clean, template))
            after[(name, template)] = found
    survived = {key: found for key, found in after.items() if found}
    assert not survived, f"script survived the sanitiser: {survived}"
    # The audit bites: most vectors really do put script into nbconvert's HTML when nothing sanitises them (the rest
    # are for JupyterLab's and the widget manager's renderers, which the browser test covers).
    live = {name for name, ids in before.items() if ids}
    assert len(live) >= 14, f"only {sorted(live)} reached nbconvert's HTML unsanitised"
    # Issue 32's two: each cell passed the audit alone, or as a relative link before nbconvert rewrote it.
    assert {"markdown tag split across two cells", "markdown link files/javascript:"} <= live


def test_the_whole_hostile_notebook_through_the_preprocessor_logs_what_it_removed():
    from .untrusted import hostile

    nb = hostile(nbs.read(nbs.release_path(NB)))
    logged: list[str] = []
    pre = SanitizeSubmission()
    pre.log.warning = lambda fmt, *args: logged.append(fmt % args)
    clean, _ = pre.preprocess(nb, {"nbgrader": {"notebook": NB, "student": "mallory"}})
    for template in TEMPLATES:
        assert audit_html(render(clean, template)) == []
    text = "\n".join(logged)
    assert "mallory/01_attention_intuition: notebook metadata removed: language_info, title, widgets" in text
    assert "markdown shown as text (<script>)" in text
    assert "output types removed: application/javascript" in text


@pytest.mark.parametrize("assignment", nbs.assignments())
def test_the_course_notebooks_look_as_they_did(assignment):
    """Course markdown is kept verbatim even when not marked trusted; PNG plots, tables and score reports survive."""
    nb = nbs.read(nbs.solution_path(assignment))
    clean = copy.deepcopy(nb)
    sanitize_notebook(clean)  # no trusted set: the course's markdown must pass on its own
    assert [c.source for c in clean.cells] == [c.source for c in nb.cells]
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    kept = [o for c in clean.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(kept) == len(pngs)
    code = lambda notebook: [c for c in notebook.cells if c.cell_type == "code"]  # noqa: E731
    for old, new in zip(code(nb), code(clean), strict=True):
        for o_old, o_new in zip(old.outputs, new.outputs, strict=True):
            html_old = o_old.get("data", {}).get("text/html")
            if html_old:
                norm = lambda h: re.sub(r"\s|<tbody>|</tbody>|'|\"", "", html.unescape(h))  # noqa: E731 - spelling only
                assert norm(o_new.data["text/html"]) == norm(html_old)


def test_a_learners_own_notes_keep_their_math_tables_code_and_pictures():
    nb = benign_notes(nbformat.v4.new_notebook())
    clean = copy.deepcopy(nb)
    notes = sanitize_notebook(clean)
    assert notes == [] and clean.cells[0].source == nb.cells[0].source
    page = render(clean, "formgrade")
    assert "<table" in page and f"data:image/png;base64,{PNG}" in page and "sqrt{d_k}" in page
    assert 'href="https://arxiv.org/abs/1706.03762"' in page and "color:#cf222e" in page


@pytest.mark.parametrize("text", [
    "$a<b$ and `x<y>` are fine", "```\n<script>not html here</script>\n```", "| a | b |\n|---|---|\n| 1 | 2 |",
    "<b>bold</b> <i>it</i> <code>c</code> <br> <sub>1</sub>", "[link](https://example.org) <https://example.org>",
])
def test_markdown_that_cannot_run_anything_is_kept_as_written(text):
    assert markdown_problems(text) == []


@pytest.mark.parametrize("text", [
    "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", "[x](JaVaScRiPt:alert(1))",
    "<a href=\"java\tscript:x\">x</a>",
    "<a href='&#106;avascript:alert(1)'>x</a>", "<svg><script>1</script></svg>", "<math><mi>x</mi></math>",
    "<div style='position:fixed;inset:0'>over the page</div>", "<a href='data:text/html,<script>1</script>'>x</a>",
    "<object data=x></object>", "<form action=x><button>go</button></form>", "<meta http-equiv=refresh content=0>",
    "<base href=//evil.example/>", "<img src='x' id='submission_id'>", "![x](attachment:missing.png)",
])
def test_markdown_that_could_run_or_cover_the_page_is_shown_as_text(text):
    assert markdown_problems(text), text
    nb = one_vector(lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell(text)))
    sanitize_notebook(nb)
    assert nb.cells[1].source.startswith("*[Shown as text by the course")
    assert markdown_problems(nb.cells[1].source) == []


def test_a_fence_inside_the_cell_cannot_close_the_literal_block():
    text = "```\n</code></pre><img src=x onerror=alert(1)>\n````\n<script>alert(1)</script>"
    nb = one_vector(lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell(text)))
    sanitize_notebook(nb)
    assert markdown_problems(nb.cells[1].source) == []
    assert "alert" in render(nb, "formgrade") and audit_html(render(nb, "formgrade")) == []


def test_clean_html_keeps_the_course_score_table_and_drops_everything_else():
    from utils.grading import report_html

    report = {"id": "softmax", "score": 1, "max_score": 3, "graded": True, "checks": [
        {"name": "shape", "passed": True, "hidden": False, "message": ""},
        {"name": "values", "passed": False, "hidden": True, "message": 'your `x` is <img src=x onerror="attnpwn">'}]}
    table = report_html(report)
    assert audit_html(table) == [], "attn check's own table escapes what the learner's code printed"
    cleaned = clean_html(table)
    assert "color:#1a7f37" in cleaned and "color:#cf222e" in cleaned and "<code>x</code>" in cleaned
    assert "softmax: 1 / 3 points" in cleaned
    assert clean_html('<p style="position:fixed">x</p><style>*{display:none}</style>') == "<p>x</p>"


def test_the_result_mime_type_the_sanitiser_keeps_is_the_graders():
    from utils import grading, sanitize

    assert grading.RESULT_MIME in sanitize._KEPT_MIME


def test_formgrader_policy_allows_no_inline_script_and_nonces_only_the_pages_own():
    csp = policy("N0NCE", "frame-ancestors 'none'; report-uri api/security/csp-report", "/user/ann/")
    script_src = next(r for r in csp.split("; ") if r.startswith("script-src"))
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src and "'nonce-N0NCE'" in script_src
    assert csp.startswith("frame-ancestors 'none'; report-uri /user/ann/api/security/csp-report")
    assert "object-src 'none'" in csp
    # nbgrader's own handlers, read from its templates (onClick= included), and only those
    assert {"toggle_name(true);", "createAssignmentModal();", "createStudentModal();"} <= set(inline_handlers())
    assert all(len(h) < 40 and "(" in h for h in inline_handlers())
    page = (b'<head><script src="/formgrader/static/x.js"></script><SCRIPT>var a=1</SCRIPT></head><body>'
            b'<div id="notebook-container"><script>evil()</script></div></body>')
    out = add_nonce(page, "N0NCE")
    assert out.count(b'nonce="N0NCE"') == 2 and b"<script>evil()</script>" in out
