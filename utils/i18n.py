"""The course in other languages: the words of the notebooks, translated cell by cell; code, tests and references shared.

A translation lives in ``i18n/<lang>/<notebook>.yml``, one entry per cell of the solution notebook, keyed by the
cell's nbgrader id (``grade_id``). Each entry records ``en``, a fingerprint of the English words it was made from, so
that a changed English cell makes its translation stale (`status` names it):

    intro:                      # a markdown cell: its whole text
      en: 3f2a9c1b0d4e
      text: |-
        # 01 · 注意力：一次"软"的字典查询
        ...
    setup:                      # a code cell: only its words (comments, docstrings, check labels), as replacements
      en: 9a8b7c6d5e4f
      replace:
      - en: '# the language of the check tables and feedback'
        zh: '# 检查表和反馈的语言'

Only what a learner reads is translated: markdown cells, and in code cells the comments, the docstrings and the labels
of checks (the strings given to ``check(...)`` and its methods), outside the solution and hidden-test blocks (a
translation may also translate other strings, e.g. what a demo prints). A translated code cell must be the same
program: its syntax tree equals the English one's with every string blanked. Everything else (answer code, tests,
graders, references) exists once, in English, and is shared. `translate` builds a notebook of another language from
a solution notebook; `attn release --lang zh` writes the Chinese student copies with it.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from . import notebooks as nbs
from . import speech
from .speech import LANGUAGES, LOCALES, N_, NAMES, _, language, set_language, speaking  # noqa: F401 - the API

I18N = nbs.ROOT / "i18n"
_BLOCKS = (("### BEGIN SOLUTION", "### END SOLUTION"), ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))
_WORD = re.compile(r"(?<![\w.`$\\\[])[A-Za-z]{3,}(?![\w(\[\]`$])")  # an English word, not an identifier, call or code
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_DIRECTIVE = re.compile(r"#\s*(NBVAL_\w+|noqa\b|type:|pragma\b|fmt:)")


# -- the language learners read: check tables, feedback, the attn command (utils/speech.py) ----------------------
def _colab_badge(notebook: str, lang: str) -> str:
    from . import course

    return course.colab_badge(notebook, lang)


#: Cells each edition writes for itself rather than translates: the Colab button opens that edition's copy.
GENERATED = {"colab_badge": _colab_badge}


class TranslationError(Exception):
    """A translation file that cannot be used; the message says which cell and why."""


def prose(text: str) -> bool:
    """Does `text` hold words a reader reads (two English words or more, outside code and maths)?"""
    text = re.sub(r"`[^`]*`|\$[^$]*\$", " ", text)
    return len(_WORD.findall(text)) >= 2


def translated(text: str) -> bool:
    """Does `text` read as a translation (it holds Chinese characters, or no English prose at all)?"""
    return bool(_CJK.search(text)) or not prose(text)


# -- what a learner reads in a cell ------------------------------------------------------------------------------
def _open_lines(source: str) -> set[int]:
    """1-based numbers of the lines outside the solution and hidden-test blocks (the learner's copy keeps these)."""
    keep, inside = set(), None
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if inside is None:
            inside = next((end for begin, end in _BLOCKS if stripped == begin), None)
            if inside is None:
                keep.add(number)
        elif stripped == inside:
            inside = None
    return keep


def _is_check_call(node: ast.Call) -> bool:
    func = node.func
    while isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in ("check", "Checker")


def words(source: str) -> list[tuple[str, str, bool]]:
    """The texts of a code cell a learner reads, in order: (kind, text, required). Kinds: "comment", "docstring",
    "label" (a string given to a check), "string" (any other string, e.g. printed). Required: prose that a
    translation must translate (comments, docstrings and labels); other strings may be translated."""
    open_lines = _open_lines(source)
    found: list[tuple[int, str, str, bool]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and tok.start[0] in open_lines and not tok.string.startswith("###"):
                found.append((tok.start[0], "comment", tok.string,
                              prose(tok.string) and not _DIRECTIVE.match(tok.string)))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):
        return [(kind, text, req) for _line, kind, text, req in found]
    docstrings, labels = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.add(id(first.value))
        if isinstance(node, ast.Call) and _is_check_call(node):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                for part in ast.walk(arg):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        labels.add(id(part))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.lineno in open_lines:
            kind = "docstring" if id(node) in docstrings else "label" if id(node) in labels else "string"
            found.append((node.lineno, kind, node.value, kind != "string" and prose(node.value)))
    found.sort(key=lambda item: item[0])
    return [(kind, text, req) for _line, kind, text, req in found]


def needs_translation(cell: NotebookNode) -> bool:
    if cell.cell_type == "markdown":
        return prose(cell.source)
    return cell.cell_type == "code" and any(req for _word, _kind, req in words(cell.source))


def fingerprint(cell: NotebookNode) -> str:
    """What a translation of `cell` was made from: its text (markdown) or its words (code; a change of the code alone
    leaves the translation current, and `check` proves it still applies)."""
    if cell.cell_type == "markdown":
        data = cell.source
    else:
        data = "\n\0".join(f"{kind}:{text}" for kind, text, _ in words(cell.source))
    return hashlib.sha256(data.encode()).hexdigest()[:12]


def cell_key(cell: NotebookNode) -> str:
    return nbs.nbgrader_meta(cell).get("grade_id") or cell.get("id", "")


# -- translation files --------------------------------------------------------------------------------------------
def path(lang: str, notebook: str) -> Path:
    return I18N / lang / f"{notebook}.yml"


def load(lang: str, notebook: str) -> dict[str, dict[str, Any]]:
    """The translation entries of one notebook ({} when there is no file)."""
    import yaml

    file = path(lang, notebook)
    if not file.is_file():
        return {}
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise TranslationError(f"{file.relative_to(nbs.ROOT)} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise TranslationError(f"{file.relative_to(nbs.ROOT)}: each cell id must map to an entry with en: and text: "
                               f"or replace:")
    return data


_PLACEHOLDER = re.compile(r"\{[^{}]*\}|%[-+#0]*\d*(?:\.\d+)?[sdifrgexXo%]")


def _strings(tree: ast.AST) -> tuple[str, list[ast.Constant]]:
    """The tree's dump with every string blanked (the code alone), and its strings in order. The strings of a format
    spec (``f"{x:>8.2f}"``) are code, not words: they stay."""
    specs = {id(c) for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec
             for c in ast.walk(n.format_spec)}
    strings = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in specs]
    saved = [n.value for n in strings]
    for n in strings:
        n.value = ""
    dump = ast.dump(tree, include_attributes=False)
    for n, value in zip(strings, saved):
        n.value = value
    return dump, strings


