"""A submission carrying every script vector of tests/untrusted.py, opened where an instructor or a student looks.

On `make lab` (a fresh copy, headless Chromium, as tests/test_browser.py): the instructor generates 01, autogrades
mallory (every vector in markdown, outputs, attachments and metadata) and alice (a finished notebook with notes of
her own: math, a table, code, a pasted PNG), and generates feedback. Then the views: Formgrader's submission list,
gradebook and manual-grading pages, JupyterLab opening the submitted and the autograded notebook, and the feedback
HTML in JupyterLab, as a page of the server and as the file a student opens (release_feedback and fetch_feedback
copy that file byte for byte). In every view no payload runs: `window.__attnpwn` stays unset, localStorage holds no
mark, and no file appears through the contents API; a control run of the payload on the same page proves each trace
would show. Alice's pages must still show her score tables, maths, table, code and picture. Screenshots go to
.pytest_cache/browser/untrusted-*.png.

Issue 32: mallory's notebook also carries Bootstrap's own modal (`<div class="modal" style="display:block">`, a fake
"session expired") and html.parser's quadratic input; Formgrader's grading page must not be covered (what is at the
centre of the window is Formgrader's or the course's, never mallory's, where a control modal planted by the test is
found). The feedback HTML carries its own Content-Security-Policy: a script planted into a copy of it does not run,
opened from disk or from the server's /files/, while the same copy without the policy runs it from disk (control).
"""

from __future__ import annotations

import json
import re
import time

import nbformat
import pytest

from utils import notebooks as nbs

from .conftest import fill_answers, nbgrader
from .test_browser import ARTIFACTS, Page, browser, chromium, lab  # noqa: F401 - fixtures, shared with the other browser test
from .untrusted import MARK, benign_notes, hostile, payload, vectors

pytestmark = pytest.mark.slow
NB = "01_attention_intuition"
#: Issue 32: Bootstrap's own full-screen modal, which Formgrader's page styles, with a fake login (no script at all).
MODAL = ('<div class="modal" style="display:block"><div class="modal-dialog"><div class="modal-content">'
         '<h3>Session expired</h3><a class="btn btn-primary" href="https://attacker.invalid/login">Log in again</a>'
         '</div></div></div>')
#: Whether what is at the centre of the window is mallory's (an element of her modal, not its text shown as code) or
#: the test's control modal; and how many elements of the notebook's rendered part are positioned or Bootstrap modals.
COVERED = """() => {
    const el = document.elementFromPoint(window.innerWidth / 2, window.innerHeight / 2);
    const cell = el && el.closest('.cell, .jp-Cell');
    const positioned = [...document.querySelectorAll('#notebook-container .text_cell_render *, '
                                                     + '#notebook-container .output_subarea *')]
        .filter(e => ['fixed', 'absolute', 'sticky'].includes(getComputedStyle(e).position)).length;
    // mallory's own element (never the text of her cell shown as code, nor a wrapper holding that code)
    const hers = !!(el && cell && !el.closest('pre') && !el.querySelector('pre')
                    && /Session expired|Log in again/.test(el.textContent));
    return {covered: hers || !!(el && el.closest('#attn-control')), positioned,
            modals: document.querySelectorAll('#notebook-container .modal').length};
}"""


