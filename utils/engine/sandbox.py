"""Where the learner's code runs while grading: workers forked from a prepared parent, isolated when root.

Grading starts one *zygote* process that imports the heavy libraries (torch, IPython, matplotlib) once and then
only ever forks: each worker is a fresh fork, ready in milliseconds, so a worker killed for an endless loop is
replaced at once. The zygote never runs the learner's code; its workers do (``utils.engine.worker``).

Started as root (an instructor's grading machine, a container, CI), the zygote is PID 1 of its own mount, PID and
network namespaces. The workers see the system's programs and libraries, the Python installation and the `utils`
package, read-only, and a private empty /tmp as their working folder. The course folder (grader/, solutions/,
the gradebook, other students' submissions), home folders and every other top-level folder are hidden behind
empty file systems. Workers run as a user id of their zygote's own (no real user's, and no other zygote's: the
process limit counts per user, so a fork bomb uses up only its own submission's count), cannot gain privileges,
have no network and have limits on memory, file size, processes and CPU time. Before each new worker, when a
worker is stopped, and when grading ends, every process in the namespace but the zygote is killed, so nothing a
learner's code started survives.

The zygote reaps every process of its namespace (it is their PID 1), so the CPU time of a process that ended
stays counted in the zygote's children's time: `Zygote.usage` reads what one submission's processes have spent
together (CPU seconds, resident memory, how many), which is what the grader's limits measure (not the wall
clock, which another submission's load would stretch).

Without root (an instructor's server on a JupyterHub runs as the instructor), the same namespaces come from an
unprivileged user namespace where Linux allows one (`unshare --user --map-root-user`; Debian, Ubuntu and Fedora do
by default): the same folders are hidden and bound back read-only, there is no network and the same PID namespace.
There is no `nobody` to switch to there, so each worker instead enters a user namespace of its own, which holds no
capability over the mounts: it cannot unmount what hides the course or make a read-only folder writable, and the
zygote is not dumpable, so a worker cannot take it over with ptrace either.

Where neither is possible (macOS, a kernel without user namespaces), workers run as the same user, each in its own
process group, with the same resource limits, and the grader checks its own files before and after (see
`utils.engine.checking`).
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

#: Grading as root, each zygote's workers run as a user id of their own, from this range (above any real user's and
#: below 2**31, which some tools take for negative): RLIMIT_NPROC counts processes per user id.
WORKER_UIDS = (2_000_000_000, 2**27)
#: Top-level folders the worker may see (read-only for `nobody`); every other top-level folder is hidden.
SYSTEM_DIRS = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "proc", "dev", "sys", "run", "var"}
#: Writable-by-everyone places inside the visible folders, replaced by private empty ones.
SHARED_WRITABLE = ["/var/tmp", "/dev/shm", "/run/lock", "/var/lock", "/run/user", "/dev/mqueue"]
#: Environment variables passed on to the worker; everything else (secrets included) stays behind.
PASS_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ")
#: Imported once by the zygote, so that every worker starts with them loaded.
PRELOAD = ("torch", "IPython.core.interactiveshell", "matplotlib.pyplot", "seaborn", "utils.engine.worker", "utils.grading",
           "utils.viz", "utils.blocks")

MEMORY_MB = int(os.environ.get("ATTN_WORKER_MEMORY_MB", "6144"))
#: Processes and threads one submission's workers may run at once (all of them together when isolated).
PROCESSES = int(os.environ.get("ATTN_WORKER_PROCESSES", "256"))
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_serial = itertools.count()


def worker_uid() -> int:
    """A user id for one zygote's workers that no other zygote alive uses (the grader's pid and a serial number)."""
    base, span = WORKER_UIDS
    return base + ((os.getpid() << 5) + next(_serial) % 32) % span


def start_method() -> str:
    """How the zygote starts a worker: "fork" (a copy of itself, torch already imported: ready in milliseconds) on
    Linux, or "spawn" (a fresh interpreter that imports torch itself: seconds) where forking a process that has
    imported torch is unsafe (macOS). $ATTN_WORKER_START chooses; CI forces "spawn" on Linux for the grading tests."""
    chosen = os.environ.get("ATTN_WORKER_START") or ("fork" if sys.platform.startswith("linux") else "spawn")
    if chosen not in ("fork", "spawn"):
        raise ValueError(f"ATTN_WORKER_START must be 'fork' or 'spawn', not {chosen!r}")
    return chosen


def limits() -> dict[str, tuple[int, int]]:
    """Resource limits of a worker (soft, hard): it cannot raise them."""
    mem = MEMORY_MB * 2**20
    return {
        "RLIMIT_AS": (mem, mem),
        "RLIMIT_FSIZE": (256 * 2**20, 256 * 2**20),
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_CPU": (600, 610),
        "RLIMIT_NOFILE": (512, 512),
    }


def worker_env(home: str, course_root: Path, token: str = "1") -> dict[str, str]:
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({
        # A user id with no name: libraries that ask for the user's name (getpass) read it here.
        "USER": "attn-worker", "LOGNAME": "attn-worker",
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home, "TMPDIR": home, "XDG_CACHE_HOME": f"{home}/.cache",
        "MPLBACKEND": "agg", "MPLCONFIGDIR": f"{home}/.config/matplotlib", "IPYTHONDIR": f"{home}/.ipython",
        "JUPYTER_PLATFORM_DIRS": "1", "PYTHONPATH": str(course_root), "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8", "ATTN_WORKER": token,
    })
    return env


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def namespace_flags() -> list[str]:
    """unshare's flags for the zygote: a user namespace first when not root."""
    userns = [] if _as_root() else ["--user", "--map-root-user"]
    return [*userns, "--mount", "--pid", "--net", "--fork", "--mount-proc"]