def same_program(english: str, other: str) -> str | None:
    """Why `other` is not the program `english` is with other words (None: it is). Strings may differ, but each keeps
    its placeholders ({...} and %-formats), so what formats them still works."""
    try:
        tree_other = ast.parse(other)
    except SyntaxError as exc:
        return f"the translated cell is not valid Python ({exc.msg}, line {exc.lineno})"
    code_en, strings_en = _strings(ast.parse(english))
    code_other, strings_other = _strings(tree_other)
    if code_en != code_other:
        return "the translation changes the code, not only its words"
    for a, b in zip(strings_en, strings_other):
        if a.value != b.value and sorted(_PLACEHOLDER.findall(a.value)) != sorted(_PLACEHOLDER.findall(b.value)):
            return f"the translation of {a.value[:40]!r} (line {a.lineno}) changes its placeholders"
    return None


def apply_entry(cell: NotebookNode, entry: dict[str, Any], lang: str) -> str:
    """The translated source of `cell`; TranslationError when the entry does not fit the cell."""
    key = cell_key(cell)
    if cell.cell_type == "markdown":
        text = entry.get("text")
        if not isinstance(text, str) or not text.strip():
            raise TranslationError(f"{key}: a markdown cell's entry needs text:")
        return text.rstrip("\n")
    source = cell.source
    for number, item in enumerate(entry.get("replace") or [], 1):
        if not (isinstance(item, dict) and isinstance(item.get("en"), str) and isinstance(item.get(lang), str)):
            raise TranslationError(f"{key}: replacement {number} needs en: and {lang}:")
        if item["en"] not in source:
            raise TranslationError(f"{key}: replacement {number}'s English is not in the cell: {item['en'][:60]!r}")
        source = source.replace(item["en"], item[lang])
    if why := same_program(cell.source, source):
        raise TranslationError(f"{key}: {why}")
    return source


