"""Every exercise asks for thought (issue 34): the notebook teaches the idea and the properties, the recipe waits in hints.

Read from the student copies a learner opens (English and Chinese) and from the solutions, without running anything:

- each exercise's statement (the markdown cell right before its answer cell) ends with a hint ladder: two to four
  collapsed `<details>` hints, titled `Hint 1 · …` (`提示 1 · …`), that the learner opens one at a time;
- nothing above an answer cell, outside a hint, shows the answer's code: no line of the solution (whitespace aside,
  16 characters or more) and no expression of it with three operations or more (calls, attributes, operators,
  subscripts), in a code cell or in a markdown code span, table or block. A demo above an exercise that computes
  the same thing with the same code hands the recipe over as surely as prose does;
- the hints together never hold the whole answer: at least one of its lines and expressions stays for the learner.

Every notebook is of the third edition: 01–04 since issue 34, 05–08 since issue 35.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

from utils import course
from utils import notebooks as nbs

THIRD_EDITION = tuple(nb.id for nb in course.NOTEBOOKS)  # 01–04 since issue 34, 05–08 since issue 35
HINT_TITLE = {"en": r"Hint \d+ · ", "zh": r"提示 \d+ · "}
_DETAILS = re.compile(r"<details>\s*<summary>(.*?)</summary>(.*?)</details>", re.S)
_OPERATIONS = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Attribute, ast.Subscript, ast.Compare, ast.BoolOp)


def _operations(node: ast.AST) -> int:
    """How many operations an expression performs; `-1` is a number, not an operation."""
    return sum(isinstance(n, _OPERATIONS) and not (isinstance(n, ast.UnaryOp) and isinstance(n.operand, ast.Constant))
               for n in ast.walk(node))


def expressions(code: str) -> set[str]:
    """The expressions of `code` that do three operations or more, written as `ast.unparse` writes them (so spacing
    and quotes do not matter); nothing where `code` is not Python."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return set()
    return {ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.expr) and _operations(node) >= 3}


def squeezed_lines(code: str) -> set[str]:
    """The lines of `code` without comments and whitespace, those of 16 characters or more."""
    lines = (re.sub(r"\s+#.*$", "", line).strip() for line in code.splitlines())
    return {s for s in (re.sub(r"\s+", "", line) for line in lines if not line.startswith("#")) if len(s) >= 16}


def solution_code(source: str) -> str:
    """What a solution cell holds between its `### BEGIN SOLUTION` and `### END SOLUTION` markers (a class has a
    pair in each method), each region dedented."""
    regions = re.findall(r"### BEGIN SOLUTION[^\n]*\n(.*?)### END SOLUTION", source, re.S)
    return "\n".join(textwrap.dedent(region) for region in regions)


def shown(cell) -> tuple[str, list[str]]:
    """What a cell shows outside its hints: its text with every `<details>` block removed, and the code in it (a
    code cell's source; a markdown cell's code blocks and code spans, tables included)."""
    if cell.cell_type == "code":
        return cell.source, [cell.source]
    text = _DETAILS.sub("", cell.source)
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return text, blocks + spans


def hints(markdown: str, lang: str) -> list[tuple[str, str]]:
    return [(title, body) for title, body in _DETAILS.findall(markdown) if re.match(HINT_TITLE[lang], title.strip())]


def student_copy(notebook: str, lang: str) -> Path:
    return nbs.release_path(notebook, nbs.NOTEBOOKS if lang == "en" else nbs.NOTEBOOKS / lang)


def exercises(notebook: str) -> list[str]:
    return [e.name for e in course.notebook(notebook).exercises]


def leaks(answer: str, cells) -> list[str]:
    """The answer's lines and expressions that `cells` show outside their hints."""
    lines, wanted = squeezed_lines(answer), expressions(answer)
    text = "".join(re.sub(r"\s+", "", shown(cell)[0]) for cell in cells)
    code = set().union(*(expressions(snippet) for cell in cells for snippet in shown(cell)[1]))
    return sorted({line for line in lines if line in text} | (wanted & code))


CASES = [(notebook, lang, name) for notebook in THIRD_EDITION for lang in ("en", "zh") for name in exercises(notebook)]


@pytest.fixture(scope="module")
def copies():
    read = {}

    def get(notebook: str, lang: str):
        if (notebook, lang) not in read:
            read[notebook, lang] = nbs.read(student_copy(notebook, lang))
        return read[notebook, lang]
    get.solutions = {notebook: nbs.read(nbs.solution_path(notebook)) for notebook in THIRD_EDITION}
    return get


def _answer_cell(nb, name: str) -> int:
    keys = [nbs.nbgrader_meta(cell).get("grade_id") for cell in nb.cells]
    assert name in keys, f"no answer cell {name!r}"
    return keys.index(name)


@pytest.mark.parametrize(("notebook", "lang", "name"), CASES, ids=[f"{n[:2]}-{lang}-{x}" for n, lang, x in CASES])
def test_an_exercise_gives_its_recipe_only_in_hints_the_learner_opens(copies, notebook, lang, name):
    nb = copies(notebook, lang)
    at = _answer_cell(nb, name)
    statement = nb.cells[at - 1]
    assert statement.cell_type == "markdown", f"{name}: the cell before the answer cell should be its statement"
    ladder = hints(statement.source, lang)
    assert 2 <= len(ladder) <= 4, (f"{notebook} ({lang}) {name}: its statement should end with 2–4 collapsed hints "
                                   f"titled '{HINT_TITLE[lang]}…', found {len(ladder)}")

    solution = copies.solutions[notebook]
    answer = solution_code(solution.cells[_answer_cell(solution, name)].source)
    shown_above = leaks(answer, nb.cells[:at])
    assert not shown_above, f"{notebook} ({lang}) {name}: the answer's code is shown above the exercise: {shown_above}"

    whole = squeezed_lines(answer) | expressions(answer)
    in_hints = leaks(answer, [nbformat.v4.new_markdown_cell("\n\n".join(body for _, body in ladder))])
    assert not whole or set(in_hints) != whole, f"{notebook} ({lang}) {name}: the hints hold the whole answer"


def test_the_check_finds_the_second_editions_recipes():
    """The old 02 printed sdpa's masking line above the exercise, and 01 its score line: the check must say so."""
    masking = "scores = scores.masked_fill(~mask, float('-inf'))\nreturn torch.softmax(scores, dim=-1) @ v\n"
    table = nbformat.v4.new_markdown_cell(
        "| mask | `scores.masked_fill(~mask, float(\"-inf\"))` |\n\n<details><summary>Hint 1 · x</summary>\n\n"
        "`torch.softmax(scores, dim=-1) @ v`\n\n</details>")
    assert leaks(masking, [table]) == ["scores.masked_fill(~mask, float('-inf'))"]
    demo = nbformat.v4.new_code_cell("scores = keys @ query   # (n,)\nprint(scores)")
    assert leaks("    scores = keys @ query  # one score per key\n", [demo]) == ["scores=keys@query"]
