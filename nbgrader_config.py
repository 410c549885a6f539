"""nbgrader configuration: solutions/ is the source, release/ the release, one assignment per notebook.

Learners work in notebooks/ (the student copies `attn release` writes, with backups); nbgrader's own commands and
Formgrader's buttons write only to release/, exchange/, submitted/, autograded/ and feedback/, so none of them can
overwrite a learner's notebook.
"""

import os
import sys
from pathlib import Path

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from utils.engine.autograde import GradeInWorker, KeepCourseCells
from utils.sanitize import BoundedView, SafeMarkdown2HTML, SanitizeSubmission, clean_strip_files_prefix
from utils.submissions import install as use_safe_converters

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"

# A course-local exchange, so the Assignments and Courses panels work on one machine. A class on a JupyterHub shares
# one exchange between everybody's servers: ATTN_EXCHANGE names it (see deploy/jupyterhub/). Everyone may drop files
# there (mode 1777, as nbgrader's default exchange).
_exchange = Path(os.environ.get("ATTN_EXCHANGE") or Path(__file__).resolve().parent / "exchange")
if not _exchange.is_dir():
    _exchange.mkdir(parents=True)
    _exchange.chmod(0o1777)
c.Exchange.root = str(_exchange)

# What a student hands in is data (utils/submissions.py): collect takes an inbound entry only from the student it
# names, follows no link, opens no pipe or device and copies at most 10 MB per file, 50 MB and 500 files per
# submission (one log line per file left out); release, collect and release_feedback refuse exchange folders that are
# not the instructor's (or root's). Autograde and feedback take only the assignment's notebooks; feedback/ holds only
# the generated .html, and release_feedback releases only that.
c.ExchangeFactory.collect = "utils.submissions.SafeCollect"
c.ExchangeFactory.release_assignment = "utils.submissions.SafeReleaseAssignment"
c.ExchangeFactory.release_feedback = "utils.submissions.SafeReleaseFeedback"
c.ExchangeFactory.submit = "utils.submissions.SafeSubmit"  # a student's entry: theirs and the instructor's
c.CourseDirectory.max_file_size = 10_000  # KB, as nbgrader counts them
c.CourseDirectory.max_dir_size = 50_000  # KB
c.SubmissionFiles.max_files = 500
use_safe_converters()  # autograde and generate_feedback: nbgrader has no setting for their classes

# nbgrader runs `alembic` when it first creates gradebook.db: find this environment's programs even when nbgrader
# was started as .venv/bin/nbgrader or from JupyterLab without the environment activated.
_bin = str(Path(sys.executable).parent)
if _bin not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([_bin, os.environ.get("PATH", "")])

# A submission is data: SanitizeSubmission first rebuilds it from an allowlist (no script, no widget state, no unsafe
# markup or metadata), so nothing in autograded/ or feedback/ can run in Formgrader, JupyterLab or a browser. Then,
# before nbgrader's own checks, cells the course does not have lose their nbgrader metadata (a re-tagged or
# invented grade cell would otherwise stop nbgrader from grading that submission at all).
c.Autograde.sanitize_preprocessors = [
    SanitizeSubmission, ClearOutput, KeepCourseCells, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
    CheckCellMetadata,
]
# Autograding never runs a submission in nbgrader's own kernel: GradeInWorker runs the learner's code in an
# isolated worker process and the course's tests here, and writes each grade cell's score (what `attn check`
# gives). The rest of nbgrader's default steps stay as they are.
c.Autograde.autograde_preprocessors = [
    GradeInWorker, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties,
    CheckCellMetadata,
]

# Feedback shows scores and assertion messages, never the hidden tests' code (nor tracebacks that quote it). It is
# sanitised again: an autograded/ folder made by an older configuration is no less untrusted. (nbconvert's own
# `HTMLExporter.sanitize_html` is left off: its bleach allowlist strips the score tables' colours and rows.)
c.GenerateFeedback.preprocessors = [SanitizeSubmission, GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
# The HTML views of a submission, Formgrader's submission page (its exporter is made from this configuration) and the
# feedback page: the notebook rebuilt from the allowlist again and cut to what a page renders in bounded time and
# memory (an answer of 9 MB is shown cut, with a note; grading saw all of it), and every rendered markdown cell
# cleaned by nh3 after nbconvert's own rewriting, so the page holds only allowlisted HTML. SafeGenerateFeedback gives
# the feedback page a Content-Security-Policy of its own (no script, nothing fetched from outside).
c.HTMLExporter.preprocessors = [BoundedView]
c.HTMLExporter.filters = {"markdown2html": SafeMarkdown2HTML, "strip_files_prefix": clean_strip_files_prefix}
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
c.Execute.timeout = 120