@dataclass
class Problem:
    notebook: str
    cell: str
    kind: str  # "missing", "stale", "broken", "untranslated", "unknown cell"
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.notebook}: cell {self.cell}: {self.kind}" + (f": {self.detail}" if self.detail else "")


def status(lang: str, notebook: str) -> list[Problem]:
    """What keeps the `lang` edition of `notebook` from being current, one problem per cell (empty: all current)."""
    source = nbs.read(nbs.solution_path(notebook))
    try:
        entries = load(lang, notebook)
    except TranslationError as exc:
        return [Problem(notebook, "-", "broken", str(exc))]
    problems = []
    keys = set()
    for cell in source.cells:
        key = cell_key(cell)
        keys.add(key)
        if key in GENERATED:
            continue
        entry = entries.get(key)
        if entry is None:
            if needs_translation(cell):
                problems.append(Problem(notebook, key, "missing"))
            continue
        if entry.get("en") != fingerprint(cell):
            problems.append(Problem(notebook, key, "stale", "its English changed since it was translated "
                                                            f"(en: {entry.get('en')}, now {fingerprint(cell)})"))
            continue
        try:
            text = apply_entry(cell, entry, lang)
        except TranslationError as exc:
            problems.append(Problem(notebook, key, "broken", str(exc).split(": ", 1)[-1]))
            continue
        if cell.cell_type == "markdown":
            left = [] if translated(text) else [text[:60]]
        else:
            left = [t[:60] for _, t, req in words(text) if req and not translated(t)]
        if left:
            problems.append(Problem(notebook, key, "untranslated", "; ".join(repr(t) for t in left)))
    problems += [Problem(notebook, k, "unknown cell", "no such cell in the English notebook")
                 for k in sorted(set(entries) - keys)]
    return problems


def translate(nb: NotebookNode, lang: str, notebook: str, *, strict: bool = True) -> NotebookNode:
    """A copy of the solution notebook `nb` in `lang`. Strict: TranslationError unless every cell is current;
    otherwise a cell without a current translation stays in English."""
    if lang == "en":
        return copy.deepcopy(nb)
    if strict and (problems := status(lang, notebook)):
        raise TranslationError(f"the {NAMES.get(lang, lang)} edition of {notebook} is not current: "
                               + "; ".join(map(str, problems[:5])) + (" ..." if len(problems) > 5 else ""))
    entries = load(lang, notebook)
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell_key(cell) in GENERATED:
            cell.source = GENERATED[cell_key(cell)](notebook, lang)
            continue
        entry = entries.get(cell_key(cell))
        if entry is None or entry.get("en") != fingerprint(cell):
            continue
        try:
            cell.source = apply_entry(cell, entry, lang)
        except TranslationError:
            if strict:
                raise
    return out


def todo(lang: str, notebook: str) -> str:
    """YAML entries to translate for the cells `status` finds missing or stale, with the English to translate."""

    problems = {p.cell: p for p in status(lang, notebook) if p.kind in ("missing", "stale")}
    out: dict[str, Any] = {}
    for cell in nbs.read(nbs.solution_path(notebook)).cells:
        key = cell_key(cell)
        if key not in problems:
            continue
        if cell.cell_type == "markdown":
            out[key] = {"en": fingerprint(cell), "text": cell.source}
        else:
            out[key] = {"en": fingerprint(cell),
                        "replace": [{"en": text if kind != "comment" else text, lang: "TODO"}
                                    for kind, text, req in words(cell.source) if req or kind == "comment"]}
    return dump(out)


def dump(entries: dict[str, Any]) -> str:
    """YAML as translators edit it: texts of several lines as literal blocks, Chinese as it is written."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
        style = "|" if "\n" in data else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    Dumper.add_representer(str, text)
    return yaml.dump(entries, Dumper=Dumper, allow_unicode=True, sort_keys=False, width=120) if entries else ""


def language_of(nb: NotebookNode) -> str:
    """The language a learner's notebook is written in: the one its setup cell sets, else English."""
    for cell in nb.cells:
        if cell.cell_type == "code" and (m := re.search(r"""set_language\(\s*["'](\w+)["']\s*\)""", cell.source)):
            return m.group(1) if m.group(1) in LANGUAGES else "en"
    return "en"