@lru_cache(maxsize=1)
def isolation() -> str | None:
    """None when workers can be isolated here, else why not (one sentence)."""
    if os.environ.get("ATTN_SANDBOX", "1") == "0":
        return "ATTN_SANDBOX=0 turns isolation off"
    if not hasattr(os, "geteuid"):
        return "this system has no Linux namespaces, so the learner's code cannot be isolated from the course files"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "the `unshare` program (util-linux) is missing"
    probe = subprocess.run([unshare, *namespace_flags(), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        if not _as_root():
            return ("grading is not running as root and this system allows no unprivileged user namespaces "
                    f"({probe.stderr.strip()[:160]}), so the learner's code cannot be isolated from the course files")
        return f"namespaces are not available here ({probe.stderr.strip()[:200]})"
    return None


def _keep_paths(course_root: Path) -> list[str]:
    keep = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), os.path.realpath(course_root / "utils")}
    return sorted(keep, key=len)


def _masks(course_root: Path, hidden: list[Path]) -> list[str]:
    masks = [str(p) for p in Path("/").iterdir() if p.is_dir() and not p.is_symlink() and p.name not in SYSTEM_DIRS]
    masks += [os.path.realpath(course_root)] + [os.path.realpath(h) for h in hidden]
    masks += [p for p in SHARED_WRITABLE if os.path.isdir(p) and not os.path.islink(p)]
    return sorted(set(masks), key=len)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


@dataclass(frozen=True)
class Usage:
    """What one submission's processes have spent: CPU seconds (user and system, the ended ones included) and
    anonymous resident memory in bytes, all of them together and the worker's own; how many processes there are, and
    how many of them are running or ready to run (a process that waits for the CPU is not waiting for input)."""

    cpu: float
    memory: float
    processes: int
    worker_cpu: float = 0.0
    worker_memory: float = 0.0
    memory_limit: float = math.inf  # bytes they may hold together (MEMORY_MB)
    running: int = 0  # how many are running or ready to run (not waiting for something)


def _descendants(roots: list[int], include_roots: bool) -> list[int]:
    """Every process below `roots` (children of any of their threads), `roots` too if asked."""
    found = list(roots) if include_roots else []
    stack = list(roots)
    seen = set(stack)
    while stack and len(seen) < 100_000:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in seen:
                    seen.add(kid)
                    found.append(kid)
                    stack.append(kid)
    return found