def _class(course) -> dict[str, int]:
    """alice and mallory hand in 01; autograde and feedback as README says. Returns their submission ids."""
    from nbgrader.api import Gradebook

    def in_course(*args: str) -> str:  # the copy's own utils/ (the environment's points at this checkout)
        return nbgrader(course, *args, env={"HOME": str(course.parent / "home"), "PYTHONPATH": str(course)})

    in_course("generate_assignment", NB)
    released = fill_answers(nbs.read(course / "release" / NB / f"{NB}.ipynb"), NB)
    nbs.write(benign_notes(released), course / "submitted" / "alice" / NB / f"{NB}.ipynb")
    # nbformat would refuse to write the invalid cell id one vector carries: write the JSON as a student could.
    path = course / "submitted" / "mallory" / NB / f"{NB}.ipynb"
    path.parent.mkdir(parents=True)
    mallory = hostile(released)
    mallory.cells.append(nbformat.v4.new_markdown_cell(MODAL))
    mallory.cells.append(nbformat.v4.new_markdown_cell("<!--" + "<a" * 32_000))  # CVE-2025-6069's input, 64 KB
    path.write_text(json.dumps(mallory))
    log = in_course("autograde", NB, "--create")
    assert "markdown shown as text" in log and "mallory" in log, log[-3000:]
    in_course("generate_feedback", NB)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {s: gb.find_submission_notebook(NB, NB, s).id for s in ("alice", "mallory")}


