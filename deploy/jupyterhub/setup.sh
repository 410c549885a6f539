#!/usr/bin/env bash
# Prepare a Linux machine (as root) for jupyterhub_config.py in this folder: the shared Python environment,
# configurable-http-proxy, the exchange with the course's folder owned by the instructor, the global nbgrader
# configuration (students without Formgrader), the class list and the instructor's clone of the course.
# Safe to run again, e.g. with a longer class list (the users must exist: useradd --create-home NAME).
#
# Usage: sudo deploy/jupyterhub/setup.sh [OPTIONS] INSTRUCTOR STUDENT...
#   --env DIR             create the environment there (default /opt/attn-env): torch, the course, JupyterHub
#   --python PROGRAM      the Python that --env's environment is made with (default python3; every user must be
#                         able to run it, so not one under root's home such as pyenv's)
#   --existing-env DIR    use this environment instead (it has the course, torch and JupyterHub); installs nothing
#   --exchange DIR        nbgrader's exchange, shared by everybody (default /srv/attn-exchange)
#   --jupyter-config DIR  where every server reads nbgrader_config.py (default /etc/jupyter, read by all Jupyter)
#   --hub-dir DIR         the hub's state and class list, class.txt (default /srv/jupyterhub)
#   --course-from REPO    the git repository the instructor clones (default: the one holding this script)
#   --course-dir DIR      the instructor's clone, inside their home (default ~INSTRUCTOR/attention-course)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ENV=/opt/attn-env PYTHON=python3 EXISTING= COURSE=
EXCHANGE=/srv/attn-exchange JUPYTER_CONFIG=/etc/jupyter HUB_DIR=/srv/jupyterhub
SOURCE=$HERE/../..
COURSE_ID=attention-course  # as in nbgrader_config.py (here and the course's)
die() { echo "setup.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
  case $1 in
    --env) ENV=${2:?}; shift 2 ;;
    --python) PYTHON=${2:?}; shift 2 ;;
    --existing-env) ENV=${2:?}; EXISTING=1; shift 2 ;;
    --exchange) EXCHANGE=${2:?}; shift 2 ;;
    --jupyter-config) JUPYTER_CONFIG=${2:?}; shift 2 ;;
    --hub-dir) HUB_DIR=${2:?}; shift 2 ;;
    --course-from) SOURCE=${2:?}; shift 2 ;;
    --course-dir) COURSE=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (--help lists them)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || die "name the instructor and the students: setup.sh [OPTIONS] INSTRUCTOR STUDENT... (--help)"
[ "$(id -u)" = 0 ] || die "run it as root (it creates folders for other users and acts as them)"
INSTRUCTOR=$1; shift
for user in "$INSTRUCTOR" "$@"; do
  getent passwd "$user" >/dev/null || die "no Unix user $user: create it first (useradd --create-home $user)"
done
HOME_OF_INSTRUCTOR=$(getent passwd "$INSTRUCTOR" | cut -d: -f6)
GROUP_OF_INSTRUCTOR=$(id -gn "$INSTRUCTOR")
SOURCE=$(realpath "$SOURCE"); COURSE=$(realpath -m "${COURSE:-$HOME_OF_INSTRUCTOR/$COURSE_ID}")
case $COURSE/ in
  "$HOME_OF_INSTRUCTOR"/?*) ;;
  *) die "--course-dir must lie inside $HOME_OF_INSTRUCTOR (Formgrader needs it under the server's root)" ;;
esac
ENV=$(realpath -m "$ENV"); EXCHANGE=$(realpath -m "$EXCHANGE")
JUPYTER_CONFIG=$(realpath -m "$JUPYTER_CONFIG"); HUB_DIR=$(realpath -m "$HUB_DIR")
cd /  # nothing below depends on where it was started (and other users cannot enter root's folders)

# One environment for everybody, readable by all users: the course's dependencies plus JupyterHub.
if [ -n "$EXISTING" ]; then
  [ -x "$ENV/bin/python" ] || die "--existing-env $ENV has no bin/python"
else
  if [ ! -x "$ENV/bin/python" ]; then
    PYTHON=$("$PYTHON" -c 'import sys; print(sys.executable)') || die "no Python $PYTHON (--python)"
    runuser -u "$INSTRUCTOR" -- "$PYTHON" -c '' 2>/dev/null \
      || die "$INSTRUCTOR cannot run $PYTHON: make the environment with a Python every user can run (--python)"
    "$PYTHON" -m venv "$ENV"
  fi
  "$ENV/bin/pip" install --quiet torch==2.13.0  # first: the CPU build (an unpinned torch pulls CUDA, GBs)
  "$ENV/bin/pip" install --quiet "$SOURCE" jupyterhub
  chmod -R a+rX "$ENV"
fi
LACKS='import importlib.util as u, sys; sys.exit(" ".join(m for m in sys.argv[1:] if not u.find_spec(m)) or 0)'
"$ENV/bin/python" -c "$LACKS" jupyterhub nbgrader torch utils || die "$ENV lacks the packages above"
runuser -u "$INSTRUCTOR" -- "$ENV/bin/python" -c "$LACKS" jupyterhub nbgrader torch \
  || die "$INSTRUCTOR cannot use $ENV/bin/python: every user must be able to enter and read its folders" \
         "(and those of the Python it was made with)"