def _stat(pid: int) -> tuple[float, float, int, bool] | None:
    """(its own CPU seconds, its reaped children's, its anonymous resident bytes, whether it is running or ready to
    run) for a process, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        with open(f"/proc/{pid}/statm", "rb") as f:
            pages = f.read().split()
    except (OSError, IndexError):
        return None
    try:
        own = (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (all its threads)
        children = (int(fields[13]) + int(fields[14])) / _TICK  # cutime, cstime
        anon = max(0, int(pages[1]) - int(pages[2])) * _PAGE  # resident - shared (file and shmem) = anonymous
    except (IndexError, ValueError):
        return None
    return own, children, anon, fields[0] in (b"R", b"D")  # D: in the kernel for it (disk), not waiting on us


def _shared_out(pid: int) -> int | None:
    """A process's anonymous memory with each page it shares (a forked child shares its parent's until either writes)
    divided among its sharers (Pss_Anon; smaps_rollup walks every mapping, so it is read only when needed)."""
    found: dict[bytes, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                key, _, rest = line.partition(b":")
                if key in (b"Pss_Anon", b"Pss"):
                    found[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return found.get(b"Pss_Anon", found.get(b"Pss"))


class Zygote:
    """The grader's handle on the zygote: ask it for workers, and end it (with everything it started)."""

    def __init__(self, course_root: Path, hidden: list[Path]) -> None:
        self.isolated = isolation() is None
        self.start = start_method()
        self.hidden = hidden
        ours, theirs = socket.socketpair()
        self.control = ours
        fd = theirs.fileno()
        if self.isolated:
            home = "/tmp/work"
            config = {"fd": fd, "keep": _keep_paths(course_root), "masks": _masks(course_root, hidden),
                      "env": worker_env(home, course_root), "isolated": True, "home": home,
                      "userns": not _as_root(), "start": self.start, "uid": worker_uid()}
            cmd = [shutil.which("unshare") or "unshare", *namespace_flags(), "--kill-child", sys.executable, "-m",
                   "utils.engine.sandbox", json.dumps(config)]
            env = {**os.environ, "PYTHONPATH": str(course_root)}
        else:
            home = tempfile.mkdtemp(prefix="attn-worker-")
            self.token = f"attn-{os.getpid()}-{time.monotonic_ns()}"
            config = {"fd": fd, "env": worker_env(home, course_root, self.token), "isolated": False, "home": home,
                      "start": self.start}
            cmd = [sys.executable, "-m", "utils.engine.sandbox", json.dumps(config)]
            env = {**os.environ, "PYTHONPATH": str(course_root)}
        self.home = home
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     pass_fds=(fd,), cwd=course_root, env=env, start_new_session=True)
        theirs.close()
        self._host: int | None = None
        self._measured = (-1.0, 0.0)  # when the memory of the workers' processes was last shared out, and how much
        self.workers: list[int] = []
        self._buffer = b""  # what the zygote answered past the last full line
        self._unread = 0  # answers to `warm` not read yet
        # Workers write to the zygote's stdout: read it all the time so a flood never blocks them.
        self.output = bytearray()
        self._drain = threading.Thread(target=self._read_output, daemon=True)
        self._drain.start()

    def _read_output(self, keep: int = 64 * 1024) -> None:
        stream = self.proc.stdout
        while stream is not None:
            chunk = stream.read1(65536)
            if not chunk:
                return
            if len(self.output) < keep:
                self.output += chunk[: keep - len(self.output)]

    def _zygote_pid(self) -> int:
        """The zygote's pid here (isolated, it is unshare's child: PID 1 of the namespace)."""
        if not self.isolated:
            return self.proc.pid
        if self._host is None:
            for _ in range(2000):
                kids = _children(self.proc.pid)
                if kids:
                    self._host = kids[0]
                    break
                if self.proc.poll() is not None:
                    break
                time.sleep(0.005)
        return self._host or self.proc.pid

    def spawn(self, timeout: float = 120.0) -> tuple[socket.socket, int]:
        """A fresh worker: (socket to it, its pid here). Anything the previous one started is killed first."""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.control, [b'{"op": "spawn"}\n'], [theirs.fileno()])
            ns_pid = int(self._reply(timeout)["pid"])
        finally:
            theirs.close()
        host = ns_pid
        if self.isolated:
            zygote = self._zygote_pid()
            for pid in _children(zygote):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
                except (OSError, StopIteration):
                    continue
                if int(nspid[-1]) == ns_pid:
                    host = pid
                    break
        self.workers.append(host)
        return ours, host

    def warm(self, notebook: str) -> None:
        """Ask the zygote to run the course's warm-up functions for `notebook` (`utils.course.Notebook.warm`) before
        it starts the next worker, which then inherits what they computed. Returns at once: the zygote's answer is
        read before the next request (instant when it was warmed before: what they compute is kept). Nothing to do
        for a notebook without warm-up functions, or where workers are spawned (they inherit nothing)."""
        from .. import course

        if self.start != "fork" or not course.notebook(notebook).warm:
            return
        self.control.sendall(json.dumps({"op": "warm", "notebook": notebook}).encode() + b"\n")
        self._unread += 1

    def _reply(self, timeout: float) -> dict[str, Any]:
        """The zygote's next answer line (answers to `warm` not yet read come first, and are skipped)."""
        self.control.settimeout(timeout)
        try:
            while True:
                while b"\n" not in self._buffer:
                    chunk = self.control.recv(4096)
                    if not chunk:
                        raise EOFError("the zygote ended")
                    self._buffer += chunk
                line, _, self._buffer = self._buffer.partition(b"\n")
                if self._unread:
                    self._unread -= 1  # a warm-up's answer: it saves time and is never needed
                    continue
                return json.loads(line)
        finally:
            self.control.settimeout(None)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def recycle(self, timeout: float = 30.0) -> None:
        """Make the zygote as good as new for the next notebook: every worker and every process they started ends,
        and the workers' home folder is emptied (one learner's files must never reach the next one's code)."""
        if not self.isolated:
            for pid in self.workers:
                self.kill_worker(pid)
            self._kill_strays()
        self.workers.clear()
        self.control.sendall(b'{"op": "recycle"}\n')
        answer = self._reply(timeout)
        if answer.get("ok") is not True:
            raise OSError(f"the zygote could not be recycled: {answer!r:.200}")

    def kill_worker(self, pid: int) -> None:
        """Stop a worker and, isolated, every process of the namespace with it (a fork bomb's included)."""
        try:
            if self.isolated:
                os.kill(pid, signal.SIGKILL)
            else:
                os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.isolated and self.alive:
            try:
                self.control.sendall(b'{"op": "kill"}\n')
                self._reply(10.0)
            except (OSError, EOFError, ValueError):
                pass  # a zygote that does not answer is closed by the grader's next step

    def usage(self, worker: int | None = None) -> Usage | None:
        """What the workers' processes have spent together since this zygote started (None where /proc cannot tell):
        isolated, every process of the namespace (the processes that ended included, through the zygote's children's
        time); otherwise the workers and what they started. `worker`: the pid whose own share is told apart."""
        if not os.path.isdir("/proc/self/task"):
            return None
        cpu = own_cpu = 0.0
        memory: dict[int, int] = {}
        running = 0
        zygote = _stat(self._zygote_pid())
        if zygote is None:
            return None
        # A forked worker's memory starts as the zygote's (torch & co.), shared until either writes to it: not theirs.
        inherited = zygote[2] if self.start == "fork" else 0
        if self.isolated:
            cpu = zygote[1]  # its children's time: every process of the namespace that ended
            roots = [self._zygote_pid()]
        else:
            roots = list(self.workers)
        for pid in _descendants(roots, include_roots=not self.isolated):
            stat = _stat(pid)
            if stat is None:
                continue
            cpu += stat[0] + stat[1]
            memory[pid] = max(0, stat[2] - inherited)
            running += stat[3]
            if pid == worker:
                own_cpu = stat[0] + stat[1]
        total = float(sum(memory.values()))
        if total > MEMORY_MB * 2**20:
            total = self._shared_out(memory, total)
        return Usage(cpu, total, len(memory), own_cpu, float(memory.get(worker, 0)), MEMORY_MB * 2**20, running)

    def _shared_out(self, memory: dict[int, int], estimate: float) -> float:
        """The processes' memory with every shared page divided among its sharers (what they hold together), where
        the quick estimate says they are over the limit. Reading it walks every mapping (milliseconds a process), so
        it is read at most once a second and the last reading used in between."""
        now = time.monotonic()
        if now - self._measured[0] >= 1.0:
            found = [_shared_out(pid) for pid in list(memory)[:1024]]
            self._measured = (now, float(sum(v for v in found if v is not None)))
        return min(estimate, self._measured[1])

    def close(self) -> None:
        """End the zygote, every worker and every process they started."""
        if not self.isolated:
            for pid in self.workers:
                self.kill_worker(pid)
            self._kill_strays()
        for pid in ([self._zygote_pid()] if self.isolated else []) + [self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.control.close()
        self._drain.join(timeout=5)
        if not self.isolated:
            shutil.rmtree(self.home, ignore_errors=True)


    def _kill_strays(self) -> None:
        """Not isolated: end processes the workers started outside their process groups (they carry our token)."""
        mark = f"ATTN_WORKER={self.token}".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in (os.getpid(), self.proc.pid):
                continue
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ValueError):
                continue