# -- the catalogue of utils' and the graders' messages (gettext, through Babel) -----------------------------------
#: Where messages are found: calls of `_` (and `N_`, a mark that translates later, and `utils.results.later`, whose
#: Message is put into words when shown) everywhere; in the graders also
#: the catalogue's Mistake(name, explanation, section) and the strings given to a check (its label, the `what` of
#: a comparison), which the checker translates when it shows them.
CATALOGUED = ("utils", "grader")
DOMAIN = "attn"
#: The grader's own catalogue (grader/locale): the explanations of the graders' mistakes, which say how to fix an
#: answer and so stay with the hidden tests; utils' catalogue ships to students with the package and never has them.
GRADER_DOMAIN = "attn-grader"
DOMAINS = (DOMAIN, GRADER_DOMAIN)


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def extract(root: Path = nbs.ROOT, domain: str | None = None) -> dict[str, list[tuple[str, int]]]:
    """Every message to translate, with where it is written: {msgid: [(file, line), ...]}; with `domain`, those of
    that catalogue only (GRADER_DOMAIN: the mistakes' explanations that nothing under utils/ says too)."""
    found = _extract(root)
    if domain is None:
        return found
    secret = _explanations(root)
    grader = {m for m, places in found.items() if m in secret and not any(f.startswith("utils") for f, _line in places)}
    return {m: places for m, places in found.items() if (m in grader) == (domain == GRADER_DOMAIN)}


def _explanations(root: Path) -> set[str]:
    """The explanations the graders give their mistakes: Mistake(name, explanation, ...)'s second argument, written
    there or as a module-level constant (`_WHY = N_("...")`)."""
    found: set[str] = set()
    for path in sorted((root / "grader").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        constants: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "N_" \
                        and value.args:
                    value = value.args[0]
                if _string(value):
                    constants[node.targets[0].id] = _string(value)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Mistake":
                args = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "explanation")]
                for arg in args:
                    text = _string(arg) or (constants.get(arg.id) if isinstance(arg, ast.Name) else None)
                    if text:
                        found.add(text)
    return found


def _extract(root: Path) -> dict[str, list[tuple[str, int]]]:
    found: dict[str, list[tuple[str, int]]] = {}

    def add(text: str | None, file: str, line: int) -> None:
        if text and re.search(r"[A-Za-z]", text):
            found.setdefault(text, []).append((file, line))

    for folder in CATALOGUED:
        for path in sorted((root / folder).rglob("*.py")):
            rel = str(path.relative_to(root))
            grader = folder == "grader"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), rel)):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in ("_", "N_", "later") and node.args:
                    add(_string(node.args[0]), rel, node.lineno)
                elif grader and name == "Mistake":
                    for arg in [*node.args, *(k.value for k in node.keywords)]:
                        add(_string(arg), rel, node.lineno)
                elif grader and _is_check_call(node):
                    for arg in [*node.args, *(k.value for k in node.keywords if k.arg not in ("mistakes",))]:
                        add(_string(arg), rel, node.lineno)
    return found


def catalogue_path(lang: str, kind: str = "po", domain: str = DOMAIN) -> Path:
    """utils/locale/<lang>/LC_MESSAGES/attn.po (.mo), or the grader's grader/locale/<lang>/.../attn-grader.po."""
    folder = LOCALES if domain == DOMAIN else nbs.grader_dir() / "locale"
    return folder / lang / "LC_MESSAGES" / f"{domain}.{kind}"


def template(domain: str = DOMAIN) -> Any:
    """The template of one catalogue (what `extract` finds for it), as a Babel Catalog."""
    import datetime

    from babel.messages.catalog import Catalog

    catalog = Catalog(project="attention-course", version="0.1.0", domain=domain, charset="utf-8",
                      copyright_holder="the attention course's authors", msgid_bugs_address="",
                      creation_date=datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc))
    for msgid, places in sorted(extract(domain=domain).items()):
        catalog.add(msgid, locations=places)
    return catalog


def read_catalogue(lang: str, domain: str = DOMAIN) -> Any:
    from babel.messages.pofile import read_po

    path = catalogue_path(lang, domain=domain)
    if not path.is_file():
        from babel.messages.catalog import Catalog

        return Catalog(locale=lang, domain=domain)
    with path.open("rb") as f:
        return read_po(f, locale=lang, domain=domain)


