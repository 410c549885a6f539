"""One exercise's result as data, and the words it becomes where someone reads it.

A `Checker` (in the learner's kernel, or in the grader) and the grading engine produce an `ExerciseResult`: the
score, each check with what it found, the catalogued mistake it names, the verdict and the checks that show it.
Every word in it is a `Message`: a catalogue template and the values that fill it, put into words in the reader's
language when it is shown, never before. The checker and the graders write `_("…{n}…").format(n=3)` with `_` =
`later` (as Django's `gettext_lazy`), so a result graded in one language is shown in another as it should be. Three renderers
turn a result into words: the table under a test cell and in the feedback HTML (`utils.grading.report_html`), the
terminal (`utils.engine.checking.render`) and `attn check --json` (`NotebookResult.to_json`). Nothing reshapes a
result on its way: the notebook's stored report (`ExerciseResult.report`) and the JSON are views of the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .speech import N_, _, speaking

Words = Any  # a str (already in the reader's language) or a Message (put into words when shown)


@dataclass(frozen=True)
class Message:
    """Words to be said later, in the language of whoever reads them: a catalogue template (marked with `N_`) and
    the values that fill its placeholders (a value that is itself a Message is put into words too)."""

    template: str
    values: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, template: str, **values: Any) -> Message:
        return cls(template, _frozen(values))

    def format(self, **values: Any) -> Message:
        """The template's placeholders filled, as `str.format` fills them (`later("{n} checks").format(n=3)`): a
        Message still, put into words when shown."""
        return Message(self.template, self.values + _frozen(values))

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        """The message in the language now spoken (`utils.i18n.speaking`)."""
        if not self.values:  # nothing to fill: a brace in it is just a brace
            return _(self.template)
        return _(self.template).format(**{k: say(v) for k, v in self.values})

    @property
    def kind(self) -> str:
        """What kind of message it is, whatever the values: its template (tests and measurements compare it)."""
        return self.template


def later(words: Words) -> Message:
    """`_` said later: the catalogue template `words` as a Message (a Message stays as it is), put into the reader's
    language when it is shown. Call it `_` where a module's words are all said later (the graders'): gettext's tools
    find `_("…")`."""
    return words if isinstance(words, Message) else Message(str(words))


def _frozen(values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A Message's values, fixed when it is made: numbers, text and Messages as they are, anything else (a shape, a
    dtype, an exception) as its text, so that a result holds no tensor or traceback and says the same thing later."""
    def frozen(value: Any) -> Any:
        if value is None or isinstance(value, (Message, str, int, float)):
            return value
        if isinstance(value, BaseException) and len(value.args) == 1 and isinstance(value.args[0], Message):
            return value.args[0]  # a CheckFailure, a grader's NameError: its words, still to be said
        return str(value)
    return tuple((k, frozen(v)) for k, v in values.items())


def say(words: Words) -> str:
    """`words` in the language now spoken."""
    return words.render() if isinstance(words, Message) else str(words)


def kind(words: Words) -> str:
    """What kind of words these are: a Message's template, else the words themselves."""
    return words.kind if isinstance(words, Message) else str(words)


@dataclass(frozen=True)
class Where:
    """Where in the learner's code something happened: the function, the line and its code."""

    function: str
    line: int | None = None
    code: str | None = None

    @classmethod
    def from_data(cls, value: Any) -> Where | None:
        """A Where from what the learner's process reported ({function, line, code}), bounded and typed; None for
        anything else (it is data from untrusted code)."""
        if not isinstance(value, dict) or not isinstance(value.get("function"), str):
            return None
        line, code = value.get("line"), value.get("code")
        return cls(value["function"][:200], line if type(line) is int else None,
                   code[:200] if isinstance(code, str) and code else None)

    def said(self) -> Message:
        """' (in f, line N: `code`)', to be said in the reader's language."""
        if self.code is None:
            return Message.of(N_(" (in {function}, line {line})"), function=self.function, line=self.line)
        return Message.of(N_(" (in {function}, line {line}: `{code}`)"), function=self.function, line=self.line,
                          code=self.code)


@dataclass(frozen=True)
class CheckOutcome:
    """One named check: passed or not, whether it was hidden, and what was wrong. `line` is what was wrong said
    under the exercise's verdict (without repeating the verdict's explanation); `message` says it alone."""

    name: Words
    passed: bool
    hidden: bool = False
    message: Words = ""
    line: Words = ""


#: The MIME type of the report a test cell stores (`ExerciseResult.report`): what `attn check`, `attn progress` and
#: `attn report` read from a notebook's outputs.
RESULT_MIME = "application/vnd.attn.check+json"
#: How many failed checks the feedback shows under its verdict; the rest are one flag away (`attn check --verbose`,
#: the table's "all checks" fold).
LEAD_CHECKS = 3


