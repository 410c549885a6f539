"""What a failed check carries: the catalogue's known mistakes, and the exceptions a check raises.

Shared by the checker (``utils.grading``) and the grader's proxies for the learner's objects (``utils.engine.remote``),
so that neither imports the other at load time. Graders import these names from ``utils.grading``.

A Mistake's texts are the catalogue's English (its name is also an identifier: results and tests compare it). What
this module and `utils.diagnose` say is words to be said later (`utils.results.Message`, see `_`): put into the
reader's language when a result is shown, not when it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: What makes a message words to be said later: `utils.results.later`, which `utils.grading` installs when it loads
#: (`translate_with`). This module imports nothing of utils, so that the learner's worker and the grading engine
#: stay a few levels above it (tests/test_architecture.py); until then a message is its English.
_TRANSLATE: list[Callable[[str], Any]] = [lambda message: message]


def translate_with(translate: Callable[[str], Any]) -> None:
    """Word this module's messages, and `utils.diagnose`'s, with `translate` (`utils.results.later`)."""
    _TRANSLATE[0] = translate


def _(message: str) -> Any:
    """`message` to be said in the reader's language (see `translate_with`); a call that marks it for the catalogue."""
    return _TRANSLATE[0](message)


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: what it is called, why it is wrong, and where the notebook explains it.

    `words` is for a mistake whose name a grader builds from what it observed (02's "keys and values swapped"): the
    templates its name and explanation were formatted from, and the values that filled them, so that both can be
    shown in another language (each value is translated too). It is not part of the mistake's identity.
    """

    name: str
    explanation: str
    section: str
    words: tuple[str, str, tuple[tuple[str, str], ...]] | None = field(default=None, compare=False, repr=False)

    def title(self) -> Any:
        """The mistake's name as the learner reads it."""
        if self.words is None:
            return _(self.name)
        name, _explanation, values = self.words
        return _(name).format(**{k: _(v) for k, v in values})

    def reason(self) -> Any:
        """Why it is wrong, as the learner reads it."""
        if self.words is None:
            return _(self.explanation)
        _name, explanation, values = self.words
        return _(explanation).format(**{k: _(v) for k, v in values})

    def describe(self) -> Any:
        """One sentence for the learner naming the mistake and the section to reread. A mistake named in the
        learner's kernel (`utils.visible`) has no explanation there: the catalogue's explanations stay the grader's."""
        if not self.explanation and self.words is None:
            return _("This matches a known mistake, {name} — see '{section}' (`attn check` says why it is wrong).").format(
                name=self.title(), section=_(self.section))
        return _("This matches a known mistake, {name}: {explanation} — see '{section}'.").format(
            name=self.title(), explanation=self.reason(), section=_(self.section))


class CheckFailure(AssertionError):
    """A check failed; the message says what was wrong and, when known, which mistake it matches.

    `candidates` are the catalogued mistakes the failing answer reproduced, in the catalogue's order (`mistake`
    alone is one candidate); `diagnosis` is the generic one, for when no candidate survives. Which name the learner
    finally reads is settled when the exercise is scored: a candidate that another comparison of the exercise
    offered and the answer did not reproduce is dropped (see `Checker.settle`). `wrong_values` marks a comparison
    that found wrong entries (a count of them, not a property that failed), `varies` an answer that changed between
    two identical calls. The message and the diagnosis are words to be said (a `Message`, or text).
    """

    def __init__(self, message: Any, mistake: Mistake | None = None, *,
                 candidates: tuple[Mistake, ...] | None = None, diagnosis: Any = None,
                 wrong_values: bool = False, varies: bool = False) -> None:
        self.detail = message  # what was wrong, without the mistake's explanation
        self.candidates = tuple(candidates) if candidates is not None else ((mistake,) if mistake else ())
        self.diagnosis = diagnosis
        self.wrong_values = wrong_values
        self.varies = varies
        self.mistake = self.candidates[0] if self.candidates else None
        super().__init__(explained(message, self.mistake, diagnosis))


def diagnosed(diagnosis: Any) -> Any:
    """The generic diagnosis as the verdict says it: 'Diagnosis: ...'."""
    return _("Diagnosis: {diagnosis}").format(diagnosis=diagnosis)


def explained(detail: Any, mistake: Mistake | None, diagnosis: Any) -> Any:
    """A failure's message: what was wrong, then the known mistake it matches or else the generic diagnosis."""
    if mistake is not None:
        return _("{detail} {verdict}").format(detail=detail, verdict=mistake.describe())
    return _("{detail} {verdict}").format(detail=detail, verdict=diagnosed(diagnosis)) if diagnosis else detail


class CheckTimeout(Exception):
    """Raised inside a check that ran past its time limit."""
