"""Script vectors a student can hide in a submitted notebook, and an audit that finds any that survived in HTML.

Each vector runs `payload(n)` if a view lets it: the payload records its number in `window.top.__attnpwn` and in
localStorage, and writes `attnpwn-<n>.txt` through the Jupyter contents API with the viewer's own session, which is
what the real attack did. Every payload carries MARK, so `audit_html` can find a survivor in any HTML a view serves.
"""

from __future__ import annotations

import base64
import copy
from html.parser import HTMLParser

import nbformat
from nbformat import NotebookNode

MARK = "attnpwn"
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201e2265a7f0000000049454e44ae426082")).decode()


def payload(n: int, base: str = "/") -> str:
    """JavaScript (no double quotes, no angle brackets) that leaves three traces when it runs."""
    return (
        "(function(){var w=window;try{w=window.top}catch(e){}"
        f"try{{w.__{MARK}=(w.__{MARK}||[]).concat([{n}])}}catch(e){{}}"
        f"try{{localStorage.setItem('{MARK}-{n}','1')}}catch(e){{}}"
        "var m=document.cookie.match(/_xsrf=([^;]+)/);"
        f"fetch('{base}api/contents/{MARK}-{n}.txt',{{method:'PUT',credentials:'include',"
        "headers:{'Content-Type':'application/json','X-XSRFToken':m?decodeURIComponent(m[1]):''},"
        "body:JSON.stringify({type:'file',format:'text',content:'written by a submission'})})})()"
    )


def _output(mime_bundle: dict, metadata: dict | None = None) -> NotebookNode:
    return nbformat.v4.new_output("display_data", data=mime_bundle, metadata=metadata or {})


def vectors(base: str = "/") -> list[tuple[str, str, callable]]:
    """(name, where, apply(nb)) for every vector; each `apply` adds its vector to `nb`."""
    P = lambda n: payload(n, base)  # noqa: E731

    def markdown(n: int, text: str):
        return lambda nb: nb.cells.append(nbformat.v4.new_markdown_cell(text))

    def output(n: int, bundle: dict, metadata: dict | None = None):
        def apply(nb: NotebookNode) -> None:
            cell = nbformat.v4.new_code_cell("print('my notes')", execution_count=1)
            cell.outputs = [_output(bundle, metadata)]
            nb.cells.append(cell)
        return apply

    def widget(nb: NotebookNode) -> None:
        model = "attn0000000000000000000000000001"
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
            "state": {model: {"model_name": "HTMLModel", "model_module": "@jupyter-widgets/controls",
                              "model_module_version": "2.0.0",
                              "state": {"value": f'<img src=x onerror="{P(13)}">'}}}}}
        cell = nbformat.v4.new_code_cell("widget", execution_count=1)
        cell.outputs = [_output({"application/vnd.jupyter.widget-view+json": {"model_id": model, "version_major": 2,
                                                                                "version_minor": 0},
                                 "text/plain": "HTML()"})]
        nb.cells.append(cell)

    def attachment_svg(nb: NotebookNode) -> None:
        svg = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{P(14)}"><script>{P(14)}</script></svg>'
        cell = nbformat.v4.new_markdown_cell("![diagram](attachment:diagram.svg)")
        cell.attachments = {"diagram.svg": {"image/svg+xml": base64.b64encode(svg.encode()).decode()}}
        nb.cells.append(cell)

    def attachment_name(nb: NotebookNode) -> None:
        name = f'x.png" onerror="{P(15)}'
        cell = nbformat.v4.new_markdown_cell(f"![x](attachment:{name})")
        cell.attachments = {name: {"image/png": PNG}, "page.html": {"text/html": f"<script>{P(15)}</script>"}}
        nb.cells.append(cell)

    def cell_tags(nb: NotebookNode) -> None:
        cell = nbformat.v4.new_code_cell("x = 1", execution_count=1)
        # nbformat forbids commas in a tag: the short payload has none.
        cell.metadata["tags"] = [f'x" onmouseover="top.__{MARK}=(top.__{MARK}||[]).concat([16])" '
                                 'style="display:block;position:fixed;inset:0" y="']
        nb.cells.append(cell)

    def notebook_title(nb: NotebookNode) -> None:
        nb.metadata["title"] = f"</title><script>{P(17)}</script>"
        nb.metadata["language_info"] = {"name": f"python<img src=x onerror=\"{P(17)}\">"}

    def raw_html(nb: NotebookNode) -> None:
        cell = nbformat.v4.new_raw_cell(f'<script>{P(18)}</script><img src=x onerror="{P(18)}">')
        cell.metadata["raw_mimetype"] = "text/html"
        nb.cells.append(cell)

    def cell_id(nb: NotebookNode) -> None:
        cell = nbformat.v4.new_markdown_cell("a note")
        cell["id"] = f'x"><img src=x onerror="{P(19)}">'
        nb.cells.append(cell)

    def split_across_cells(nb: NotebookNode) -> None:
        # Issue 32: a tag left open at the end of one cell (an HTML block: raw to the page) takes in the page's markup
        # up to the next cell, whose plain text closes the attribute and adds a handler. mistune writes `"` in text as
        # &quot;, which the browser decodes inside the attribute: the payload's quotes become double ones.
        nb.cells.append(nbformat.v4.new_markdown_cell("My notes\n\n<details open title='"))
        nb.cells.append(nbformat.v4.new_markdown_cell(f"' ontoggle='{P(21).replace(chr(39), chr(34))}'>more</details>"))

    def output_metadata(nb: NotebookNode) -> None:
        cell = nbformat.v4.new_code_cell("plot()", execution_count=1)
        cell.outputs = [_output({"image/png": PNG, "text/plain": "<Figure>"},
                                {"image/png": {"width": f'1" onerror="{P(20)}" x="'}})]
        nb.cells.append(cell)

    return [
        ("markdown <script>", "markdown", markdown(1, f"My notes <script>{P(1)}</script>")),
        ("markdown <img onerror>", "markdown", markdown(2, f'<img src=x onerror="{P(2)}">')),
        ("markdown <svg onload>", "markdown", markdown(3, f'<svg onload="{P(3)}"></svg>')),
        ("markdown <iframe srcdoc>", "markdown", markdown(4, f'<iframe srcdoc="<script>{P(4)}</script>"></iframe>')),
        ("markdown <details ontoggle>", "markdown",
         markdown(5, f'<details open ontoggle="{P(5)}"><summary>more</summary>hidden</details>')),
        ("markdown <input autofocus onfocus>", "markdown", markdown(6, f'<input autofocus onfocus="{P(6)}">')),
        ("markdown link javascript:", "markdown", markdown(7, f"[see my notes](<javascript:{P(7)}>)")),
        ("output text/html <img onerror>", "output", output(8, {"text/html": f'<img src=x onerror="{P(8)}">'})),
        ("output text/html <script>", "output", output(9, {"text/html": f"<b>result</b><script>{P(9)}</script>"})),
        ("output application/javascript", "output", output(10, {"application/javascript": P(10)})),
        ("output image/svg+xml", "output", output(11, {"image/svg+xml": (
            f'<svg xmlns="http://www.w3.org/2000/svg" onload="{P(11)}"><script>{P(11)}</script></svg>')})),
        ("output text/markdown", "output", output(12, {"text/markdown": f'<img src=x onerror="{P(12)}">'})),
        ("widget state in notebook metadata", "metadata", widget),
        ("attachment image/svg+xml", "attachment", attachment_svg),
        ("attachment with a hostile name, and text/html", "attachment", attachment_name),
        ("cell tags breaking out of class=", "metadata", cell_tags),
        ("notebook title and language_info", "metadata", notebook_title),
        ("raw cell text/html", "raw cell", raw_html),
        ("cell id breaking out of id=", "metadata", cell_id),
        ("output metadata image width", "output metadata", output_metadata),
        ("markdown tag split across two cells", "markdown", split_across_cells),
        # Issue 32: a relative link passes as one; the templates' strip_files_prefix, after markdown2html, makes it
        # `javascript:`.
        ("markdown link files/javascript:", "markdown", markdown(22, f"[see my notes](<files/javascript:{P(22)}>)")),
    ]