# JupyterHub's proxy, from the npm registry (needs Node.js 20 or newer).
if ! command -v configurable-http-proxy >/dev/null; then
  command -v npm >/dev/null || die "configurable-http-proxy needs Node.js and npm (e.g. apt-get install nodejs npm)"
  npm install -g --silent configurable-http-proxy
fi

# The exchange: world-writable with the sticky bit, as nbgrader's default one. The course's folder in it belongs to
# the instructor from the start, so that no student can create (and own) it before the first release.
install -d -m 1777 "$EXCHANGE"
if [ -e "$EXCHANGE/$COURSE_ID" ] && [ "$(stat -c %U "$EXCHANGE/$COURSE_ID")" != "$INSTRUCTOR" ]; then
  die "$EXCHANGE/$COURSE_ID belongs to $(stat -c %U "$EXCHANGE/$COURSE_ID"), not $INSTRUCTOR:" \
      "check what is in it, then remove it"
fi
install -d -o "$INSTRUCTOR" -g "$GROUP_OF_INSTRUCTOR" -m 755 "$EXCHANGE/$COURSE_ID"

# The global nbgrader configuration (course and exchange) for everybody; students' servers also read
# JUPYTER_CONFIG/students (the hub points them there), which hides Formgrader and Create Assignment.
install -D -m 644 "$HERE/nbgrader_config.py" "$JUPYTER_CONFIG/nbgrader_config.py"
# Formgrader's pages with a Content-Security-Policy, and its buttons and pages off the server's event loop
# (utils/formgrader_csp.py), in every server that reads JUPYTER_CONFIG.
install -D -m 644 "$SOURCE/jupyter-config/jupyter_server_config.d/attn-formgrader-csp.json" \
  "$JUPYTER_CONFIG/jupyter_server_config.d/attn-formgrader-csp.json"
install -d -m 755 "$JUPYTER_CONFIG/students" "$JUPYTER_CONFIG/students/labconfig"
cat > "$JUPYTER_CONFIG/students/jupyter_server_config.json" <<'EOF'
{"ServerApp": {"jpserver_extensions": {"nbgrader.server_extensions.formgrader": false}}}
EOF
cat > "$JUPYTER_CONFIG/students/labconfig/page_config.json" <<'EOF'
{"disabledExtensions": {"@jupyter/nbgrader:formgrader": true, "@jupyter/nbgrader:create-assignment": true}}
EOF
chmod 644 "$JUPYTER_CONFIG/students/jupyter_server_config.json" "$JUPYTER_CONFIG/students/labconfig/page_config.json"

# The hub's state and the class list (root's only: it also holds the hub's database and cookie secret).
install -d -m 700 "$HUB_DIR"
{
  echo "# The class on this hub, read by jupyterhub_config.py when the hub starts: restart the hub after editing."
  echo "# One student's Unix user per line; the instructor, the exchange and the Jupyter configuration as below."
  echo "# setup.sh writes this file anew from its arguments."
  echo "instructor $INSTRUCTOR $COURSE"
  echo "exchange $EXCHANGE"
  echo "jupyter-config $JUPYTER_CONFIG"
  printf '%s\n' "$@"
} > "$HUB_DIR/class.txt"

# The instructor grades from their own clone (committed files; the hub starts their server in it).
# (git refuses to read a repository of another user unless told it is safe: -c does not reach git upload-pack.)
if [ ! -e "$COURSE" ]; then
  SAFE=$(mktemp); printf '[safe]\n\tdirectory = *\n' > "$SAFE"; chmod 644 "$SAFE"
  CLONED=0; runuser -u "$INSTRUCTOR" -- env GIT_CONFIG_GLOBAL="$SAFE" git clone --quiet "$SOURCE" "$COURSE" || CLONED=$?
  rm -f "$SAFE"; [ "$CLONED" = 0 ] || die "$INSTRUCTOR could not clone $SOURCE into $COURSE"
fi
[ -f "$COURSE/nbgrader_config.py" ] || die "$COURSE exists but is not a clone of the course (no nbgrader_config.py)"

# The checkout this ran from holds the answers (solutions/) and the hidden tests (grader/).
for student in "$@"; do
  if runuser -u "$student" -- test -r "$SOURCE/solutions" -o -r "$SOURCE/grader" 2>/dev/null; then
    echo "setup.sh: WARNING: $student can read $SOURCE/solutions or $SOURCE/grader (answers, hidden tests): keep" \
         "that checkout where only root can read it (e.g. chmod 700 its parent folder)" >&2
    break
  fi
done

START="$ENV/bin/jupyterhub -f $HERE/jupyterhub_config.py"
[ "$HUB_DIR" = /srv/jupyterhub ] || START="ATTN_HUB_DIR=$HUB_DIR $START"
echo "Class list: $HUB_DIR/class.txt ($# students). Start the hub as root with: $START"
