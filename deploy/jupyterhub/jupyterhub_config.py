# A JupyterHub for one class of the attention course: one instructor (who grades), any number of students, one
# machine, each person a Unix user (JupyterHub's default PAM login). See README ("A class on JupyterHub") and
# setup.sh in this folder, which installs what this file expects.
c = get_config()  # noqa: F821 - provided by JupyterHub

INSTRUCTOR = "instructor"
STUDENTS = ["alice", "bob"]  # your class list: Unix users that exist on this machine

c.Authenticator.allowed_users = {INSTRUCTOR, *STUDENTS}
c.Authenticator.admin_users = {INSTRUCTOR}

# Everyone lands in JupyterLab, whose Nbgrader menu has the Assignments panel (fetch, validate, submit).
c.Spawner.default_url = "/lab"
# The course's nbgrader_config.py (in the instructor's clone) uses this exchange instead of its own exchange/ folder.
c.Spawner.environment = {"ATTN_EXCHANGE": "/srv/attn-exchange"}
