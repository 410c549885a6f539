"""What a submission carries is data: strip everything in a notebook that a view could run, before anyone views it.

A submitted notebook is untrusted from its first byte: markdown with raw HTML or `javascript:` links, outputs of any
MIME type (HTML, SVG, JavaScript, widget state), attachments, cell and notebook metadata. Formgrader renders the
autograded notebook with nbconvert, whose markdown path does not sanitise, and it serves that page from the
instructor's own Jupyter server, so a script there acts with the instructor's credentials. :class:`SanitizeSubmission`
runs first in `autograde` and in `generate_feedback` (nbgrader_config.py) and rebuilds the notebook from an allowlist:

- notebook metadata: `kernelspec` and `language_info` only; cell metadata: `nbgrader`, `tags` and a few booleans;
- markdown: kept as written when nbconvert's own renderer turns it into HTML that passes the allowlist below (so
  math, tables, code and images look as they did); otherwise shown as literal text in a code block, with a note;
- outputs: text, PNG/JPEG/GIF, LaTeX and the course's score report; `text/html` cleaned by nh3, everything else
  (JavaScript, SVG, widget views, unknown types) replaced by its text;
- attachments: raster images under plain names only.

The HTML sanitiser is nh3, the Python binding of Rust's ammonia: allowlist-based, maintained and fast. bleach was
deprecated by its maintainers on 2023-01-23 (mozilla/bleach#698) because html5lib, which it is built on, is no longer
developed; nh3 is what projects leaving bleach move to. A markdown cell identical to one of the course's own is
the course's text and is kept as it is.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import uuid
from html.parser import HTMLParser
from typing import Any

import nbformat
import nh3
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool

# -- the allowlist -------------------------------------------------------------------------------------------------
TAGS = set(nh3.ALLOWED_TAGS) - {"area", "map"}  # image maps carry links of their own
_ANY_TAG = {"class", "title", "align", "style", "dir", "lang"}
ATTRIBUTES: dict[str, set[str]] = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
for _tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
    ATTRIBUTES.setdefault(_tag, set()).add("id")  # heading anchors; ids elsewhere could clobber a page's globals
for _tag in ("table", "td", "th"):
    ATTRIBUTES.setdefault(_tag, set()).update({"border", "width", "valign"})
ATTRIBUTES["*"] = _ANY_TAG
# Properties that lay text out; none that moves a box over the page (position, z-index, transform) or loads a URL.
STYLE_PROPERTIES = {
    "color", "background-color", "font-weight", "font-style", "font-size", "font-family", "text-align",
    "vertical-align", "text-decoration", "white-space", "padding", "padding-left", "padding-right", "padding-top",
    "padding-bottom", "margin-left", "margin-right", "margin-top", "margin-bottom", "border", "border-collapse",
    "border-bottom", "border-top", "border-left", "border-right", "width", "max-width", "display",
}
_SAFE_STYLE_VALUE = re.compile(r"^[#\w\s.,%()'\"-]*$")
URL_SCHEMES = {"http", "https", "mailto", "attachment"}
_RASTER = ("image/png", "image/jpeg", "image/gif", "image/webp")
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.IGNORECASE)
_SCHEME = re.compile(r"^\s*([a-zA-Z][a-zA-Z0-9+.-]*):")
# The course's own outputs that carry no markup: the score report (JSON, read by `attn check` and the tests).
_KEPT_MIME = {"text/plain", "text/latex", "application/vnd.attn.check+json", *_RASTER}  # grading.RESULT_MIME
_CELL_META = {"nbgrader": dict, "tags": list, "editable": bool, "deletable": bool, "collapsed": bool}
_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TAG = re.compile(r"^[\w-]{1,64}$")
_META_VALUE = re.compile(r"^[\w .+/=:()-]{0,64}$")
_NBGRADER_KEYS = {
    "grade", "solution", "locked", "task", "grade_id", "points", "schema_version", "checksum", "cell_type"}
_NAME = re.compile(r"^[\w.-]{1,128}$")


def _url_ok(tag: str, attr: str, value: str) -> bool:
    """A link or image source that cannot run script: http(s), mailto, an attachment, a raster data URI, or relative."""
    value = html.unescape(value).strip()
    if any(ord(ch) < 32 for ch in value):
        return False  # "java\tscript:" is still javascript: to a browser
    if value.lower().startswith("data:"):
        return tag == "img" and attr == "src" and bool(_DATA_IMAGE.match(value))
    scheme = _SCHEME.match(value)
    return scheme is None or scheme.group(1).lower() in URL_SCHEMES


def _style_ok(value: str) -> bool:
    for declaration in filter(None, (d.strip() for d in html.unescape(value).split(";"))):
        prop, _, val = declaration.partition(":")
        if prop.strip().lower() not in STYLE_PROPERTIES or not _SAFE_STYLE_VALUE.match(val) or "url" in val.lower():
            return False
    return True


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    if attr in ("href", "src", "cite"):
        return value if _url_ok(tag, attr, value) else None
    if attr == "style":
        return value if _style_ok(value) else None
    return value


def clean_html(text: str) -> str:
    """`text` without any element, attribute, style or URL outside the allowlist (nor script or style content)."""
    return nh3.clean(
        text, tags=TAGS, clean_content_tags={"script", "style"}, attributes=ATTRIBUTES,
        attribute_filter=_attribute_filter, url_schemes=URL_SCHEMES | {"data"}, strip_comments=True,
        link_rel="noopener noreferrer nofollow", filter_style_properties=STYLE_PROPERTIES,
    )


class _Audit(HTMLParser):
    """Walks rendered HTML and records anything outside the allowlist (a tag, an attribute, a URL, a style)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TAGS:
            self.problems.append(f"<{tag}>")
            return
        allowed = ATTRIBUTES.get(tag, set()) | ATTRIBUTES["*"]
        for name, value in attrs:
            value = value or ""
            if name not in allowed:
                self.problems.append(f"<{tag} {name}=…>")
            elif name in ("href", "src", "cite") and not _url_ok(tag, name, value):
                self.problems.append(f"<{tag} {name}={value[:40]!r}>")
            elif name == "style" and not _style_ok(value):
                self.problems.append(f"<{tag} style={value[:40]!r}>")

    handle_startendtag = handle_starttag

    def unknown_decl(self, data: str) -> None:
        self.problems.append(f"<![{data[:20]}")

    def handle_pi(self, data: str) -> None:
        self.problems.append(f"<?{data[:20]}")