# -- inside: the zygote and the workers it forks ---------------------------------------------------------------
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
CLONE_NEWUSER = 0x10000000


def _mount(libc: Any, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _hide_everything(libc: Any, config: dict[str, Any]) -> None:
    """Empty file systems over every folder but the system's; Python and `utils` bound back read-only."""
    held = {k: os.open(k, os.O_PATH | os.O_DIRECTORY) for k in config["keep"] if os.path.isdir(k)}
    for mask in config["masks"]:
        if os.path.isdir(mask):
            size = "512m" if mask == "/tmp" else "16m"
            _mount(libc, "tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0755,size={size}")
    for path, fd in held.items():
        os.makedirs(path, exist_ok=True)
        _mount(libc, f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        _mount(libc, None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    os.makedirs(config["home"], mode=0o700, exist_ok=True)
    if not config.get("userns"):
        os.chown(config["home"], config["uid"], config["uid"])


def _become_worker(libc: Any, config: dict[str, Any], fd: int) -> None:
    """In the forked child: drop every privilege, set the limits, serve the grader on `fd`. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if config["isolated"] and config.get("userns"):
            # No `nobody` here: a user namespace of its own leaves the worker no capability over the mounts.
            if libc.unshare(CLONE_NEWUSER) != 0:
                raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            resource.setrlimit(resource.RLIMIT_NPROC, (PROCESSES, PROCESSES))  # counted in its own user namespace
        elif config["isolated"]:
            uid = config["uid"]
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            resource.setrlimit(resource.RLIMIT_NPROC, (PROCESSES, PROCESSES))  # counted for this user id alone
        else:
            os.setsid()  # its own process group, so the grader can stop it and what it starts
        for name, value in limits().items():
            resource.setrlimit(getattr(resource, name), value)
        os.chdir(config["home"])
        from .worker import main

        code = main(["worker", str(fd)])
    except BaseException:  # noqa: BLE001 - a worker never returns into the zygote's loop
        code = 70
    os._exit(code or 0)


def _prepare_home(config: dict[str, Any]) -> None:
    """The workers' home as a fresh worker expects it: matplotlib's config folder, owned by the worker's user."""
    os.makedirs(os.environ["MPLCONFIGDIR"], exist_ok=True)
    if config["isolated"] and not config.get("userns"):
        uid = config["uid"]
        os.chown(config["home"], uid, uid)
        for root, dirs, files in os.walk(os.environ["MPLCONFIGDIR"]):
            os.chown(root, uid, uid)
            for name in dirs + files:
                os.chown(os.path.join(root, name), uid, uid)


def _empty(folder: str) -> None:
    """Remove everything in `folder` that lies on its own file system (what is bound into it stays)."""
    try:
        device = os.lstat(folder).st_dev
    except OSError:
        return
    found: list[str] = []
    for root, dirs, files in os.walk(folder, topdown=True):
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if d not in links and os.lstat(os.path.join(root, d)).st_dev == device]
        found += [os.path.join(root, d) for d in dirs]
        for name in files + links:
            try:
                os.unlink(os.path.join(root, name))
            except OSError:
                pass
    for path in reversed(found):  # deepest first
        try:
            os.rmdir(path)
        except OSError:
            pass  # it holds a mount point: it stays, empty


def _recycle(config: dict[str, Any]) -> bool:
    """Everything the workers may have written goes: isolated, every empty file system put over a folder (the
    private /tmp with the workers' home, /dev/shm, ...); otherwise the workers' home. True when the home is as new."""
    for folder in config.get("masks", []) if config["isolated"] else [config["home"]]:
        _empty(folder)
    os.makedirs(config["home"], mode=0o700, exist_ok=True)
    _prepare_home(config)
    return [e.name for e in os.scandir(config["home"])] == [".config"]


def _warm(notebook: str) -> bool:
    """Run the course's warm-up functions for `notebook` here, in the zygote (course code only, never the learner's);
    what they keep is then frozen like the preloaded libraries. False if one failed (grading goes on without)."""
    import importlib

    from .. import course

    try:
        for target in course.notebook(notebook).warm:
            module, function = target.split(":")
            getattr(importlib.import_module(module), function)()
    except Exception:  # noqa: BLE001 - a warm-up saves time, it is never needed: the workers compute it themselves
        return False
    gc.freeze()
    return True


def _reap(*_: Any) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_all(config: dict[str, Any]) -> None:
    """Isolated: every process of the namespace but this one (its PID 1) ends, at once (the kernel signals them all
    under one lock, so a fork bomb cannot outrun it)."""
    if config["isolated"]:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _spawn_worker(config: dict[str, Any], fd: int) -> int:
    """Start a worker as a fresh interpreter (fork and exec in C, no Python between them) that inherits only `fd`."""
    argv = [sys.executable, "-m", "utils.engine.sandbox", "--worker", json.dumps({**config, "fd": fd})]
    # From "/": `python -m` puts its folder first on sys.path, and the workers' home is theirs to write.
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, pass_fds=(fd,), close_fds=True, cwd="/")
    proc.returncode = 0  # reaped by the zygote's SIGCHLD handler: Popen must not wait for it
    return proc.pid


def spawned_worker(config: dict[str, Any]) -> None:
    """`python -m utils.engine.sandbox --worker CONFIG`: the spawn path's worker, set up exactly as a forked one."""
    _become_worker(ctypes.CDLL(None, use_errno=True), config, config["fd"])


def zygote(config: dict[str, Any]) -> None:
    """Import the heavy libraries once, then start one worker per request (fork, or spawn: `start_method`) until
    the grader goes away."""
    libc = ctypes.CDLL(None, use_errno=True)
    if config["isolated"]:
        _hide_everything(libc, config)
    os.chdir(config["home"])
    os.environ.clear()
    os.environ.update(config["env"])
    os.makedirs(os.environ["MPLCONFIGDIR"], exist_ok=True)
    for module in PRELOAD:
        __import__(module)
    gc.freeze()  # what every worker inherits is never garbage: no collection in a worker walks it (see worker.main)
    if config.get("userns"):
        # Workers run as the same user here: ptrace and /proc/<pid>/mem must not reach the zygote's capabilities.
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _prepare_home(config)
    control = socket.socket(fileno=config["fd"])
    # Reaped here, not by the kernel (SIG_IGN): a process's CPU time then stays in this one's children's time when it
    # ends, for `Zygote.usage` to count. Isolated, every orphan of the namespace comes here too (its PID 1).
    signal.signal(signal.SIGCHLD, _reap)
    buffer, received = b"", []  # requests are lines; a `warm` may arrive in one read with the request after it
    while True:
        while b"\n" not in buffer:
            try:
                msg, fds, _, _ = socket.recv_fds(control, 4096, 4)
            except OSError:
                msg, fds = b"", []
            received += fds
            if not msg:
                break
            buffer += msg
        if b"\n" not in buffer:
            break
        line, _, buffer = buffer.partition(b"\n")
        request = json.loads(line.decode())
        if request.get("op") == "warm":
            control.sendall(json.dumps({"ok": _warm(str(request.get("notebook")))}).encode() + b"\n")
            continue
        fds, received = received, []  # only a `spawn` carries a file descriptor, and one is answered at a time
        _kill_all(config)  # before a new worker, a recycle or when asked: nothing of the last worker's survives
        if request.get("op") == "kill":
            for fd in fds:
                os.close(fd)
            control.sendall(b'{"ok": true}\n')
            continue
        if request.get("op") == "recycle":
            for fd in fds:
                os.close(fd)
            control.sendall(json.dumps({"ok": _recycle(config)}).encode() + b"\n")
            continue
        if not fds:
            control.sendall(b'{"ok": false}\n')
            continue
        if config.get("start") == "spawn":
            pid = _spawn_worker(config, fds[0])
        else:
            pid = os.fork()
            if pid == 0:
                control.close()
                for extra in fds[1:]:
                    os.close(extra)
                _become_worker(libc, config, fds[0])
        for fd in fds:
            os.close(fd)
        control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _kill_all(config)
    os._exit(0)


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        spawned_worker(json.loads(sys.argv[2]))
    else:
        zygote(json.loads(sys.argv[1]))