@dataclass(frozen=True)
class ExerciseResult:
    """What grading one exercise found.

    `summary` is said when there is no verdict: every check passed, nothing is implemented yet, or the engine stopped
    the exercise (a time-out, a crash: then `checks` holds what ran before). `verdict` is the likely mistake (a
    catalogued one, named in `mistake` by its catalogue name, or a generic diagnosis) and `lead` the checks that show
    it first; both are None when the exercise did not fail its checks. `graded`: the hidden checks ran."""

    id: str
    score: float
    max_score: float
    checks: tuple[CheckOutcome, ...] = ()
    summary: Words = ""
    verdict: Words | None = None
    lead: tuple[int, ...] | None = None
    mistake: str | None = None
    graded: bool = False
    where: Where | None = None
    stopped: bool = False  # the engine stopped the exercise (its checks did not all run)
    section: str | None = None  # where the notebook explains `mistake`: its heading, the catalogue's English
    implemented: bool = True  # False while the answer still raises NotImplementedError (nothing attempted)

    @property
    def passed(self) -> bool:
        return self.score == self.max_score and self.max_score > 0

    @classmethod
    def stopped_by(cls, exercise: str, points: float, why: Words, checks: tuple[CheckOutcome, ...] = (),
                   where: Where | None = None) -> ExerciseResult:
        """An exercise the engine could not grade to the end: 0 points, and why."""
        return cls(exercise, 0.0, points, checks, summary=why, where=where, stopped=True)

    def feedback(self) -> str:
        """What the learner reads first, in the language now spoken: the verdict, the few failed checks that show it
        and how many more failed; or the summary."""
        if self.verdict is None and not self.lead:
            return say(self.summary)
        failed = [c for c in self.checks if not c.passed]
        shown = [self.checks[i] for i in self.lead or ()]
        if len({say(c.line) for c in failed}) == 1:
            shown = failed  # one message for every failed check (a SyntaxError in its cell): one line says it all
        lines = [say(self.verdict)] if self.verdict is not None else []
        lines += one_line_each(shown, [say(c.line) for c in shown]).splitlines()
        more = len(failed) - len(shown)
        if more == 1:
            lines.append(_("(and 1 more failed check: `attn check --verbose` lists every check)"))
        elif more:
            lines.append(_("(and {n} more failed checks: `attn check --verbose` lists every check)").format(n=more))
        return "\n".join(lines)

    def report(self) -> dict[str, Any]:
        """The report a test cell stores (application/vnd.attn.check+json) and its table is drawn from, in the
        language now spoken: the checks, the verdict and the checks that show it."""
        report = {"id": self.id, "score": self.score, "max_score": self.max_score, "passed": self.passed,
                  "feedback": self.feedback(), "mistake": self.mistake, "graded": self.graded,
                  "checks": [{"name": say(c.name), "passed": c.passed, "hidden": c.hidden, "message": say(c.message)}
                             for c in self.checks]}
        if not self.implemented:  # a class report counts it as not attempted, not as a mistake
            report["implemented"] = False
        if self.lead is not None:  # only a failed exercise carries these: a passed one's stored report stays as it was
            report["section"] = self.section  # the named mistake's section (`attn report` links to it)
            report["verdict"] = say(self.verdict) if self.verdict is not None else None
            report["lead"] = list(self.lead)
            for shown, check in zip(report["checks"], self.checks):
                shown["line"] = say(check.line)  # said under the verdict, which it does not repeat
        return report

    def to_json(self) -> dict[str, Any]:
        """The exercise as `attn check --json` prints it (COURSE.md), in the language now spoken."""
        return {"id": self.id, "score": self.score, "max_score": self.max_score, "passed": self.passed,
                "feedback": self.feedback(), "mistake": self.mistake}


def one_line_each(failed: list[CheckOutcome], messages: list[str]) -> str:
    """One line per failed check; checks that failed with the same message (a name undefined because its cell has a
    SyntaxError fails all of them) share one line instead of repeating it."""
    groups: dict[str, list[str]] = {}
    for check, message in zip(failed, messages):
        groups.setdefault(message, []).append(say(check.name))
    lines = []
    for message, names in groups.items():
        if len(names) == 2:
            more = _(" (and 1 more check)")
        else:
            more = _(" (and {n} more checks)").format(n=len(names) - 1) if len(names) > 1 else ""
        lines.append(f"[{names[0]}]{more} {message}")
    return "\n".join(lines)


@dataclass(frozen=True)
class NotebookResult:
    """What `attn check` found in one notebook: each exercise's result, in the course's order, the language the
    feedback is said in, and notes on how it was graded (not isolated, an exercise this system cannot run)."""

    notebook: str
    exercises: tuple[ExerciseResult, ...]
    lang: str = "en"
    notes: tuple[Words, ...] = field(default=())

    @property
    def score(self) -> float:
        return round(sum(e.score for e in self.exercises), 2)

    @property
    def max_score(self) -> float:
        return float(sum(e.max_score for e in self.exercises))

    def to_json(self) -> dict[str, Any]:
        """The one JSON object `attn check --json` prints (COURSE.md's contract), in the notebook's language."""
        with speaking(self.lang):
            return {"notebook": self.notebook, "score": self.score, "max_score": self.max_score,
                    "exercises": [e.to_json() for e in self.exercises]}
