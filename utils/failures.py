"""What a failed check carries: the catalogue's known mistakes, and the exceptions a check raises.

Shared by the checker (``utils.grading``) and the grader's proxies for the learner's objects (``utils.engine.remote``),
so that neither imports the other at load time. Graders import these names from ``utils.grading``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: what it is called, why it is wrong, and where the notebook explains it."""

    name: str
    explanation: str
    section: str

    def describe(self) -> str:
        """One sentence for the learner naming the mistake and the section to reread."""
        return f"This matches a known mistake, {self.name}: {self.explanation} — see '{self.section}'."


class CheckFailure(AssertionError):
    """A check failed; the message says what was wrong and, when known, which mistake it matches.

    `candidates` are the catalogued mistakes the failing answer reproduced, in the catalogue's order (`mistake`
    alone is one candidate); `diagnosis` is the generic one, for when no candidate survives. Which name the learner
    finally reads is settled when the exercise is scored: a candidate that another comparison of the exercise
    offered and the answer did not reproduce is dropped (see `Checker.settle`).
    """

    def __init__(self, message: str, mistake: Mistake | None = None, *,
                 candidates: tuple[Mistake, ...] | None = None, diagnosis: str | None = None) -> None:
        self.detail = message  # what was wrong, without the mistake's explanation
        self.candidates = tuple(candidates) if candidates is not None else ((mistake,) if mistake else ())
        self.diagnosis = diagnosis
        self.mistake = self.candidates[0] if self.candidates else None
        super().__init__(explained(message, self.mistake, diagnosis))


def explained(detail: str, mistake: Mistake | None, diagnosis: str | None) -> str:
    """A failure's message: what was wrong, then the known mistake it matches or else the generic diagnosis."""
    if mistake is not None:
        return f"{detail} {mistake.describe()}"
    return f"{detail} Diagnosis: {diagnosis}" if diagnosis else detail


class CheckTimeout(Exception):
    """Raised inside a check that ran past its time limit."""