def update_catalogue(lang: str) -> tuple[int, int]:
    """Bring both catalogues of `lang` in step with the sources (new messages empty, vanished ones dropped, changed
    ones fuzzy) and compile their .mo; returns (messages, untranslated) of the two together."""
    total = missing = 0
    for domain in DOMAINS:
        n, m = _update(lang, domain)
        total, missing = total + n, missing + m
    return total, missing


def _update(lang: str, domain: str) -> tuple[int, int]:
    from babel.messages.pofile import write_po

    catalog = read_catalogue(lang, domain)
    catalog.update(template(domain), no_fuzzy_matching=False)
    catalog.obsolete.clear()
    catalog.fuzzy = False  # the header: a fuzzy header is left out of the .mo, and gettext then reads no charset
    catalog.revision_date = catalog.creation_date
    catalog.project, catalog.version, catalog.msgid_bugs_address = "attention-course", "0.1.0", ""
    what = ("the checker's, the graders' and the attn command's" if domain == DOMAIN else
            "the explanations of the graders' mistakes, which stay with the hidden tests")
    catalog.header_comment = (f"# {NAMES.get(lang, lang)} translations of the attention course's messages: {what}.\n"
                              f"# Kept in step with the sources by `attn i18n --update`; a test fails while one is "
                              f"missing.\n#")
    catalog.language_team = f"{NAMES.get(lang, lang)} <https://github.com/>"
    catalog.last_translator = "the attention course's translators"
    path = catalogue_path(lang, domain=domain)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=120, sort_output=True, include_previous=True)
    catalogue_path(lang, "mo", domain).write_bytes(compile_mo(catalog))
    speech._catalogue.cache_clear()
    missing = sum(1 for m in catalog if m.id and (not m.string or m.fuzzy))
    return len([m for m in catalog if m.id]), missing


def catalogue_problems(lang: str) -> list[str]:
    """What keeps the catalogues of `lang` from being current: messages missing, untranslated, fuzzy or extra, a
    translation that drops a {placeholder}, or a .mo that is not the .po compiled."""
    return [problem for domain in DOMAINS for problem in _problems(lang, domain)]


def _problems(lang: str, domain: str) -> list[str]:
    catalog = read_catalogue(lang, domain)
    have = {m.id: m for m in catalog if m.id}
    wanted = extract(domain=domain)
    problems = [f"missing from {shown(catalogue_path(lang, domain=domain))}: {m!r} ({wanted[m][0][0]})"
                for m in sorted(set(wanted) - set(have))]
    problems += [f"no longer in the sources: {m!r}" for m in sorted(set(have) - set(wanted))]
    for msgid, message in sorted(have.items()):
        if msgid not in wanted:
            continue
        if not message.string:
            problems.append(f"untranslated: {msgid!r}")
        elif message.fuzzy:
            problems.append(f"fuzzy (its English changed): {msgid!r}")
        elif set(re.findall(r"\{[^{}]*\}", msgid)) != set(re.findall(r"\{[^{}]*\}", message.string)):
            problems.append(f"placeholders differ: {msgid!r} -> {message.string!r}")
    mo = catalogue_path(lang, "mo", domain)
    if not mo.is_file() or _mo_messages(mo.read_bytes()) != _mo_messages(compile_mo(catalog)):
        problems.append(f"{shown(mo)} is not {mo.with_suffix('.po').name} compiled: run `attn i18n --update`")
    return problems


def shown(path: Path) -> str:
    """A catalogue's path as a maintainer reads it: from the course folder where it lies there."""
    return str(path.relative_to(nbs.ROOT)) if path.is_relative_to(nbs.ROOT) else str(path)


def compile_mo(catalog: Any) -> bytes:
    """A Babel catalogue compiled to the .mo that gettext reads (fuzzy translations left out)."""
    from babel.messages.mofile import write_mo

    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()


def _mo_messages(data: bytes) -> tuple[str | None, dict[tuple[Any, Any], Any]]:
    """What gettext reads from a .mo file: its charset and its translations. Not its bytes: the header names the Babel
    that wrote it ("Generated-By: Babel 2.18.0"), and a new Babel would otherwise make a current .mo look stale."""
    from babel.messages.mofile import read_mo

    catalog = read_mo(io.BytesIO(data))
    return catalog.charset, {(str(m.id), m.context): m.string for m in catalog if m.id}
