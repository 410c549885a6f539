"""The measured figures live in one place (docs/figures.json), written by what measured them (utils/figures.py).

A whole `make test` that passes and `attn bench` record into build/figures/; `attn docs` takes the records into
docs/figures.json and writes docs/maintainers.md's table from it, so no page retypes a timing.
"""

from __future__ import annotations

import json
import re

import pytest

from utils import docs, figures
from utils import notebooks as nbs


def test_the_committed_figures_are_the_table_of_the_maintainers_page():
    committed = figures.load()
    assert {"make-test", "ci-run", "check-warm", "execute"} <= set(committed)
    page = (nbs.ROOT / "docs" / "maintainers.md").read_text(encoding="utf-8")
    for row in figures.rows(committed):
        assert row in page, f"docs/maintainers.md lacks {row[:60]!r}: run `attn docs`"
    assert docs.sync_docs(nbs.ROOT, write=False) == []


def test_a_record_is_dated_names_its_machine_and_is_taken_into_the_table(tmp_path):
    table = tmp_path / "figures.json"
    table.write_text(json.dumps({"a": {"what": "A", "value": "1 s", "measured": "2026-01-01", "on": "x", "by": "y"},
                                 "b": {"what": "B", "value": "2 s", "measured": "2026-01-01", "on": "x", "by": "y"}}))
    pending = tmp_path / "pending"
    figures.record("a", what="A", value="3 s", by="a test", folder=pending)
    figures.record("c", what="C", value="4 s", by="a test", folder=pending)
    assert figures.take_pending(path=table, pending=pending) == ["a", "c"]
    taken = figures.load(table)
    assert list(taken) == ["a", "b", "c"], "a new measurement keeps its row's place; a new figure goes last"
    assert taken["a"]["value"] == "3 s" and re.fullmatch(r"\d{4}-\d\d-\d\d", taken["a"]["measured"])
    assert re.match(r"\d+ cores, ", taken["a"]["on"]) and "PyTorch" in taken["a"]["on"]
    assert not list(pending.glob("*.json")), "a record is taken once"
    assert figures.take_pending(path=table, pending=pending) == []
    assert figures.rows(taken)[2].startswith("| C | 4 s | ")


def test_a_figure_without_its_fields_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs"):
        figures.record("x", what="", value="1 s", by="y", folder=tmp_path)
    bad = tmp_path / "figures.json"
    bad.write_text(json.dumps({"x": {"value": "1 s"}}))
    with pytest.raises(ValueError, match="must have the fields"):
        figures.load(bad)


def test_durations_read_as_the_table_writes_them():
    assert figures.minutes(692.4) == "11 min 32 s"
    assert figures.minutes(41) == "41 s"


def test_the_suite_records_itself_only_when_whole():
    """`make test` runs the testpaths unfiltered: only such a run (and never one of xdist's workers) is recorded."""
    from types import SimpleNamespace

    from .conftest import _whole_suite

    def config(source=pytest.Config.ArgsSource.TESTPATHS, keyword="", markexpr="", **extra):
        return SimpleNamespace(args_source=source, option=SimpleNamespace(keyword=keyword, markexpr=markexpr), **extra)

    assert _whole_suite(config())
    assert not _whole_suite(config(pytest.Config.ArgsSource.ARGS)), "pytest tests/test_x.py is not the suite"
    assert not _whole_suite(config(keyword="readme"))
    assert not _whole_suite(config(markexpr="not slow")), "make test-fast is not make test"
    assert not _whole_suite(config(workerinput={})), "each xdist worker sees part of the suite"


def test_readme_and_the_pages_retype_no_test_timing():
    """The figures of `make test` appear in the generated table only, not typed into prose."""
    for page in [nbs.ROOT / "README.md", *sorted((nbs.ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        if page.name == "maintainers.md":
            text = text.split(docs.begin("docs/figures.json"))[0] + text.split(docs.END)[-1]
        found = re.findall(r"[^.\n]*`make test`[^.\n]*\b\d+ min\b[^.\n]*", text)
        assert not found, f"{page.name} retypes a timing of make test: {found[0].strip()!r}"
