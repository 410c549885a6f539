"""Real Unix users for the tests of a class (the exchange, file tricks, the hub): created as root, shared by tests.

A class on one machine gives every person a Unix user; what one student can reach of another's work is decided by
the kernel, so the tests that prove it must run as those users. They need root (to create users and switch to
them) and a Python environment every user can run; `require_unix_users()` skips with the reason elsewhere, and
fails instead where ATTN_REQUIRE_USERS=1 (CI, as root) says the test must run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# One set of names for every test: creating users is slow and global, so they are made once and kept.
INSTRUCTOR = "attn-instructor"
STUDENTS = ("attn-alice", "attn-bob", "attn-carol")
_LOCK = Path("/tmp/attn-unix-users.lock")


def _not_runnable_by_others(path: Path) -> Path | None:
    """The first folder on the way to `path` that other users cannot enter, or None."""
    for parent in [*reversed(path.parents), path]:
        if parent.is_dir() and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def require_unix_users(*, through_view: bool = True) -> None:
    """Skip (or fail, where ATTN_REQUIRE_USERS=1) unless this process can create users and they can run Python.

    `through_view` (the default) accepts a Python under a folder other users cannot enter (/root, with pyenv) where a
    private mount namespace can open the way (`run_as` then does; see `in_view`).
    """
    reason = None
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        reason = "needs root to create Unix users and act as them (run make test as root, as CI does)"
    elif not shutil.which("useradd") or not shutil.which("runuser"):
        reason = "needs useradd and runuser (Debian's passwd and util-linux)"
    elif (closed := next(filter(None, map(_not_runnable_by_others, _needed())), None)) is not None and not (
            through_view and shutil.which("unshare")):
        reason = f"other users cannot use this environment or checkout: {closed} is not executable by them"
    if reason:
        if os.environ.get("ATTN_REQUIRE_USERS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def ensure_user(name: str) -> pwd.struct_passwd:
    """The Unix user `name` with a home folder of its own (mode 0700), created if missing."""
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers may ask for the same user at once
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
            entry = pwd.getpwnam(name)
        home = Path(entry.pw_dir)
        home.mkdir(mode=0o700, exist_ok=True)
        os.chown(home, entry.pw_uid, entry.pw_gid)
        home.chmod(0o700)
        return entry


def run_as(user: str, args: list[str], *, cwd: Path | str | None = None, env: dict[str, str] | None = None,
           check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `args` as `user` (runuser: its uid, gid and groups), with a clean environment of that user's."""
    entry = pwd.getpwnam(user)
    base = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": entry.pw_dir, "USER": user,
            "LOGNAME": user, "LANG": "C.UTF-8", "JUPYTER_PLATFORM_DIRS": "1"}
    cmd = in_view([shutil.which("runuser") or "runuser", "-u", user, "--", *args])
    proc = subprocess.run(cmd, check=False, cwd=cwd or entry.pw_dir, env={**base, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} as {user} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return proc


@contextlib.contextmanager
def shared_folder(prefix: str):
    """A folder in /tmp that every user can enter (a temporary path of pytest's is root's alone), removed after."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# A Python installed under a folder only root may enter (pyenv in /root), or a checkout in such a folder (a CI clone
# in a private temporary folder), cannot be used by the test users. A private mount namespace (the command only) puts
# an empty, enterable folder over each such folder with just the way through bound back in: the users then reach the
# interpreter, the environment and the checkout, and nothing else of those folders; every other path is the
# machine's own. Arguments: CLOSED NAME [NAME...] -- ... and then the command.
_VIEW = """set -e
while [ "$1" != "--" ]; do
  closed=$1; shift
  held=$(mktemp -d /tmp/attn-view.XXXXXX)
  mount --bind "$closed" "$held"
  mount -t tmpfs -o mode=0755,size=1m attn-view "$closed"
  while [ "$1" != ";" ]; do
    if [ -d "$held/$1" ]; then mkdir -p "$closed/$1"; else touch "$closed/$1"; fi
    mount --bind "$held/$1" "$closed/$1"
    shift
  done
  shift
  umount "$held"
  rmdir "$held"
done
shift
exec "$@"
"""


def _needed() -> list[Path]:
    """What the test users must reach: this Python, this environment and this checkout."""
    from utils import notebooks as nbs

    return [Path(sys.executable).resolve().parent, Path(sys.prefix).resolve(), nbs.ROOT.resolve()]


def _openings() -> dict[Path, set[str]]:
    """Each closed folder on the way to what is needed, with the names inside it the way goes through."""
    openings: dict[Path, set[str]] = {}
    for path in _needed():
        for folder in [*reversed(path.parents), path]:
            if folder.is_dir() and not os.stat(folder).st_mode & 0o001:
                names = set(os.listdir(folder)) if folder == path else {path.relative_to(folder).parts[0]}
                openings.setdefault(folder, set()).update(names)  # the needed folder itself: all of it
    return openings


def in_view(cmd: list[str]) -> list[str]:
    """`cmd` itself, or `cmd` run in a mount namespace that lets other users reach this environment's Python, the
    environment and the checkout (a server started this way, such as a hub, starts other users' processes in that
    namespace too)."""
    openings = _openings()
    if not openings:
        return cmd
    args: list[str] = []
    for closed in sorted(openings, key=lambda p: len(p.parts)):  # outer folders first
        args += [str(closed), *sorted(openings[closed]), ";"]
    return [shutil.which("unshare") or "unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _VIEW,
            "sh", *args, "--", *cmd]
