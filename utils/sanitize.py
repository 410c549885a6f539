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

**The audit is linear and audits the page, not the pieces.** A markdown cell's HTML is what nbconvert's renderer makes
of it after the templates' own `strip_files_prefix` (which turns `files/javascript:` into `javascript:`), parsed by
html5ever (nh3) as a browser parses it; the standard library's html.parser, quadratic on some input before Python
3.11.13 (CVE-2025-6069), is not used. A cell must close what it opens: a tag, an attribute value or a comment left
open at its end would take in the next cell when nbconvert joins the cells into one page. The untrusted cells are
then audited again as the page joins them. A cell over MARKDOWN_CAP characters is shown as text without being
rendered, and each notebook has a budget (characters and seconds) after which its remaining cells are shown as text,
with one line in the log: a submission costs its own time, never the class's.

**Styles and classes cannot cover or imitate the page.** Learners' HTML keeps colours, weights, alignment and small
paddings, borders and margins, never position, display, size or z-index, and only the classes the course's own
rendering uses (nbconvert's code highlighting, heading anchors).

**The views are bounded and clean again** (c.HTMLExporter in nbgrader_config.py, so both Formgrader's submission page
and generate_feedback): :class:`BoundedView` rebuilds the notebook from the allowlist once more (an autograded/ folder
made by an older configuration is no less untrusted) and cuts what is too large to render (a code cell, an output, a
markdown cell, the page as a whole) with a note saying how much; `markdown2html`/`strip_files_prefix` clean every
rendered markdown cell with nh3, so the page holds only canonical HTML. Grading never cuts anything: BoundedView runs
only in the HTML views. The feedback page carries its own Content-Security-Policy (:func:`with_feedback_policy`).

The HTML sanitiser is nh3, the Python binding of Rust's ammonia: allowlist-based, maintained and fast. bleach was
deprecated by its maintainers on 2023-01-23 (mozilla/bleach#698) because html5lib, which it is built on, is no longer
developed; nh3 is what projects leaving bleach move to. A markdown cell identical to one of the course's own is
the course's text and is kept as it is.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import string
import time
import uuid
from pathlib import Path
from typing import Any

import jinja2
import nbformat
import nh3
from nbconvert.filters.strings import files_url_pattern, markdown_url_pattern
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from pygments.token import STANDARD_TYPES
from traitlets import Bool
from traitlets.config import LoggingConfigurable

# -- the allowlist -------------------------------------------------------------------------------------------------
TAGS = set(nh3.ALLOWED_TAGS) - {"area", "map"}  # image maps carry links of their own
_ANY_TAG = {"title", "align", "style", "dir", "lang"}
ATTRIBUTES: dict[str, set[str]] = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
for _tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
    ATTRIBUTES.setdefault(_tag, set()).add("id")  # heading anchors; ids elsewhere could clobber a page's globals
for _tag in ("table", "td", "th"):
    ATTRIBUTES.setdefault(_tag, set()).update({"border", "width", "valign"})
ATTRIBUTES["*"] = _ANY_TAG
# Classes: only those the course's own rendering puts into markdown (nbconvert's code highlighting: pygments' token
# classes in a "highlight" block; the anchor of a heading). Formgrader ships Bootstrap, whose classes ("modal",
# "navbar-fixed-top") position and cover the page.
CLASSES: dict[str, set[str]] = {
    "span": {cls for cls in STANDARD_TYPES.values() if cls},
    "div": {"highlight"},
    "a": {"anchor-link"},
}
# mistune's class for a fenced block in a language pygments does not know: tolerated by the audit, dropped by clean.
_LANGUAGE_CLASS = re.compile(r"language-[\w+#.-]{1,40}")
_ASCII_SPACE = re.compile(r"[\t\n\f\r ]+")

# Styles that colour and align text; boxes may get small, non-negative paddings, margins and borders. None positions,
# sizes, hides or moves a box (position, display, z-index, width, font-size, negative margins, transform), none loads
# a URL. Each property has its own grammar: `padding: 5000px` with a background would paint over the page as surely
# as `position: fixed`.
_COLOUR = re.compile(r"#[0-9a-f]{3,8}|[a-z]{3,20}|(?:rgba?|hsla?)\([0-9.,%/\sdeg]{1,60}\)")
_LENGTH = re.compile(r"(\d{1,4}(?:\.\d{1,4})?|\.\d{1,4})(px|pt|em|rem|ex|ch)?")
_LENGTH_LIMIT = {"px": 16.0, "pt": 12.0, "em": 1.0, "rem": 1.0, "ex": 2.0, "ch": 2.0, None: 0.0}
_BORDER_LIMIT = {"px": 4.0, "pt": 3.0, "em": 0.25, "rem": 0.25, "ex": 0.5, "ch": 0.5, None: 0.0}
_TOKEN = re.compile(r"[a-z-]+\([^)]*\)|\S+")


def _words(*words: str) -> re.Pattern[str]:
    return re.compile("|".join(map(re.escape, words)))


def _small(limits: dict[str | None, float]) -> Any:
    def ok(token: str) -> bool:
        match = _LENGTH.fullmatch(token)
        return bool(match) and float(match.group(1)) <= limits[match.group(2)]
    return ok


def _matches(pattern: re.Pattern[str]) -> Any:
    return lambda token: bool(pattern.fullmatch(token))


_BORDER_STYLE = _words("none", "hidden", "solid", "dashed", "dotted", "double")
_is_colour, _is_small, _is_thin = _matches(_COLOUR), _small(_LENGTH_LIMIT), _small(_BORDER_LIMIT)


def _border(token: str) -> bool:
    return _is_thin(token) or token in ("thin", "medium") or bool(_BORDER_STYLE.fullmatch(token)) or _is_colour(token)


def _text_decoration(token: str) -> bool:
    return token in ("none", "underline", "overline", "line-through", "solid", "double", "dotted", "dashed",
                     "wavy") or _is_colour(token)


# property -> (what each of its space-separated values must be, at most how many values)
STYLE_RULES: dict[str, tuple[Any, int]] = {
    "color": (_is_colour, 1),
    "background-color": (_is_colour, 1),
    "font-weight": (_matches(re.compile(r"normal|bold|bolder|lighter|[1-9]00")), 1),
    "font-style": (_matches(_words("normal", "italic", "oblique")), 1),
    "text-align": (_matches(_words("left", "right", "center", "justify", "start", "end")), 1),
    "vertical-align": (_matches(_words("baseline", "top", "middle", "bottom", "sub", "super", "text-top",
                                       "text-bottom")), 1),
    "text-decoration": (_text_decoration, 3),
    "white-space": (_matches(_words("normal", "nowrap", "pre", "pre-wrap", "pre-line", "break-spaces")), 1),
    "border-collapse": (_matches(_words("collapse", "separate")), 1),
    **{f"padding{side}": (_is_small, 4 if not side else 1) for side in ("", "-top", "-right", "-bottom", "-left")},
    **{f"margin{side}": (_is_small, 4 if not side else 1) for side in ("", "-top", "-right", "-bottom", "-left")},
    **{f"border{side}": (_border, 3) for side in ("", "-top", "-right", "-bottom", "-left")},
}
STYLE_PROPERTIES = set(STYLE_RULES)
URL_SCHEMES = {"http", "https", "mailto", "attachment"}
_URL_ATTRIBUTES = {"href", "src", "cite", "action", "data", "formaction", "ping", "poster"}
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

# -- the bounds ----------------------------------------------------------------------------------------------------
# One markdown cell a learner wrote is rendered and audited only up to this many characters: the course's longest is
# 4,158. mistune, nbconvert's renderer, is superlinear on some input (32,000 characters of "\\[" took 3.6 s before
# slow_to_render caught it; 31,900 of setext headings take 0.7 s, the slowest found since) and html5ever on deep
# nesting, so a larger cell is shown as text, unrendered.
MARKDOWN_CAP = 32_000
# What one notebook's learner markdown and HTML outputs may cost the sanitiser: after this many characters or seconds
# of rendering and auditing, its remaining markdown is shown as text and its remaining HTML outputs dropped.
NOTEBOOK_BUDGET_CHARS = 1_000_000
NOTEBOOK_BUDGET_SECONDS = 10.0
# An HTML output with more '<' than this is not parsed (its text/plain stays): html5ever's tree builder takes time
# quadratic in nesting depth (40,000 nested <div> took 4 s), so what it is given must be bounded.
HTML_TAG_CAP = 20_000
# The HTML views of a submission (Formgrader's page, the feedback page): what of the learner's cells and outputs they
# render, in characters. nbconvert highlights code into one element per token and parses the page again with
# BeautifulSoup: 100,000 characters of `1+1+...` took 8.4 s and 240 MB, the 9 MB answer of issue 32 over 8 GB. The
# course's largest code cell has 3,607 characters; the course's own cells are never cut.
VIEW_CODE_CAP = 20_000  # one code cell
VIEW_TEXT_CAP = 20_000  # one output's text, one markdown cell shown as text
VIEW_BUDGET = 100_000  # the learner's cells and outputs of one page, all together
VIEW_CELLS = 1_000  # cells of one page that are not the course's


def _url_ok(tag: str, attr: str, value: str) -> bool:
    """A link or image source that cannot run script: http(s), mailto, an attachment, a raster data URI, or relative."""
    value = html.unescape(value).strip()
    if any(ord(ch) < 32 for ch in value):
        return False  # "java\tscript:" is still javascript: to a browser
    if value.lower().startswith("data:"):
        return tag == "img" and attr == "src" and bool(_DATA_IMAGE.match(value))
    scheme = _SCHEME.match(value)
    return scheme is None or scheme.group(1).lower() in URL_SCHEMES


def _declarations(value: str) -> list[tuple[str, bool]]:
    """Each declaration of a style attribute, as written, and whether it is allowed."""
    found = []
    for declaration in filter(None, (d.strip() for d in html.unescape(value).split(";"))):
        prop, colon, val = declaration.partition(":")
        rule = STYLE_RULES.get(prop.strip().lower())
        tokens = _TOKEN.findall(val.strip().lower())
        ok = bool(colon and rule and tokens and len(tokens) <= rule[1] and all(map(rule[0], tokens)))
        found.append((declaration, ok))
    return found


def _style_ok(value: str) -> bool:
    return all(ok for _, ok in _declarations(value))


def _class_ok(tag: str, name: str) -> bool:
    return name in CLASSES.get(tag, ()) or (tag == "code" and bool(_LANGUAGE_CLASS.fullmatch(name)))


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    if attr in ("href", "src", "cite"):
        return value if _url_ok(tag, attr, value) else None
    if attr == "style":
        kept = [d for d, ok in _declarations(value) if ok]
        return "; ".join(kept) if kept else None
    return value


def clean_html(text: str) -> str:
    """`text` without any element, attribute, class, style or URL outside the allowlist (nor script or style
    content), serialised by html5ever: canonical, every element closed, nothing left open at its end."""
    return nh3.clean(
        text, tags=TAGS, clean_content_tags={"script", "style"}, attributes=ATTRIBUTES,
        allowed_classes={tag: set(names) for tag, names in CLASSES.items()},
        attribute_filter=_attribute_filter, url_schemes=URL_SCHEMES | {"data"}, strip_comments=True,
        link_rel="noopener noreferrer nofollow", filter_style_properties=STYLE_PROPERTIES,
    )


# -- the audit: what a piece of HTML would put into the page, found in time linear in its length -------------------
# A candidate tag name, as a browser's tokenizer reads one: '<' (or '</'), an ASCII letter, up to space, '/' or '>'.
# A superset: names inside comments and attribute values are candidates too.
_CANDIDATE = re.compile(r"</?([A-Za-z][^\t\n\f\r />]*)")
_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # html5ever lowercases ASCII only
# ammonia drops a URL attribute whose scheme it does not allow *before* it calls the attribute filter, so the audit
# would never see `href="javascript:..."`. Every place where such an attribute name could start (after space, '/' or
# a quote) gets a prefix, which ammonia does not treat as a URL: the filter sees the name and the value the browser
# would, and checks them. Letters and hyphens added there change no tokenizer state (no "--", no '<', no quote).
_URL_NAME = re.compile(r"(?<=[\t\n\f\r /\"'])(href|src|cite|action|data|formaction|ping|poster)(?=[\t\n\f\r />=]|$)",
                       re.IGNORECASE)
_RENAMED = "x-attn-url-"
# What follows a markdown cell's HTML in the page: the end of its own wrapper, then the next cell.
_END_OF_CELL, _NEXT_CELL = "<p>x-attn-end-of-cell</p>", "<p>x-attn-next-cell</p>"
_AUDIT = {"tags": TAGS, "clean_content_tags": set(), "generic_attribute_prefixes": {""}, "link_rel": None,
          "url_schemes": URL_SCHEMES | {"data"}, "strip_comments": True}
LEFT_OPEN = "markup left open (it would reach into the next cell)"


def _attribute_problem(tag: str, attr: str, value: str) -> str | None:
    name = attr.removeprefix(_RENAMED)
    if name == "class":
        bad = [c for c in _ASCII_SPACE.split(value) if c and not _class_ok(tag, c)]
        return f'<{tag} class="{bad[0][:30]}">' if bad else None
    if name not in ATTRIBUTES.get(tag, ()) and name not in ATTRIBUTES["*"]:
        return f"<{tag} {name[:30]}=…>"
    if name in _URL_ATTRIBUTES and not _url_ok(tag, name, value):
        return f"<{tag} {name}={value[:40]!r}>"
    if name == "style":
        bad = [d for d, ok in _declarations(value) if not ok]
        if bad:
            return f"<{tag} style={bad[0][:40]!r}>"
    return None


def html_problems(text: str) -> list[str]:
    """What in this HTML, placed in a page as one markdown cell, is outside the allowlist ([] when it is safe as it
    stands): an element, attribute, class, style or URL, or markup that does not close at its end. Linear in its
    length (a regular expression and two nh3 passes) up to html5ever's cost of deep nesting, which the callers bound."""
    if "\0" in text:
        return ["a NUL character"]
    problems = []
    if _RENAMED in text.lower():
        problems.append(f"<{_RENAMED}…>")
    for match in _CANDIDATE.finditer(text):
        name = match.group(1).translate(_LOWER)
        if name not in TAGS:  # also <body onload>, <html>: dropped from a fragment, merged into the page's own
            problems.append(f"<{name[:30]}>")
    marked = _URL_NAME.sub(lambda m: _RENAMED + m.group(1).lower(), text)

    def record(tag: str, attr: str, value: str) -> str:
        if problem := _attribute_problem(tag, attr, value):
            problems.append(problem)
        return value

    alone = nh3.clean(marked, attribute_filter=record, **_AUDIT)
    # Self-contained: parsed where the page puts it, followed by the rest of the page, it must give the same elements
    # as alone. An unterminated tag, attribute value or comment, an element left open, a stray end tag that closes
    # the page's own wrapper: each changes what follows it.
    joined = nh3.clean(f"<div>{marked}{_END_OF_CELL}</div>{_NEXT_CELL}", **_AUDIT)
    if joined != f"<div>{alone}{_END_OF_CELL}</div>{_NEXT_CELL}":
        problems.append(LEFT_OPEN)
    return problems


def render_markdown(source: str, attachments: dict[str, Any] | None = None) -> str:
    """Markdown as nbconvert renders it for Formgrader and feedback (math kept, attachments embedded), before the
    templates' `strip_files_prefix`."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=attachments or {})).render(source)


# mistune's maths patterns (nbconvert's MathInlineParser) search from each opener to its closer: openers with no
# closer after them take time quadratic in the cell's length (32,000 characters of "\\[" took 3.6 s).
_MATH = re.compile(r"\\\\[(\[)\]]|\\(begin|end)\{([a-z]*\*?)\}")
_OPENERS_LEFT = 64


def slow_to_render(source: str) -> str | None:
    """Why mistune would take superlinear time on this markdown (None when it would not): found in linear time."""
    pending: dict[str, int] = {}
    for match in _MATH.finditer(source):
        if match.group(1):
            key, opens = "\\" + match.group(2), match.group(1) == "begin"
        else:
            key, opens = "()" if match.group(0)[2] in "()" else "[]", match.group(0)[2] in "(["
        pending[key] = pending.get(key, 0) + 1 if opens else 0
    left = sum(pending.values())
    return f"{left} maths delimiters left open" if left > _OPENERS_LEFT else None


def markdown_problems(source: str, attachments: dict[str, Any] | None = None) -> list[str]:
    """What in this markdown would render outside the allowlist ([] when it is safe to show as written)."""
    return _audit_markdown(source, attachments)[0]


# nbconvert's strip_files_prefix rewrites `[x](files/y)` in the rendered HTML with a lazy pattern that is quadratic in
# the length of a line full of "[" (32,000 of them took 5.8 s). Applied line by line where it can match, with few
# enough "[" and "](" on the line, it does the same in linear time.
_BRACKETS_PER_LINE = 64


def _strip_files_prefix(text: str) -> tuple[str, bool]:
    """nbconvert's `strip_files_prefix` in linear time, and whether it left out a line that nbconvert's own would
    have rewritten only in quadratic time."""
    text = files_url_pattern.sub(r"\1=\2", text)
    if "files/" not in text:
        return text, False
    lines, slow = text.split("\n"), False
    for i, line in enumerate(lines):
        if "files/" in line:
            if line.count("[") > _BRACKETS_PER_LINE or line.count("](") > _BRACKETS_PER_LINE:
                slow = True
            else:
                lines[i] = markdown_url_pattern.sub(r"\1[\2](\3)", line)
    return "\n".join(lines), slow


def strip_files_prefix(text: str) -> str:
    """nbconvert's `strip_files_prefix`, in linear time (see _strip_files_prefix)."""
    return _strip_files_prefix(text)[0]


def _audit_markdown(source: str, attachments: dict[str, Any] | None) -> tuple[list[str], str]:
    """(problems, the HTML the page would hold)."""
    if len(source) > MARKDOWN_CAP:
        return [f"over {MARKDOWN_CAP} characters: not rendered"], ""
    if why := slow_to_render(source):
        return [f"{why}: not rendered"], ""
    try:
        rendered, slow = _strip_files_prefix(render_markdown(source, attachments))  # as the templates apply it
    except Exception as exc:  # noqa: BLE001 - a missing attachment or a parser error: never render it
        return [f"does not render ({type(exc).__name__})"], ""
    if slow:
        return [f"a line with over {_BRACKETS_PER_LINE} '[' or '](' and a files/ link: not rendered"], ""
    return html_problems(rendered), rendered


def as_literal_markdown(source: str, problems: list[str], note: str | None = None) -> str:
    """Markdown that shows `source` as literal text (a fenced code block longer than any fence inside it)."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", source)), default=0))
    what = ", ".join(sorted(set(problems)))[:200]
    note = note or (f"Shown as text by the course: this cell carried markup that could run in a viewer "
                    f"({html.escape(what)}).")
    return f"*[{note}]*\n\n{fence}text\n{source}\n{fence}"


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


class _Budget:
    """What one notebook may cost the sanitiser (NOTEBOOK_BUDGET_CHARS, NOTEBOOK_BUDGET_SECONDS), and what it skipped
    once that was spent."""

    def __init__(self) -> None:
        self.chars, self.seconds = NOTEBOOK_BUDGET_CHARS, NOTEBOOK_BUDGET_SECONDS
        self.used_chars, self.used_seconds = 0, 0.0
        self.markdown: list[int] = []  # cells shown as text once it was spent
        self.html: list[int] = []  # cells whose HTML outputs were dropped once it was spent

    def left(self, size: int) -> bool:
        return self.used_chars + size <= self.chars and self.used_seconds < self.seconds

    def charge(self, size: int, since: float) -> None:
        self.used_chars += size
        self.used_seconds += time.monotonic() - since

    def note(self) -> str | None:
        if not (self.markdown or self.html):
            return None
        what = [f"markdown of {_cells(self.markdown)} shown as text" if self.markdown else "",
                f"HTML outputs of {_cells(self.html)} removed" if self.html else ""]
        return (f"over this notebook's budget ({self.chars} characters or {self.seconds:g} s of rendering and "
                f"auditing): {' and '.join(filter(None, what))}, unrendered")


def _cells(indices: list[int]) -> str:
    shown = ", ".join(map(str, indices[:10]))
    more = f" and {len(indices) - 10} more" if len(indices) > 10 else ""
    return f"cell{'s' if len(indices) > 1 else ''} {shown}{more}"


def _clean_output(output: Any, budget: _Budget | None = None, index: int = 0) -> tuple[NotebookNode | None, list[str]]:
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
            text = _plain(value)
            if text.count("<") > HTML_TAG_CAP:
                continue  # too many elements to parse in bounded time: its text/plain stays
            if budget is not None and not budget.left(len(text)):
                budget.html.append(index)
                continue
            since = time.monotonic()
            data[mime] = clean_html(text)
            if budget is not None:
                budget.charge(len(text), since)
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


def sanitize_notebook(nb: NotebookNode, trusted_markdown: set[str] | frozenset[str] = frozenset(),
                      audit_markdown: bool = True) -> list[str]:
    """Rebuild `nb` in place from the allowlist; return one line per thing removed or rewritten (for the log).

    `trusted_markdown` holds the course's own markdown sources, kept exactly as they are. Without `audit_markdown`
    (the HTML views, which clean the markdown they render) markdown is kept as written.
    """
    notes: list[str] = []
    budget = _Budget()
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
    rendered: list[tuple[int, NotebookNode, str]] = []  # the learner's markdown kept as markup: index, cell, its HTML
    unrendered: list[int] = []
    for index, cell in enumerate(nb.get("cells") or []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            notes.append(f"cell {index}: not a cell, removed")
            continue
        kind, source = cell["cell_type"], _plain(cell.get("source"))
        page = None
        if kind == "code":
            new = nbformat.v4.new_code_cell(source)
            count = cell.get("execution_count")
            new.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
            outputs = cell.get("outputs") if isinstance(cell.get("outputs"), list) else []
            cleaned = [_clean_output(out, budget, index) for out in outputs]
            new.outputs = [out for out, _ in cleaned if out is not None]
            removed = sorted({mime for _, dropped in cleaned for mime in dropped})
            if removed:
                notes.append(f"cell {index}: output types removed: {', '.join(removed)[:200]}")
        elif kind == "markdown":
            attachments = _attachments(cell.get("attachments"))
            if audit_markdown and source not in trusted_markdown:
                if len(source) > MARKDOWN_CAP:
                    unrendered.append(index)
                    source = as_literal_markdown(source, [], note=(
                        f"Shown as text by the course: this cell has {len(source)} characters, over the "
                        f"{MARKDOWN_CAP} that are rendered."))
                elif not budget.left(len(source)):
                    budget.markdown.append(index)
                    source = as_literal_markdown(source, [], note=(
                        "Shown as text by the course: this notebook's markdown passed what is rendered of one "
                        "submission."))
                else:
                    since = time.monotonic()
                    problems, page = _audit_markdown(source, attachments)
                    budget.charge(len(source), since)
                    if problems:
                        notes.append(f"cell {index}: markdown shown as text ({', '.join(sorted(set(problems)))[:200]})")
                        source = as_literal_markdown(source, problems)
                        page = None
            new = nbformat.v4.new_markdown_cell(source)
            if attachments:
                new.attachments = attachments
            if page is not None:
                rendered.append((index, new, page))
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
    if unrendered:
        notes.append(f"{_cells(unrendered)}: markdown shown as text, unrendered: over {MARKDOWN_CAP} characters")
    if budget_note := budget.note():
        notes.append(budget_note)
    # The page as nbconvert joins it: every cell kept as markup, in page order, each in its wrapper. Each passed alone;
    # together they must too, or every one of them is shown as text (defence in depth: no tag spans two cells).
    if len(rendered) > 1:
        page_problems = html_problems("".join(f"<div>{html_}</div>" for _, _, html_ in rendered))
        if page_problems:
            for _, new, _ in rendered:
                new.source = as_literal_markdown(new.source, page_problems)
            notes.append(f"{_cells([i for i, _, _ in rendered])}: markdown shown as text: the cells together, as "
                         f"the page joins them, carry {', '.join(sorted(set(page_problems)))[:200]}")
    nb.clear()
    nb.update(nbformat.v4.new_notebook(cells=cells, metadata=kept_meta))
    return notes


def course_markdown(notebook: str) -> frozenset[str]:
    """The markdown sources of the course's own notebook `notebook` (empty when it is not one of the course's)."""
    return frozenset(source for kind, source in _course_cells(notebook) if kind == "markdown")


def course_sources(notebook: str) -> frozenset[str]:
    """The sources of every cell of the course's own notebook `notebook` (its solutions and hidden tests included)."""
    return frozenset(source for _, source in _course_cells(notebook))


def _course_cells(notebook: str) -> tuple[tuple[str, str], ...]:
    from . import notebooks as nbs

    if notebook not in nbs.assignments():
        return ()
    path = nbs.solution_path(notebook)
    return _read_cells(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _read_cells(path: str, _mtime: int) -> tuple[tuple[str, str], ...]:
    from . import notebooks as nbs

    return tuple((c.cell_type, c.source) for c in nbs.read(Path(path)).cells)


class SanitizeSubmission(Preprocessor):
    """First step of autograde and feedback: the submission rebuilt from the allowlist (see the module docstring)."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources.get("nbgrader", {})
        notebook = info.get("notebook", "")
        for note in sanitize_notebook(nb, course_markdown(notebook)):
            self.log.warning("%s/%s: %s", info.get("student", "?"), notebook, note)
        return nb, resources


# -- the HTML views: Formgrader's submission page and the feedback page --------------------------------------------
def _cut_note(what: str, total: int, shown: int) -> str:
    return (f"{what} cut here by the course: {total} characters, the first {shown} shown. Grading saw all of it; "
            "the notebook in autograded/ holds it")


def bound_view(nb: NotebookNode, trusted: frozenset[str] = frozenset()) -> int:
    """Cut what the views would render of `nb` to the VIEW_* bounds, with a note wherever something was cut; the
    course's own cells (sources in `trusted`) and their outputs are never cut, nor are cells with nbgrader metadata
    (the course's, after KeepCourseCells) ever left out. Returns the characters cut."""
    left, cut, extra, hidden = VIEW_BUDGET, 0, 0, 0
    cells: list[NotebookNode] = []
    for cell in nb.cells:
        source, course = cell.source, cell.source in trusted
        if not (course or cell.metadata.get("nbgrader")):
            extra += 1
            if extra > VIEW_CELLS:
                hidden += 1
                cut += len(source)
                continue
        cells.append(cell)
        if cell.cell_type == "code" and not course:
            limit = max(0, min(VIEW_CODE_CAP, left))
            if len(source) > limit:
                cell.source = source[:limit] + f"\n# [{_cut_note('This cell was', len(source), limit)}]"
                cut += len(source) - limit
            left -= min(len(source), limit)
        elif cell.cell_type == "markdown" and not course:
            limit = max(0, min(VIEW_TEXT_CAP, left))
            if len(source) > limit or len(source) > MARKDOWN_CAP or slow_to_render(source):
                shown = min(len(source), limit)
                cell.source = as_literal_markdown(source[:shown], [], note=_cut_note(
                    "This cell is shown as text and", len(source), shown))
                cut += len(source) - shown
            left -= min(len(source), limit)
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            room = 5 * VIEW_TEXT_CAP if course else max(0, min(VIEW_TEXT_CAP, left))
            spent = 0
            data = output.get("data", {})
            html_ = data.get("text/html")
            if isinstance(html_, str):
                if len(html_) > room:  # HTML is never cut (a cut tag would reach into the page): its text stays
                    del data["text/html"]
                    cut += len(html_)
                    data.setdefault("text/plain", "")
                else:
                    spent += len(html_)
            for holder, key in _texts(output):
                text, keep = holder[key], max(0, room - spent)
                if len(text) > keep:
                    holder[key] = text[:keep] + f"\n[{_cut_note('This output was', len(text), keep)}]"
                    cut += len(text) - keep
                spent += min(len(text), keep)
            if not course:
                left -= spent
    if hidden:
        cells.append(nbformat.v4.new_markdown_cell(
            f"*[{hidden} more cells of the learner's are not shown here: over {VIEW_CELLS} cells. Grading saw them; "
            "the notebook in autograded/ holds them.]*"))
    nb.cells = cells
    return cut


def _texts(output: NotebookNode) -> list[tuple[Any, Any]]:
    """The places in one output that hold text a view renders, escaped: (container, key)."""
    places: list[tuple[Any, Any]] = []
    if output.get("output_type") == "stream":
        places.append((output, "text"))
    elif output.get("output_type") == "error":
        trace = output.get("traceback") or []
        if isinstance(trace, list) and trace:
            output["traceback"] = ["\n".join(map(_plain, trace))]
            places.append((output["traceback"], 0))
        places.append((output, "evalue"))
    for mime in ("text/plain", "text/latex"):
        if mime in output.get("data", {}):
            places.append((output["data"], mime))
    return [(holder, key) for holder, key in places if isinstance(holder[key], str)]


class BoundedView(Preprocessor):
    """Formgrader's submission page and the feedback page (c.HTMLExporter.preprocessors in nbgrader_config.py): the
    notebook rebuilt from the allowlist once more (its markdown is cleaned where it is rendered, by
    :class:`SafeMarkdown2HTML`), then cut to what a page can render in bounded time and memory (:func:`bound_view`).
    Only the views run it: autograde grades every character."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources.get("nbgrader") if isinstance(resources.get("nbgrader"), dict) else {}
        notebook = info.get("notebook") or resources.get("notebook_id") or ""  # feedback's, Formgrader's
        trusted = course_sources(notebook)
        sanitize_notebook(nb, trusted, audit_markdown=False)
        cut = bound_view(nb, trusted)
        if cut:
            self.log.warning("%s/%s: %d characters not shown in this page (over what a page renders)",
                             info.get("student") or resources.get("student", "?"), notebook, cut)
        return nb, resources


class SafeMarkdown2HTML(LoggingConfigurable):
    """The views' `markdown2html` filter: nbconvert's own rendering (its exporter's settings), then nh3's allowlist,
    so the page holds only canonical, closed, allowlisted HTML (which BeautifulSoup's html.parser, run by nbconvert
    on the whole page, then parses in linear time)."""

    jinja_pass_arg = jinja2.pass_context(lambda: None).jinja_pass_arg  # called with the template's context

    def __call__(self, context: Any, source: str) -> str:
        render = getattr(self.parent, "markdown2html", None)
        try:
            if render is None:
                rendered = render_markdown(source, context.get("cell", {}).get("attachments", {}))
            else:
                rendered = render(context, source)
        except Exception as exc:  # noqa: BLE001 - a missing attachment: the cell as text, never the page refused
            return (f"<p><em>[Shown as text by the course: this cell does not render ({type(exc).__name__}).]</em>"
                    f"</p><pre>{html.escape(source)}</pre>")
        return clean_html(strip_files_prefix(rendered))


def clean_strip_files_prefix(text: str) -> str:
    """The views' `strip_files_prefix` filter: nbconvert's, then nh3's allowlist (the templates apply it after
    markdown2html, where it turns `files/javascript:...` into `javascript:...`)."""
    return clean_html(strip_files_prefix(text))


# -- the feedback page's own Content-Security-Policy ---------------------------------------------------------------
# The feedback HTML is opened as a file, by the student or the instructor, or from the Jupyter server's /files/,
# where a script would act with the viewer's session. No script runs there but the page's own inline ones (by hash;
# nbgrader's feedback template has none) and nothing is fetched from outside: no connect, no form, no base, no plugin,
# no frame, images and fonts only as data: URIs. MathJax is refused: nbgrader's template loads it from cdnjs
# (Formgrader's policy allows https://cdnjs.cloudflare.com for it), but a script from a CDN, fetched without
# integrity, would run in the Jupyter server's origin with the viewer's session; and MathJax 2 reads the template's
# configuration with eval, which no strict policy allows, so `$...$` would stay untypeset anyway. The feedback shows
# scores and messages; maths stays as its TeX source.
_SCRIPT_ELEMENT = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.IGNORECASE | re.DOTALL)
_JS_TYPE = re.compile(r"""\btype\s*=\s*["']?\s*(?!text/javascript|application/javascript|module)[^"'\s>]""",
                      re.IGNORECASE)


def feedback_policy(page: str) -> str:
    """The policy for one feedback page: its own inline scripts (before the notebook's part) allowed by hash."""
    from .formgrader_csp import _NOTEBOOK, _hash

    end = page.find(_NOTEBOOK.decode())
    own = [m.group(2) for m in _SCRIPT_ELEMENT.finditer(page[:end] if end >= 0 else page)
           if "src" not in m.group(1).lower() and not _JS_TYPE.search(m.group(1))]
    scripts = " ".join(sorted({_hash(text) for text in own})) or "'none'"
    return "; ".join([
        "default-src 'none'", f"script-src {scripts}", "style-src 'unsafe-inline'", "img-src data:", "font-src data:",
        "connect-src 'none'", "form-action 'none'", "base-uri 'none'", "object-src 'none'", "frame-src 'none'",
    ])


def with_feedback_policy(page: str) -> str:
    """The feedback page with its policy as the first element of its <head> (before anything it could govern)."""
    meta = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(feedback_policy(page), quote=False)}">'
    head = re.search(r"<head\b[^>]*>", page[:4096], re.IGNORECASE)
    if head is None:
        doctype = re.match(r"\s*<!doctype[^>]*>", page, re.IGNORECASE)
        at = doctype.end() if doctype else 0
        return f"{page[:at]}\n{meta}\n{page[at:]}"
    return f"{page[:head.end()]}\n{meta}\n{page[head.end():]}"
