# /etc/jupyter/nbgrader_config.py on the hub: read by every user's server, students' included.
# It names the course and the exchange that everybody's Assignments panel shares.
c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "attention-course"
c.Exchange.root = "/srv/attn-exchange"
