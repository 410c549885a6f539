# A JupyterHub for one class of the attention course: one instructor (who grades), any number of students, one
# machine, each person a Unix user (JupyterHub's default PAM login: their Unix password). setup.sh in this folder
# installs what this file expects and writes the class list; start the hub as root with
#     /opt/attn-env/bin/jupyterhub -f deploy/jupyterhub/jupyterhub_config.py
# (ATTN_HUB_DIR=DIR in its environment when setup.sh was given --hub-dir DIR). Nothing here needs editing.
#
# The class list is a text file, $ATTN_HUB_DIR/class.txt (default /srv/jupyterhub/class.txt), read when the hub
# starts (restart the hub after editing it):
#     # comments start with '#'
#     instructor mrs-ng                        <- the instructor's Unix user [and their course clone]
#     exchange /srv/attn-exchange              <- nbgrader's shared exchange
#     jupyter-config /etc/jupyter              <- where every server finds nbgrader_config.py
#     alice                                    <- every other line: one student's Unix user
#     bob
# A student is added with `useradd --create-home NAME`, a line in class.txt and a restart of the hub.
import os
import pwd
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner

c = get_config()  # noqa: F821 - provided by JupyterHub

HUB_DIR = Path(os.environ.get("ATTN_HUB_DIR") or "/srv/jupyterhub")
CLASS_LIST = HUB_DIR / "class.txt"
BIN = Path(sys.executable).parent  # the shared environment: jupyterhub-singleuser, kernels, nbgrader, alembic


def read_class_list(path: Path) -> dict:
    """The class list: {"instructor", "course", "exchange", "jupyter-config", "students"}; exits on a mistake."""
    settings = {"instructor": None, "course": None, "exchange": "/srv/attn-exchange",
                "jupyter-config": "/etc/jupyter", "students": []}
    if not path.is_file():
        sys.exit(f"{path} is missing: run deploy/jupyterhub/setup.sh (or set ATTN_HUB_DIR to its --hub-dir)")
    for number, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if len(words) == 1:
            settings["students"].append(words[0])
        elif words and words[0] == "instructor" and len(words) in (2, 3):
            settings["instructor"] = words[1]
            settings["course"] = words[2] if len(words) == 3 else None
        elif words and words[0] in ("exchange", "jupyter-config") and len(words) == 2:
            settings[words[0]] = words[1]
        elif words:
            sys.exit(f"{path}, line {number}: expected one user name per line, or 'instructor NAME [FOLDER]', "
                     f"'exchange FOLDER', 'jupyter-config FOLDER'; got {line!r}")
    if not settings["instructor"]:
        sys.exit(f"{path} names no instructor (a line 'instructor NAME')")
    missing = []
    for name in [settings["instructor"], *settings["students"]]:
        try:
            pwd.getpwnam(name)
        except KeyError:
            missing.append(name)
    if missing:
        sys.exit(f"{path} names users that do not exist on this machine: {', '.join(missing)} (useradd --create-home)")
    if not settings["course"]:
        settings["course"] = str(Path(pwd.getpwnam(settings["instructor"]).pw_dir) / "attention-course")
    return settings


CLASS = read_class_list(CLASS_LIST)
INSTRUCTOR, COURSE, STUDENTS = CLASS["instructor"], CLASS["course"], CLASS["students"]
JUPYTER_CONFIG = Path(CLASS["jupyter-config"])


class CourseSpawner(LocalProcessSpawner):
    """Everyone's server as their own Unix user, working in the folder nbgrader works in.

    nbgrader takes a server's working folder, not the folder its file browser shows, as the place to fetch
    assignments into and submit from (the Assignments panel) and as the course folder (Formgrader: the course's
    nbgrader_config.py, solutions/ and gradebook.db). So students' servers start in their notebook_dir, the
    instructor's in their clone of the course. Students' servers also read JUPYTER_CONFIG/students, which turns
    Formgrader and Create Assignment off for them.
    """

    def working_folder(self) -> str:
        if self.user.name == INSTRUCTOR:
            return COURSE
        home = pwd.getpwnam(self.user.name).pw_dir
        folder = self.format_string(self.notebook_dir) or home
        return home + folder[1:] if folder.startswith("~") else folder

    async def start(self):
        if self.user.name == INSTRUCTOR and not (Path(COURSE) / "nbgrader_config.py").is_file():
            raise RuntimeError(f"{COURSE} is not the course: setup.sh clones it there (or name the folder in "
                               f"{CLASS_LIST}: 'instructor {INSTRUCTOR} FOLDER')")
        return await super().start()

    def make_preexec_fn(self, name):
        become_user, folder = super().make_preexec_fn(name), self.working_folder()

        def become_user_in_folder():
            become_user()
            os.chdir(folder)  # after the switch of user: only its owner may enter a home

        return become_user_in_folder

    def get_env(self):
        env = super().get_env()
        if self.user.name == INSTRUCTOR:
            env["JUPYTER_CONFIG_PATH"] = str(JUPYTER_CONFIG)
            # Grading imports the clone's utils, which finds solutions/ and grader/ beside it; the environment's
            # copy (what students' kernels import) has neither.
            env["PYTHONPATH"] = COURSE
        else:
            env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(JUPYTER_CONFIG / "students"), str(JUPYTER_CONFIG)])
        return env


c.JupyterHub.spawner_class = CourseSpawner
# The hub listens on port 8000 over plain HTTP: passwords cross the network, so put HTTPS in front of it
# (c.JupyterHub.ssl_cert and ssl_key, or a reverse proxy such as nginx or Caddy).
c.Authenticator.allowed_users = {INSTRUCTOR, *STUDENTS}
c.Authenticator.admin_users = {INSTRUCTOR}

# The hub's own state (its database, cookie secret, the proxy's pid) stays in HUB_DIR, wherever it is started from.
c.JupyterHub.db_url = f"sqlite:///{HUB_DIR / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(HUB_DIR / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(HUB_DIR / "jupyterhub-proxy.pid")

# Servers come from the hub's environment, found without activating it; their programs (kernels, nbgrader's
# alembic) too.
c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.Spawner.environment = {
    "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"]),
    # The course's nbgrader_config.py (in the instructor's clone) and the global one use this exchange.
    "ATTN_EXCHANGE": CLASS["exchange"],
}
# Everyone's file browser shows their home (the instructor's course is attention-course/ in it); everyone lands in
# JupyterLab, whose Nbgrader menu has the Assignments panel (fetch, validate, submit) and, for the instructor,
# Formgrader.
c.Spawner.notebook_dir = "~"
c.Spawner.default_url = "/lab"
# Importing torch and starting JupyterLab on a busy machine can take a while.
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
