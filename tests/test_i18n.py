"""The Chinese edition (简体中文) stays in step with the English, and grades like it.

Only words are translated: i18n/zh/*.yml (the notebooks' words, cell by cell) and utils/locale/zh (the checker's,
the graders' and the command's messages). Code, tests and references exist once. So it is enough to check that
every translation is current, that the Chinese copies are what `attn release --lang zh` makes, and that they grade
exactly like the English: a solved copy full marks, a blank one zero, a mistake named, in Chinese, leaking nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from utils import i18n, release
from utils import notebooks as nbs
from utils.grading import Mistake, load_grader

from .conftest import ASSIGNMENTS, assert_no_secrets, attn_check, fill_answers, planted_copy

ZH = nbs.NOTEBOOKS / "zh"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_cell_a_learner_reads_has_a_current_translation(assignment):
    problems = i18n.status("zh", assignment)
    assert not problems, "translate or update these cells in i18n/zh/ (`attn i18n --todo`):\n" + "\n".join(
        map(str, problems))


def test_every_message_has_a_current_translation():
    problems = i18n.catalogue_problems("zh")
    assert not problems, "run `attn i18n --update`, then translate utils/locale/zh/LC_MESSAGES/attn.po:\n" + "\n".join(
        problems[:40])


def test_the_catalogue_that_ships_with_utils_holds_no_explanation_of_a_mistake():
    """utils/locale ships to students with the package; how each catalogued mistake is fixed stays with the hidden
    tests, in grader/locale, in English and in every translation. A grader that is loaded says them all the same."""
    from babel.messages.mofile import read_mo
    from babel.messages.pofile import read_po

    from utils import speech

    explanations = {m.explanation for a in ASSIGNMENTS for m in vars(load_grader(a)).values()
                    if isinstance(m, Mistake) and m.explanation}
    assert len(explanations) > 100
    for lang in i18n.LANGUAGES[1:]:
        grader = {m.id: m.string for m in i18n.read_catalogue(lang, i18n.GRADER_DOMAIN) if m.id}
        assert explanations <= set(grader), sorted(explanations - set(grader))[:3]
        secret = explanations | {grader[e] for e in explanations}
        shipped = i18n.catalogue_path(lang).parent
        for path in sorted(shipped.iterdir()):
            with path.open("rb") as f:
                catalog = read_po(f) if path.suffix == ".po" else read_mo(f)
            said = {str(m.id) for m in catalog if m.id} | {str(m.string) for m in catalog if m.string}
            leaked = secret & said
            assert not leaked, f"{path} holds the explanations of {len(leaked)} mistakes: {sorted(leaked)[:2]}"
        assert speech.LOCALES not in [p.parent for p in speech._GRADER_LOCALES]
        with i18n.speaking(lang):
            some = sorted(explanations)[0]
            assert speech._(some) == grader[some] != some  # said in the learner's language wherever a grader runs
        # ... and in a process that loaded no grader but has the hidden tests beside it: attn autograde's nbgrader
        # pass says the results its pool of processes graded
        said = subprocess.run([sys.executable, "-c", "import sys; from utils import grading, speech; "
                               f"speech.set_language({lang!r}); print(speech._(sys.argv[1]))", some],
                              capture_output=True, text=True, cwd=nbs.ROOT, check=True).stdout.strip()
        assert said == grader[some], said


def test_a_changed_english_cell_makes_its_translation_stale_and_names_it(monkeypatch, tmp_path):
    """What a maintainer sees after editing the English: the cell, and why its translation no longer counts."""
    assignment = ASSIGNMENTS[1]
    nb = nbs.read(nbs.solution_path(assignment))
    markdown = next(c for c in nb.cells if c.cell_type == "markdown" and i18n.cell_key(c) not in ("intro", *i18n.GENERATED))
    markdown.source = markdown.source.replace(".", ", we now say.", 1)
    code = next(c for c in nb.cells if c.cell_type == "code" and "# " in c.source and i18n.cell_key(c) != "setup")
    code.source = re.sub(r"# (\w)", r"# and now \1", code.source, count=1)
    path = tmp_path / "solutions" / assignment / f"{assignment}.ipynb"
    nbs.write(nb, path)
    monkeypatch.setattr(nbs, "SOLUTIONS", tmp_path / "solutions")
    found = {(p.cell, p.kind) for p in i18n.status("zh", assignment)}
    assert found == {(i18n.cell_key(markdown), "stale"), (i18n.cell_key(code), "stale")}, found
    with pytest.raises(i18n.TranslationError, match=i18n.cell_key(markdown)):
        i18n.translate(nb, "zh", assignment)


def test_a_translation_must_keep_the_code_and_its_placeholders():
    assert i18n.same_program('x = f(1)  # one', 'x = f(1)  # 一') is None
    assert i18n.same_program('x = f(1)', 'x = f(2)') == "the translation changes the code, not only its words"
    assert i18n.same_program('print(f"{n:>5} items {m}")', 'print(f"{n:>5} 个")') is not None  # a value dropped
    assert "placeholders" in i18n.same_program('print("{n} items".format(n=3))', 'print("个".format(n=3))')
    assert "placeholders" in i18n.same_program('print("%d items" % n)', 'print("个" % n)')
    assert i18n.same_program('print(f"{n:>5} items")', 'print(f"{n:>6} 个")') is not None  # a format spec is code


def test_the_chinese_student_copies_are_the_release_of_the_chinese_solutions():
    assert release.stale(lang="zh") == [], "notebooks/zh/ is out of date: run `attn release --lang zh`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_mistakes_section_is_a_chinese_heading(assignment):
    """Feedback sends the learner to a section: in Chinese, to the heading the Chinese notebook has."""
    with i18n.speaking("zh"):
        sections = {i18n._(m.section) for m in vars(load_grader(assignment)).values() if isinstance(m, Mistake)}
    zh = nbs.read(nbs.release_path(assignment, ZH))
    headings = {line.lstrip("#").strip() for c in zh.cells if c.cell_type == "markdown"
                for line in c.source.splitlines() if re.match(r"#{2,3} ", line)}
    assert sections <= headings, f"sections the Chinese feedback names that are not headings: {sections - headings}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_chinese_copy_grades_like_the_english_and_speaks_chinese(assignment, tmp_path):
    blank = nbs.release_path(assignment, ZH)
    assert i18n.language_of(nbs.read(blank)) == "zh"
    result = attn_check(blank)
    assert result["score"] == 0 and result["max_score"] > 0
    assert all(re.search(r"[\u4e00-\u9fff]", e["feedback"]) for e in result["exercises"]), result["exercises"]
    solved = tmp_path / "solved" / assignment / f"{assignment}.ipynb"
    nbs.write(fill_answers(nbs.read(blank), assignment), solved)
    full = attn_check(solved)
    assert full["score"] == full["max_score"] == result["max_score"]
    for text in (blank.read_text(encoding="utf-8"), str(result)):
        assert_no_secrets(text, assignment, f"the Chinese copy of {assignment} or its feedback")


def test_a_mistake_in_a_chinese_copy_is_named_in_chinese(tmp_path):
    from .conftest import plants

    assignment = ASSIGNMENTS[1]
    plant = plants(assignment).MISTAKES[0]
    english = {e["id"]: e for e in attn_check(planted_copy(assignment, [plant], tmp_path / "en"))["exercises"]}
    zh_source = tmp_path / "zh" / assignment / f"{assignment}.ipynb"
    nbs.write(i18n.translate(nbs.read(planted_copy(assignment, [plant], tmp_path / "p")), "zh", assignment), zh_source)
    chinese = {e["id"]: e for e in attn_check(zh_source)["exercises"]}
    ex = plant["exercise"]
    assert chinese[ex]["score"] < english[ex]["max_score"] and english[ex]["score"] < english[ex]["max_score"]
    # The same checks in both editions: with one seed, one score. (Each edition's own seed differs: the hidden inputs
    # hash the whole answer, the translated docstring included.)
    from utils.engine.checking import load_learner_notebook

    from .conftest import engine

    same = [engine().grade(load_learner_notebook(path), assignment, seed=1234).exercises
            for path in (tmp_path / "en" / assignment / f"{assignment}.ipynb", zh_source)]
    assert [e.score for e in same[0]] == [e.score for e in same[1]]
    with i18n.speaking("zh"):
        name = i18n._(english[ex]["mistake"])
    assert name != english[ex]["mistake"] and name in chinese[ex]["feedback"], chinese[ex]["feedback"]
    assert re.search(r"[\u4e00-\u9fff]", chinese[ex]["feedback"].splitlines()[0])


def test_the_glossary_terms_are_the_ones_the_translations_use():
    """The key terms of docs/glossary.md appear in the Chinese notebooks, and their rejected variants do not."""
    text = "".join(i18n.path("zh", a).read_text(encoding="utf-8") for a in ASSIGNMENTS)
    for term in ("注意力", "查询", "缩放点积注意力", "掩码", "多头注意力", "位置编码", "旋转位置编码", "分组查询注意力",
                 "KV 缓存", "在线 softmax"):
        assert term in text, term
    for rejected in ("遮罩", "掩蔽", "注意机制"):
        assert rejected not in text, rejected
    glossary = (nbs.ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    assert all(term in glossary for term in ("缩放点积注意力", "分组查询注意力", "KV 缓存"))


def _glossary_rejects() -> dict[str, str]:
    """{rejected word: the glossary's row} from the `not: a, b` of docs/glossary.md's notes."""
    rejects = {}
    for row in (nbs.ROOT / "docs" / "glossary.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) == 3 and "not: " in cells[2]:
            for word in cells[2].split("not: ", 1)[1].split(","):
                rejects[word.strip()] = f"{cells[0]} = {cells[1]}"
    return rejects


def test_the_feedback_and_the_notebooks_use_the_glossarys_words_not_the_ones_it_rejects():
    """A learner reads the notebook and the feedback side by side: a word the glossary rejects (运行中的最大值 for the
    notebooks' 累计最大值, 硬查询 for a lookup, 全部运行 for JupyterLab's 运行所有单元格) appears in neither
    catalogue (the `attn` command's, the grader's) nor in any Chinese notebook."""
    rejects = _glossary_rejects()
    assert {"运行中的最大值", "前置维度", "硬查询", "全部运行", "无声 bug"} <= set(rejects), rejects
    texts = {f"i18n/zh/{a}.yml": i18n.path("zh", a).read_text(encoding="utf-8") for a in ASSIGNMENTS}
    for domain in i18n.DOMAINS:
        texts[str(i18n.catalogue_path("zh", "po", domain).relative_to(nbs.ROOT))] = "\n".join(
            m.string for m in i18n.read_catalogue("zh", domain) if m.id and isinstance(m.string, str))
    found = [f"{where}: {word!r} ({rejects[word]})" for where, text in texts.items() for word in rejects if word in text]
    assert not found, "\n".join(found)


def test_a_compiled_catalogue_is_compared_by_its_messages_not_by_the_babel_that_wrote_it():
    """The .mo check reads what gettext reads: another Babel version's header is no difference, a changed
    translation is (Babel 2.19 writing "Generated-By: Babel 2.19.0" once made a current .mo look stale)."""
    catalog = i18n.read_catalogue("zh")
    mine = i18n.compile_mo(catalog)
    other_babel = re.sub(rb"(Generated-By: Babel )([0-9.]+)", lambda m: m[1] + b"9" * len(m[2]), mine, count=1)
    assert other_babel != mine and i18n._mo_messages(other_babel) == i18n._mo_messages(mine)
    message = next(m for m in catalog if m.id and m.string)
    message.string = message.string + "!"
    assert i18n._mo_messages(i18n.compile_mo(catalog)) != i18n._mo_messages(mine)


def test_a_chinese_learners_endless_loop_is_told_in_chinese(tmp_path, monkeypatch):
    """The engine's own messages (a time-out here) go through the catalogue, in the notebook's language."""
    from utils.engine import checking

    from .conftest import engine

    assignment = ASSIGNMENTS[0]
    nb = i18n.translate(nbs.read(nbs.solution_path(assignment)), "zh", assignment)
    cell = next(c for c in nb.cells if nbs.nbgrader_meta(c).get("grade_id") == "attention_pool")
    assert cell.source.count("scores = keys @ query") == 1
    cell.source = cell.source.replace("scores = keys @ query", "while True:\n        pass")
    path = tmp_path / assignment / f"{assignment}.ipynb"
    nbs.write(nb, path)
    monkeypatch.setattr(checking, "EXERCISE_TIME_LIMIT_S", 1.0)
    result = engine().check(path)
    looped = next(e for e in result.exercises if e.id == "attention_pool")
    assert looped.score == 0 and looped.stopped, looped
    with i18n.speaking(result.lang):
        said = looped.feedback()
    assert result.lang == "zh" and "CPU 时间" in said and "循环" in said, said
    assert all(e.score == e.max_score for e in result.exercises if e.id != "attention_pool"), result.exercises


def test_chinese_feedback_in_the_terminal_is_filled_by_display_columns_and_keeps_a_section_name_whole():
    """zh-read po-N3: textwrap counted a Chinese character as one column and broke only at spaces, so a Chinese line
    of `attn check` ran to about 200 columns and then split inside “5. 安全的 / softmax：…”."""
    from utils.engine.checking import _columns, fill

    section = "“5. 安全的 softmax：溢出与减最大值技巧”"
    said = ("这与一个已知错误相符——给键加权而不是给值加权：输出是 weights @ keys；键只决定往哪里看，真正返回的是值的"
            f"加权和。请回头看看{section}这一节。") * 2
    lines = fill(said, 110, " " * 8, " " * 10).splitlines()
    assert len(lines) >= 3 and all(_columns(line) <= 110 for line in lines), [_columns(line) for line in lines]
    assert sum(section in line for line in lines) == 2, lines  # each name on one line
    assert re.sub(r"\s+", "", "".join(lines)) == re.sub(r"\s+", "", said)  # nothing lost, nothing added
    assert not any(line.strip()[0] in "，。：；）”" for line in lines), lines
    english = "the output is weights @ keys; keys only decide where to look, and what comes back is the values. " * 3
    assert fill(english, 110, " " * 8, " " * 10) == textwrap.fill(english, width=110, initial_indent=" " * 8,
                                                                  subsequent_indent=" " * 10)