def render_markdown(source: str, attachments: dict[str, Any] | None = None) -> str:
    """Markdown as nbconvert renders it for Formgrader and feedback (math kept, attachments embedded)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=attachments or {})).render(source)


def markdown_problems(source: str, attachments: dict[str, Any] | None = None) -> list[str]:
    """What in this markdown would render outside the allowlist ([] when it is safe to show as written)."""
    try:
        rendered = render_markdown(source, attachments)
    except Exception as exc:  # noqa: BLE001 - a missing attachment or a parser error: never render it
        return [f"does not render ({type(exc).__name__})"]
    audit = _Audit()
    audit.feed(rendered)
    audit.close()
    return audit.problems


def as_literal_markdown(source: str, problems: list[str]) -> str:
    """Markdown that shows `source` as literal text (a fenced code block longer than any fence inside it)."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    what = ", ".join(sorted(set(problems)))[:200]
    note = (f"*[Shown as text by the course: this cell carried markup that could run in a viewer "
            f"({html.escape(what)}).]*")
    return f"{note}\n\n{fence}text\n{source}\n{fence}"


def _plain(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else value if isinstance(value, str) else ""


def _attachments(value: Any) -> dict[str, dict[str, str]]:
    kept: dict[str, dict[str, str]] = {}
    for name, bundle in (value or {}).items() if isinstance(value, dict) else ():
        if not (isinstance(name, str) and _NAME.match(name) and isinstance(bundle, dict)):
            continue
        images = {mime: _plain(data) for mime, data in bundle.items() if mime in _RASTER and _is_base64(_plain(data))}
        if images:
            kept[name] = images
    return kept


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text.encode("ascii"), validate=False)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return False
    return True


def _nbgrader_meta(meta: dict) -> dict | None:
    """nbgrader's cell metadata, scalar fields only; None when its grade_id could not be an id (feedback puts it in
    an href). KeepCourseCells then replaces it with the course's own, or removes it."""
    kept = {k: v for k, v in meta.items() if k in _NBGRADER_KEYS and isinstance(v, (bool, int, float, str))}
    grade_id = kept.get("grade_id")
    if grade_id is not None and not (isinstance(grade_id, str) and _TAG.match(grade_id)):
        return None
    if any(isinstance(v, str) and not _META_VALUE.match(v) for k, v in kept.items() if k != "checksum"):
        return None
    return kept


