"""nbgrader configuration: solutions/ is the source, notebooks/ the release, one assignment per notebook."""

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.db_url = "sqlite:///gradebook.db"

# Feedback shows scores and assertion messages, never the hidden tests' code (nor tracebacks that quote it).
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
# Plots are not graded: skip rendering them while autograding.
c.Execute.timeout = 120