def _hostile_report_data(course) -> None:
    """mallory's first and last names script in the gradebook, where her scores are marked down to 0 (so that the
    report lists her among those who may need help, names and all); her autograded report's mistake and section
    script too."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student("mallory", first_name=f'<img src=x onerror="{payload(60)}">',
                                    last_name=f"<script>{payload(61)}</script>")
        for grade in gb.find_submission_notebook(NB, NB, "mallory").grades:  # as if marked down in Formgrader
            grade.manual_score = 0.0
        gb.db.commit()
    path = course / "autograded" / "mallory" / NB / f"{NB}.ipynb"
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        for output in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            found = output.get("data", {}).get("application/vnd.attn.check+json")
            if found:
                found.update(score=0.0, passed=False, mistake=f'<img src=x onerror="{payload(62)}">softmax',
                             section=f"<script>{payload(63)}</script>", lead=[0])
    path.write_text(json.dumps(nb))


class Traces:
    """What a payload leaves: window.__attnpwn (top page), localStorage keys, files written via the contents API."""

    def __init__(self, tab: Page, course) -> None:
        self.tab, self.course = tab, course

    def files(self) -> list[str]:
        return sorted(p.name for p in self.course.glob(f"{MARK}-*.txt"))

    def page(self) -> dict:
        return self.tab.page.evaluate(
            f"""() => {{
                let keys = [];
                try {{ keys = Object.keys(localStorage).filter(k => k.startsWith('{MARK}')); }} catch (e) {{}}
                return {{window: window.__{MARK} || null, storage: keys}};
            }}""")

    def assert_none(self, view: str, settle_s: float = 3.0) -> None:
        self.tab.page.wait_for_timeout(settle_s * 1000)
        page = self.page()
        ran = {"page": page, "files": self.files()}
        assert ran == {"page": {"window": None, "storage": []}, "files": []}, f"{view}: script ran: {ran}"


def test_no_submission_runs_script_where_anyone_looks(lab, browser):  # noqa: F811 - pytest fixtures
    url, _landing, course, log_path = lab
    ids = _class(course)
    tab = Page(browser, url)
    traces = Traces(tab, course)
    timings = {}

    # Control: the payload itself, run on the server's own page, leaves all three traces.
    tab.open("/lab/tree/notebooks")
    tab.page.wait_for_selector(".jp-DirListing-item", timeout=60_000)
    tab.page.evaluate(payload(0))
    deadline = time.monotonic() + 20
    while not traces.files():
        assert time.monotonic() < deadline, "the control payload wrote no file: the test could not see an attack"
        tab.page.wait_for_timeout(250)
    assert traces.page() == {"window": [0], "storage": [f"{MARK}-0"]} and traces.files() == [f"{MARK}-0.txt"]
    (course / f"{MARK}-0.txt").unlink()
    tab.page.evaluate(f"() => {{ localStorage.clear(); delete window.__{MARK}; }}")

    # Formgrader, as the instructor grades: the lists, then each submission's manual-grading page.
    csp_errors: list[str] = []
    tab.page.on("console", lambda m: "Content Security Policy" in m.text and csp_errors.append(m.text))
    for path in (f"/formgrader/manage_submissions/{NB}", f"/formgrader/gradebook/{NB}/{NB}"):
        tab.open(path)
        tab.page.get_by_text("mallory").first.wait_for(state="attached", timeout=60_000)  # names may be hidden
        traces.assert_none(path)
    for student in ("mallory", "alice"):
        t0 = time.monotonic()
        response = tab.page.goto(f"{url}/formgrader/submissions/{ids[student]}/?token=attn-browser-test")
        tab.page.wait_for_selector("#notebook-container .cell", timeout=60_000)
        timings[f"formgrader {student}"] = time.monotonic() - t0
        policy = response.headers.get("content-security-policy", "")
        script_src = next((r for r in policy.split(";") if r.strip().startswith("script-src")), "")
        assert "'nonce-" in script_src and "'unsafe-inline'" not in script_src, policy
        container = tab.page.locator("#notebook-container").first
        assert container.locator("a[href^='javascript' i], [onerror], [onload], iframe, object, embed").count() == 0
        tab.shot(f"untrusted-formgrader-{student}")
        container.locator(".cell").last.scroll_into_view_if_needed()  # the cells the student added
        tab.shot(f"untrusted-formgrader-{student}-end")
        traces.assert_none(f"Formgrader, {student}'s submission")
        text = container.inner_text()
        assert "softmax" in text and " points" in text, "the score tables are shown"
        if student == "mallory":  # her modal, shown as text, covers nothing
            tab.page.evaluate("""() => {  // her cell near the top of the window, so the centre shows what follows
                const cell = [...document.querySelectorAll('#notebook-container .cell')]
                    .find(c => c.textContent.includes('Session expired'));
                cell.scrollIntoView({block: 'start'});
                window.scrollBy(0, -100);
            }""")
            tab.shot("untrusted-formgrader-mallory-modal")
            assert tab.page.evaluate(COVERED) == {"covered": False, "positioned": 0, "modals": 0}
            # Control: the same modal planted by the test does cover the page, and COVERED sees it.
            tab.page.evaluate("html => document.querySelector('#notebook-container').insertAdjacentHTML("
                              "'beforeend', html)", MODAL.replace('class="modal"', 'class="modal" id="attn-control"'))
            assert tab.page.evaluate(COVERED)["covered"], "the control modal did not cover the page"
            tab.page.evaluate("() => document.getElementById('attn-control').remove()")
    # alice's own notes render as she wrote them: heading, maths source, table, code, her picture, a link.
    assert container.locator("h3", has_text="My notes").count() == 1
    assert container.locator("table", has_text="std of scores").count() == 1
    assert container.locator("img[src^='data:image/png']").count() >= 1
    assert container.locator("a[href='https://arxiv.org/abs/1706.03762']").count() == 1
    assert csp_errors == [], f"Formgrader's own scripts or a submission's were refused: {csp_errors}"

    # JupyterLab, as the instructor opens a submission to look closer (its own trust model, then our sanitiser).
    for folder in ("submitted", "autograded"):
        tab.open_notebook(f"{folder}/mallory/{NB}/{NB}.ipynb?reset")
        tab.page.wait_for_timeout(2000)
        tab.shot(f"untrusted-lab-{folder}")
        traces.assert_none(f"JupyterLab, {folder}/mallory")

    # The feedback HTML: in JupyterLab's HTML viewer, as a page of the server, and as the file a student opens.
    feedback = f"feedback/mallory/{NB}/{NB}.html"
    tab.open(f"/lab/tree/{feedback}?reset")
    tab.page.wait_for_selector(".jp-HTMLViewer iframe, iframe", timeout=60_000)
    traces.assert_none("JupyterLab, feedback HTML")
    tab.open(f"/files/{feedback}")
    traces.assert_none("feedback HTML served by the server")
    tab.page.goto((course / feedback).as_uri())
    tab.page.wait_for_selector("body", timeout=30_000)
    tab.shot("untrusted-feedback-file")
    traces.assert_none("feedback HTML opened as a file")
    assert "softmax" in tab.page.inner_text("body")

    # Issue 32: the feedback page's own policy. A script planted into a copy of it (as if something had got past the
    # sanitiser) runs neither from disk nor from /files/; the same copy without the policy runs it from disk.
    written = (course / feedback).read_text()
    assert '<meta http-equiv="Content-Security-Policy"' in written[:written.index("<style")]
    body, end = written.rsplit("</body>", 1)
    planted = f'{body}<script>{payload(40)}</script><img src="x" onerror="{payload(41)}"></body>{end}'
    (course / "feedback" / "planted.html").write_text(planted)
    (course / "feedback" / "control.html").write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "",
                                                             planted))
    control = Page(browser, url)  # its own tab: the errors of the payload it runs are expected
    control.page.goto((course / "feedback" / "control.html").as_uri())
    control.page.wait_for_function(f"() => window.__{MARK} && [40, 41].every(n => window.__{MARK}.includes(n))",
                                   timeout=30_000)
    control.page.evaluate("() => localStorage.clear()")
    control.page.close()
    tab.page.goto((course / "feedback" / "planted.html").as_uri())
    traces.assert_none("planted feedback HTML opened as a file")
    assert "softmax" in tab.page.inner_text("body") and " points" in tab.page.inner_text("body")
    tab.open("/files/feedback/planted.html")
    traces.assert_none("planted feedback HTML served by the server")
    assert "softmax" in tab.page.inner_text("body")
    tab.shot("untrusted-feedback-planted")

    # Issue 37: the class report, as `attn report` writes it and as Formgrader serves it. mallory's names in the
    # gradebook carry script, and so (as if something had got past the grader) do the mistake and section of her
    # autograded report: the page shows them as text, runs nothing, and logs no error. (The page has no script of its
    # own to wait for: a second is enough for an inline handler or a planted script to have run.)
    _hostile_report_data(course)
    from utils import report  # `attn report NB`'s own steps, in this process (the command: tests/test_report.py)

    _page, _table, [data] = report.write(course, [NB])
    assert not data.missing and sorted(s.student for s in data.submissions) == ["alice", "mallory"]
    report_tab = Page(browser, url)
    report_traces = Traces(report_tab, course)
    report_tab.page.goto((course / "reports" / f"{NB}.html").as_uri())
    report_tab.page.wait_for_selector("h1", timeout=30_000)
    report_tab.shot("untrusted-report-file")
    report_traces.assert_none("the class report opened as a file", settle_s=1.0)
    text = report_tab.page.inner_text("body")
    assert "onerror" in text and "mallory" in text and "softmax" in text, "her names and mistake are shown as text"
    assert report_tab.page.locator("img").count() == 1 and report_tab.page.locator("script").count() == 0
    report_tab.open("/formgrader/manage_assignments")
    report_tab.page.get_by_role("link", name="Class report").click()
    report_tab.page.wait_for_selector("h1", timeout=60_000)
    assert "/formgrader/attn-report" in report_tab.page.url
    report_tab.page.get_by_role("link", name=NB[:2], exact=True).click()
    report_tab.page.wait_for_selector("h3", timeout=60_000)
    report_tab.shot("untrusted-report-formgrader")
    report_traces.assert_none("the class report served by Formgrader", settle_s=1.0)
    assert "mallory" in report_tab.page.inner_text("body")
    report_tab.page.get_by_role("link", name="中文").click()
    report_tab.page.wait_for_selector("h1", timeout=60_000)
    assert "班级报告" in report_tab.page.inner_text("h1")
    report_traces.assert_none("the class report in Chinese, served by Formgrader", settle_s=1.0)
    assert report_tab.errors == [], f"the class report logged errors: {report_tab.errors}"

    print(f"untrusted: {len(vectors())} vectors, no trace in any view;",
          ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    assert not [e for e in tab.errors if MARK in e]
    # The policy refused nothing either: Formgrader's own scripts ran, and no script of the submission was left.
    assert "Content security violation" not in log_path.read_text()