def hostile(nb: NotebookNode, base: str = "/") -> NotebookNode:
    """A copy of `nb` carrying every vector."""
    nb = copy.deepcopy(nb)
    for _name, _where, apply in vectors(base):
        apply(nb)
    return nb


def benign_notes(nb: NotebookNode) -> NotebookNode:
    """A copy of `nb` with what a learner's own notes look like: math, a table, code, a pasted PNG, a link."""
    nb = copy.deepcopy(nb)
    cell = nbformat.v4.new_markdown_cell(
        "### My notes\n\nThe scores are $s_{ij} = q_i \\cdot k_j / \\sqrt{d_k}$ and $a<b$ stays maths.\n\n"
        "| d_k | std of scores |\n|---|---|\n| 16 | 4.0 |\n| 64 | 8.0 |\n\n"
        "```python\nweights = softmax(scores, dim=-1)  # rows sum to 1\n```\n\n"
        "![my sketch](attachment:sketch.png) <b>bold</b>, <span style=\"color:#cf222e\">red</span>, "
        "[the paper](https://arxiv.org/abs/1706.03762)")
    cell.attachments = {"sketch.png": {"image/png": PNG}}
    nb.cells.append(cell)
    return nb


class _Audit(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if MARK in (value or "").lower() or MARK in name.lower():
                self.found.append(f"<{tag} {name}={value or ''!r}>")
        self._in_script = tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script and MARK in data.lower():
            self.found.append(f"script: {data.strip()!r}")


def audit_html(text: str) -> list[str]:
    """Places in `text` where a payload could run: inside an attribute or a script/style element."""
    audit = _Audit()
    audit.feed(text)
    audit.close()
    return audit.found


def vector_ids(found: list[str]) -> set[int]:
    """Which vectors' payloads `found` (audit_html's answer) holds."""
    import re
    from urllib.parse import unquote

    return {int(n) for f in found for n in re.findall(r"concat\(\[(\d+)\]\)", unquote(f))}  # URLs: %5B is [