def _clean_output(output: Any) -> tuple[NotebookNode | None, list[str]]:
    """The output rebuilt from the allowlist, and the MIME types it lost."""
    if not isinstance(output, dict):
        return None, []
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name") if output.get("name") in ("stdout", "stderr") else "stdout"
        return nbformat.v4.new_output("stream", name=name, text=_plain(output.get("text"))), []
    if kind == "error":
        trace = output.get("traceback")
        return nbformat.v4.new_output(
            "error", ename=_plain(output.get("ename")), evalue=_plain(output.get("evalue")),
            traceback=[_plain(line) for line in trace] if isinstance(trace, list) else []), []
    if kind not in ("display_data", "execute_result"):
        return None, []
    raw = output.get("data") if isinstance(output.get("data"), dict) else {}
    data: dict[str, Any] = {}
    for mime, value in raw.items():
        if mime in _RASTER:
            if _is_base64(_plain(value)):
                data[mime] = _plain(value)
        elif mime == "text/html":
            data[mime] = clean_html(_plain(value))
        elif mime in _KEPT_MIME:
            data[mime] = value if mime.endswith("json") and isinstance(value, dict) else _plain(value)
    dropped = sorted(m for m in raw if m not in data)
    if "text/plain" not in data:
        text = _plain(raw.get("text/markdown")) if "text/markdown" in raw else ""
        data["text/plain"] = text or (f"[output of type {', '.join(dropped)} removed by the course]" if dropped else "")
    if kind == "execute_result":
        count = output.get("execution_count")
        return nbformat.v4.new_output(kind, data=data,
                                      execution_count=count if isinstance(count, int) else None), dropped
    return nbformat.v4.new_output(kind, data=data), dropped


def sanitize_notebook(nb: NotebookNode, trusted_markdown: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Rebuild `nb` in place from the allowlist; return one line per thing removed or rewritten (for the log).

    `trusted_markdown` holds the course's own markdown sources, kept exactly as they are.
    """
    notes: list[str] = []
    meta = nb.get("metadata") if isinstance(nb.get("metadata"), dict) else {}
    kept_meta = {}
    for key in ("kernelspec", "language_info"):
        value = meta.get(key)
        if isinstance(value, dict):
            # nbconvert writes language_info.name into a class attribute: plain words only.
            kept = {k: v for k, v in value.items() if isinstance(k, str) and (
                isinstance(v, int) and not isinstance(v, bool) or isinstance(v, str) and _META_VALUE.match(v))}
            required = {"kernelspec": ("name", "display_name"), "language_info": ("name",)}[key]
            if all(isinstance(kept.get(r), str) for r in required):  # nbformat's schema needs these
                kept_meta[key] = kept
    dropped_meta = sorted(set(meta) - set(kept_meta))
    if dropped_meta:
        notes.append(f"notebook metadata removed: {', '.join(map(str, dropped_meta))[:200]}")
    cells, seen_ids = [], set()
    for index, cell in enumerate(nb.get("cells") or []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            notes.append(f"cell {index}: not a cell, removed")
            continue
        kind, source = cell["cell_type"], _plain(cell.get("source"))
        if kind == "code":
            new = nbformat.v4.new_code_cell(source)
            count = cell.get("execution_count")
            new.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
            outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
            cleaned = [_clean_output(out) for out in outputs]
            new.outputs = [out for out, _ in cleaned if out is not None]
            removed = sorted({mime for _, dropped in cleaned for mime in dropped})
            if removed:
                notes.append(f"cell {index}: output types removed: {', '.join(removed)[:200]}")
        elif kind == "markdown":
            attachments = _attachments(cell.get("attachments"))
            if source not in trusted_markdown:
                problems = markdown_problems(source, attachments)
                if problems:
                    notes.append(f"cell {index}: markdown shown as text ({', '.join(sorted(set(problems)))[:200]})")
                    source = as_literal_markdown(source, problems)
            new = nbformat.v4.new_markdown_cell(source)
            if attachments:
                new.attachments = attachments
        else:
            new = nbformat.v4.new_raw_cell(source)  # no raw_mimetype: no viewer renders it as HTML
        old_meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        for key, kind_of in _CELL_META.items():
            value = old_meta.get(key)
            if key == "tags" and isinstance(value, list):
                value = [t for t in value if isinstance(t, str) and _TAG.match(t)]  # nbconvert puts tags in class=
            if key == "nbgrader" and isinstance(value, dict):
                value = _nbgrader_meta(value)
            if isinstance(value, kind_of):
                new.metadata[key] = value
        cell_id = cell.get("id")
        new.id = cell_id if isinstance(cell_id, str) and _ID.match(cell_id) and cell_id not in seen_ids else (
            uuid.uuid4().hex[:8])
        seen_ids.add(new.id)
        cells.append(new)
    nb.clear()
    nb.update(nbformat.v4.new_notebook(cells=cells, metadata=kept_meta))
    return notes


def course_markdown(notebook: str) -> frozenset[str]:
    """The markdown sources of the course's own notebook `notebook` (empty when it is not one of the course's)."""
    from . import notebooks as nbs

    if notebook not in nbs.assignments():
        return frozenset()
    return frozenset(c.source for c in nbs.read(nbs.solution_path(notebook)).cells if c.cell_type == "markdown")


class SanitizeSubmission(Preprocessor):
    """First step of autograde and feedback: the submission rebuilt from the allowlist (see the module docstring)."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources.get("nbgrader", {})
        notebook = info.get("notebook", "")
        for note in sanitize_notebook(nb, course_markdown(notebook)):
            self.log.warning("%s/%s: %s", info.get("student", "?"), notebook, note)
        return nb, resources
