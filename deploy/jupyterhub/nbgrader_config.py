# JUPYTER_CONFIG/nbgrader_config.py on the hub (setup.sh installs it; /etc/jupyter by default): read by every
# user's server, students' included. It names the course and the exchange that everybody's Assignments panel shares;
# the hub gives every server ATTN_EXCHANGE (the class list's exchange line).
import os

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-course"
c.Exchange.root = os.environ.get("ATTN_EXCHANGE") or "/srv/attn-exchange"
# A student's submission in the exchange: its folder 0770 with the instructor's group (nbgrader leaves it 0777, so
# anyone who learns the folder's name could read or change it). The course package is in the hub's environment.
c.ExchangeFactory.submit = "utils.submissions.SafeSubmit"
