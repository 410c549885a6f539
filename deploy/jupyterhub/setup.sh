#!/usr/bin/env bash
# Prepare a Linux machine (as root) for deploy/jupyterhub/jupyterhub_config.py: the shared environment, the exchange,
# the global nbgrader configuration, the instructor's clone of the course, and students without grading tools.
# Usage: sudo deploy/jupyterhub/setup.sh /opt/attn-env instructor alice bob
set -euo pipefail
ENV=${1:?path of the Python environment to create, e.g. /opt/attn-env}; INSTRUCTOR=${2:?instructor user}; shift 2
HERE=$(cd "$(dirname "$0")" && pwd); COURSE=$(cd "$HERE/../.." && pwd)

# One environment for everybody, readable by all users: the course's dependencies plus JupyterHub.
python3 -m venv "$ENV"
"$ENV/bin/pip" install --quiet torch==2.13.0
"$ENV/bin/pip" install --quiet "$COURSE" jupyterhub
chmod -R a+rX "$ENV"

# The exchange: world-writable with the sticky bit, as nbgrader's default one.
install -d -m 1777 /srv/attn-exchange
install -D -m 644 "$HERE/nbgrader_config.py" /etc/jupyter/nbgrader_config.py

# The instructor grades from their own clone, as root-run grading isolates submissions (README: "run it as root").
sudo -u "$INSTRUCTOR" git clone "$COURSE" "$(getent passwd "$INSTRUCTOR" | cut -d: -f6)/attention-course"

# Students see Assignments and Validate, not Formgrader or Create Assignment.
for student in "$@"; do
  sudo -u "$student" -H "$ENV/bin/jupyter" labextension disable --level=user @jupyter/nbgrader:formgrader @jupyter/nbgrader:create-assignment
  sudo -u "$student" -H "$ENV/bin/jupyter" server extension disable --user nbgrader.server_extensions.formgrader
done
echo "Now: $ENV/bin/jupyterhub -f $HERE/jupyterhub_config.py (JupyterHub also needs configurable-http-proxy: npm install -g configurable-http-proxy)"
