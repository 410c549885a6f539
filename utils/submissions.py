"""A submission is data: nbgrader's exchange, collect, autograde and feedback copy only bounded regular files of it."""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import glob
import itertools
import os
import pwd
import re
import shutil
import stat
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.converters import Autograde, BaseConverter, GenerateFeedback
from nbgrader.exchange.default import (
    ExchangeCollect,
    ExchangeReleaseAssignment,
    ExchangeReleaseFeedback,
    ExchangeSubmit,
)
from nbgrader.utils import notebook_hash, parse_utc
from traitlets import Bool, Float, Integer
from traitlets.config import LoggingConfigurable

# Every file of a student's is opened without following a link and without blocking (a FIFO would block forever);
# fstat on the open descriptor then decides, so nothing can be swapped between a check and the open.
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_NBGRADER_FILES = ("timestamp.txt", "submission_secret.txt")  # what nbgrader itself writes beside the notebooks
_STUDENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")  # a Unix or hub user name; never "..", "-rf", "a/b"
_SECRET = re.compile(r"[0-9a-f]{16,256}")
_LOGGED = 20  # skipped entries logged one by one per student; the rest are counted in one line


class SubmissionFiles(LoggingConfigurable):
    """Limits on one student's submission beyond CourseDirectory.max_file_size and max_dir_size (sizes, in KB)."""

    max_files = Integer(500, help="Files and folders of one submission that are copied, at most").tag(config=True)
    max_name_length = Integer(100, help="Longest file or folder name that is copied, in characters").tag(config=True)
    max_depth = Integer(8, help="Deepest folder of a submission that is copied").tag(config=True)


def bad_name(name: str, limit: int) -> str | None:
    """Why a file name is refused, or None: names reach logs, shells and browsers, and must read as what they are."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not valid UTF-8"
    if len(name) > limit:
        return f"its name is longer than {limit} characters"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in name):
        return "its name has control or invisible characters"
    if name[0] in "-.~" or name[-1] in ". " or name != name.strip() or "\\" in name:
        return "its name could pass for an option or a path (a leading '-', '.' or '~', a trailing '.', a '\\')"
    return None


def shown(name: str) -> str:
    """A name as the log shows it: quoted, escaped (newlines, bytes that are not UTF-8) and at most 80 characters."""
    return repr(name if len(name) <= 80 else name[:60] + "…" + name[-10:])


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class Copy:
    """One student's files from a folder, never through a link, regular files only, within the course's limits.

    Whatever is left out gets a WARNING naming the student and the file; nothing a student hands in stops the batch.
    With `dest=None` (or names outside `only`) files are only listed in `left`, never opened.
    """

    def __init__(self, owner: Any, who: str, verb: str, owners: set[int] | None = None) -> None:
        limits = SubmissionFiles(parent=owner)
        coursedir = owner.coursedir
        self.log, self.who, self.verb, self.owners = owner.log, who, verb, owners
        self.max_file, self.max_total = coursedir.max_file_size * 1000, coursedir.max_dir_size * 1000  # as nbgrader
        self.max_files, self.max_name, self.max_depth = limits.max_files, limits.max_name_length, limits.max_depth
        self.ignore, self.include = list(coursedir.ignore), list(coursedir.include)
        self.entries = self.total = self.skipped = 0
        self.stopped = False
        self.copied: list[str] = []
        self.left: list[str] = []

    def run(self, src: str, dest: str | None, first: Iterable[str] = (), only: set[str] | None = None) -> None:
        fd = os.open(src, _READ | os.O_DIRECTORY)
        try:
            if dest is not None:
                os.makedirs(dest, exist_ok=True)
            self._folder(fd, "", dest, 0, list(first), only)
        finally:
            os.close(fd)
        if self.skipped > _LOGGED:
            self.log.warning("%s: %d more entries not %s (not listed one by one)", self.who, self.skipped - _LOGGED,
                             self.verb)

    def _skip(self, path: str, why: str) -> None:
        self.skipped += 1
        if self.skipped <= _LOGGED:
            self.log.warning("%s: %s not %s: %s", self.who, shown(path), self.verb, why)

    def _stop(self, path: str, why: str) -> None:
        self.stopped = True
        self.log.warning("%s: %s and everything after it not %s: %s", self.who, shown(path), self.verb, why)

    def _folder(self, fd: int, rel: str, dest: str | None, depth: int, first: list[str], only: set[str] | None) -> None:
        with os.scandir(fd) as it:  # a listing is bounded too: a folder of a million entries costs no more
            names = sorted(itertools.islice((e.name for e in it), 100 * self.max_files))
        for name in [n for n in first if n in names] + [n for n in names if n not in first]:
            path = rel + name
            if self.stopped:
                return
            if any(fnmatch.fnmatch(name, g) for g in self.ignore):
                self.log.debug("%s: ignoring %r (CourseDirectory.ignore)", self.who, path)
                continue
            self.entries += 1
            if self.entries > self.max_files:
                self._stop(path, f"over {self.max_files} files and folders (SubmissionFiles.max_files)")
                return
            if why := bad_name(name, self.max_name):
                self._skip(path, why)
                continue
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as e:
                self._skip(path, e.strerror or "cannot be read")
                continue
            if self.owners is not None and st.st_uid not in self.owners:
                self._skip(path, f"it belongs to {_user(st.st_uid)}, not to the student")
            elif stat.S_ISLNK(st.st_mode):
                self._skip(path, "it is a link (links are never followed)")
            elif stat.S_ISDIR(st.st_mode):
                if depth >= self.max_depth:
                    self._skip(path, f"deeper than {self.max_depth} folders (SubmissionFiles.max_depth)")
                    continue
                sub_dest = os.path.join(dest, name) if dest is not None and (only is None or path in only) else None
                try:
                    sub = os.open(name, _READ | os.O_DIRECTORY, dir_fd=fd)
                except OSError as e:
                    self._skip(path, e.strerror or "cannot be opened")
                    continue
                try:
                    if sub_dest is not None:
                        os.makedirs(sub_dest, exist_ok=True)
                    self._folder(sub, path + "/", sub_dest, depth + 1, [], None)
                finally:
                    os.close(sub)
            elif not stat.S_ISREG(st.st_mode):
                self._skip(path, "it is not a regular file (a pipe, socket or device)")
            elif not any(fnmatch.fnmatch(name, g) for g in self.include):
                self.log.debug("%s: ignoring %r (CourseDirectory.include)", self.who, path)
            elif dest is None or (only is not None and path not in only):
                self.left.append(path)
            else:
                self._file(fd, name, path, os.path.join(dest, name))

    def _file(self, fd: int, name: str, path: str, target: str) -> None:
        try:
            src = os.open(name, _READ, dir_fd=fd)  # ELOOP if it became a link since it was listed
        except OSError as e:
            self._skip(path, f"it cannot be opened ({e.strerror})")
            return
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                self._skip(path, "it is not a regular file (a pipe, socket or device)")
                return
            if self.owners is not None and st.st_uid not in self.owners:
                self._skip(path, f"it belongs to {_user(st.st_uid)}, not to the student")
                return
            if st.st_size > self.max_file:
                self._skip(path, f"{st.st_size} bytes, over the limit of {self.max_file} per file "
                                 "(CourseDirectory.max_file_size)")
                return
            if self.total + st.st_size > self.max_total:
                self._stop(path, f"the submission would pass {self.max_total} bytes in all "
                                 "(CourseDirectory.max_dir_size)")
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)  # our own earlier copy (a re-run); never a student's path
            size = 0
            with open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644),
                      "wb") as out:
                while size <= self.max_file and (chunk := os.read(src, 1 << 20)):  # a growing file is cut off
                    size += len(chunk)
                    out.write(chunk)
            if size > self.max_file:
                os.unlink(target)
                self._skip(path, f"it grew past {self.max_file} bytes while it was copied")
                return
            self.total += size
            self.copied.append(path)
        finally:
            os.close(src)


def read_regular(path: str, limit: int) -> bytes | None:
    """A regular file's bytes if it has at most `limit` of them (never through a link, never blocking), or None."""
    try:
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def read_small(path: str, limit: int = 4096) -> str | None:
    """A short regular file's text, stripped, or None."""
    data = read_regular(path, limit)
    return None if data is None else data.decode("utf-8", "replace").strip()


# -- the exchange: folders only the instructor (or root) owns ----------------------------------------------------
class _OwnedFolders:
    """The course's folders in the exchange must be the instructor's (or root's), never a student's.

    The exchange is world-writable: a student who made the course's folder first (before the first release) could
    read, replace or plant what the others hand in.
    """

    def check_folder(self: Any, path: str, mode: int | None = None) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            self.fail(f"Missing folder in the exchange: {path}. Release an assignment first (nbgrader "
                      "release_assignment), which makes it.")
        me = os.geteuid()
        if not stat.S_ISDIR(st.st_mode):
            self.fail(f"Refusing {path}: it is a link or a file, not a folder. Someone may have planted it to divert "
                      f"the exchange: move it aside (sudo mv '{path}' '{path}.suspect') and run this command again.")
        group_ok = getattr(self.coursedir, "groupshared", False) and st.st_gid in os.getgroups()
        if st.st_uid not in (me, 0) and not group_ok:
            self.fail(f"Refusing {path}: it belongs to {_user(st.st_uid)}, not to you ({_user(me)}) or root. A "
                      "student may have made it before the course was released there, to read or replace what "
                      f"others hand in. Move it aside (sudo mv '{path}' '{path}.suspect') and run this command "
                      "again: it is then made anew, yours.")
        if mode is not None and st.st_uid == me and stat.S_IMODE(st.st_mode) != mode:
            self.log.info("Setting the mode of %s to %o", path, mode)
            os.chmod(path, mode)

    def ensure_directory(self: Any, path: str, mode: int) -> None:
        if mode & stat.S_IWOTH:  # inbound: anyone may drop an entry, nobody may rename or delete another's,
            mode |= stat.S_ISVTX | stat.S_ISGID  # and each entry gets the instructor's group (SafeSubmit's 0770/0640)
        try:
            os.mkdir(path)  # never makedirs: a missing parent is the exchange's business, not ours
            os.chmod(path, mode)
        except FileExistsError:
            pass
        self.check_folder(path, mode)


class SafeReleaseAssignment(_OwnedFolders, ExchangeReleaseAssignment):
    """nbgrader's release_assignment into course folders that are the instructor's own (checked, not assumed)."""

    def ensure_root(self) -> None:
        super().ensure_root()
        st = os.stat(self.root)
        if not st.st_mode & stat.S_ISVTX:  # without it anyone could rename the course's folder away
            if st.st_uid == os.geteuid():
                self.log.info("Setting the sticky bit on the exchange %s", self.root)
                os.chmod(self.root, stat.S_IMODE(st.st_mode) | stat.S_ISVTX)
            else:
                self.log.warning("The exchange %s lacks the sticky bit (chmod +t): anyone may rename what is in it",
                                 self.root)


class SafeReleaseFeedback(_OwnedFolders, ExchangeReleaseFeedback):
    """Releases only the generated .html of each student's feedback, keyed by the secret collect recorded."""

    def init_dest(self) -> None:
        if self.coursedir.course_id:
            self.check_folder(os.path.join(self.root, self.coursedir.course_id))
        super().init_dest()

    def copy_files(self) -> None:
        cd = self.coursedir
        exclude = set(cd.student_id_exclude.split(",")) if cd.student_id_exclude else set()
        pattern = cd.format_path(cd.feedback_directory, cd.student_id or "*", cd.assignment_id)
        for folder in sorted(glob.glob(pattern)):
            student = os.path.basename(os.path.dirname(folder))
            if student in exclude:
                continue
            # The secret comes from autograded/ (collect checked it, autograde kept it): feedback/ holds only .html.
            graded = cd.format_path(cd.autograded_directory, student, cd.assignment_id)
            secret = read_small(os.path.join(graded, "submission_secret.txt")) or ""
            if not _SECRET.fullmatch(secret):
                self.log.warning("%s: feedback not released: %s has no submission secret (not handed in through "
                                 "the exchange?)", student, graded)
                continue
            for name in sorted(os.listdir(folder)):
                notebook = name.removesuffix(".html")
                if not name.endswith(".html") or not os.path.isfile(os.path.join(graded, notebook + ".ipynb")):
                    continue  # only the feedback generated for a graded notebook
                data = read_regular(os.path.join(folder, name), cd.max_file_size * 1000)
                if data is None:
                    self.log.warning("%s: %s not released: not a regular file of a sensible size", student, shown(name))
                    continue
                dest = os.path.join(self.dest_path, notebook_hash(secret=secret, notebook_id=notebook) + ".html")
                tmp = dest[:-5] + "-tmp.html"
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as out:
                    out.write(data)
                os.chmod(tmp, 0o644)
                os.replace(tmp, dest)  # atomically, as nbgrader does
                self.log.info("Releasing feedback for student '%s' on assignment '%s/%s/%s'", student, cd.course_id,
                              cd.assignment_id, notebook)


class SafeSubmit(ExchangeSubmit):
    """nbgrader's submit, with the entry open to its student and the instructor's group only.

    nbgrader leaves the entry mode 0777 and its files 0644: anyone who learns its name could read, empty or replace
    it. inbound is set-group-ID (SafeReleaseAssignment), so the entry folder has the instructor's group: mode 0770
    keeps everyone else out of it, files and all. (Its files stay 0644: nbgrader writes timestamp.txt and the secret
    after copying, when the folder has lost its set-group-ID bit, so they carry the student's own group.) In an
    exchange released without that bit the folder has the student's group: it is left 0755, or the instructor could
    not collect it, and the student is told.
    """

    def copy_files(self) -> None:
        super().copy_files()
        entry = os.path.join(self.inbound_path, self.assignment_filename)
        private = os.stat(entry).st_gid == os.stat(self.inbound_path).st_gid
        if not private:
            self.log.warning("This course's inbound folder does not give submissions the instructor's group: other "
                             "students could read yours if they learnt its name. Tell your instructor (nbgrader "
                             "release_assignment with the course's configuration sets it).")
        for folder, _, files in os.walk(entry):
            os.chmod(folder, 0o770 if private else 0o755)
            for name in files:
                if not os.path.islink(os.path.join(folder, name)):
                    os.chmod(os.path.join(folder, name), 0o644)


class SafeCollect(_OwnedFolders, ExchangeCollect):
    """nbgrader's collect, taking only entries each student made themselves and only bounded regular files of them.

    An inbound entry counts as student S's only when it is a real folder (not a link) owned by the Unix user S (or
    by the collecting user: one user playing every student on a single machine) and every file in it is the same
    user's. Anything else gets one WARNING line and is left in inbound; the other students are collected as usual.

    An entry is dated by what its student cannot choose: when it was last changed (the latest change time, st_ctime,
    of the entry and of everything in it that is the student's, which the kernel sets and no unprivileged call sets
    back). `nbgrader submit` names the entry with the time it started and then copies, so an honest entry was last
    changed a moment after the time in its name: the name is believed only when the change time confirms it (within
    `timestamp_tolerance`). Otherwise the entry is dated by its change time, with one WARNING line: an entry written
    after the due date under an earlier name, or an on-time entry changed after the due date, is late. nbgrader's
    choice of entry (the latest, or the latest before the due date) and `timestamp.txt`, which autograde reads for
    the late penalty, both use that date.
    """

    check_owner = Bool(False, help="Replaced by a stricter check: entries not the student's are not collected")
    timestamp_tolerance = Float(10.0, help=(
        "Seconds an entry may have been changed after the time in its name and still be dated by its name (nbgrader "
        "submit names the entry when it starts, then copies the files). Past that, or when the entry was last "
        "changed before its name's time, it is dated by when it was last changed")).tag(config=True)

    def init_src(self) -> None:
        if not self.coursedir.course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        self.check_folder(self.course_path)
        self.check_folder(self.inbound_path)
        wanted = f"{self.coursedir.student_id or '*'}+{self.coursedir.assignment_id}+*"
        self._owners: dict[str, set[int]] = {}
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                assignment = gb.find_assignment(self.coursedir.assignment_id)
                self.duedate = assignment.duedate
                self._notebooks = [f"{nb.name}.ipynb" for nb in assignment.notebooks]
            except MissingEntry:
                self.duedate, self._notebooks = None, []
        records = []
        with os.scandir(self.inbound_path) as it:
            names = sorted(e.name for e in it if fnmatch.fnmatchcase(e.name, wanted))
        for name in names:
            record = self._record(name)
            if record is not None:
                records.append(record)
        by_student: dict[str, list[dict]] = defaultdict(list)
        for record in records:
            by_student[record["username"]].append(record)
        self.src_records = []  # nbgrader's choice: the latest, or the latest before the due date when asked
        for group in by_student.values():
            group.sort(key=lambda r: r["timestamp"], reverse=True)
            on_time = [r for r in group if self.duedate and r["timestamp"] <= self.duedate]
            self.src_records.append(on_time[0] if self.before_duedate and on_time else group[0])

    def _record(self, name: str) -> dict | None:
        path = os.path.join(self.inbound_path, name)
        parts = name.rsplit("+", 3)
        student = parts[0]

        def refuse(why: str) -> None:
            self.log.warning("Inbound entry %s not collected: %s", shown(name), why)

        if len(parts) < 3 or parts[1] != self.coursedir.assignment_id or not _STUDENT_ID.fullmatch(student):
            return refuse("its name is not <student id>+<assignment>+<time stamp>[+<random>]")
        try:
            named = parse_utc(parts[2])
        except (ValueError, OverflowError, TypeError):
            return refuse("its time stamp is not one")
        try:
            st = os.lstat(path)
        except OSError as e:
            return refuse(e.strerror or "it cannot be read")
        if stat.S_ISLNK(st.st_mode):
            return refuse("it is a link (links are never followed)")
        if not stat.S_ISDIR(st.st_mode):
            return refuse("it is not a folder")
        try:
            expected = {pwd.getpwnam(student).pw_uid}
        except KeyError:
            expected = set()
        if st.st_uid not in expected | {os.geteuid()}:
            return refuse(f"it claims to be {student}'s but belongs to {_user(st.st_uid)}")
        self._owners[path] = {st.st_uid}
        record = {"username": student, "filename": name, "named": named}
        try:
            self._date(record, path)
        except OSError as e:  # an entry that changes under the walk costs its student only
            return refuse(f"when it was last changed cannot be read ({e.strerror or e})")
        return record

    # -- when an entry was handed in: its change time, which only the kernel sets ---------------------------------
    def _date(self, record: dict, path: str, changed_ns: int | None = None) -> None:
        """Date `record` by its name when the entry's last change confirms it, else by that change (with a WARNING)."""
        changed_ns = self._last_change(path) if changed_ns is None else changed_ns
        changed = _EPOCH + datetime.timedelta(microseconds=changed_ns // 1000)
        named = record["named"]
        record["changed_ns"] = changed_ns
        lag = (changed - named).total_seconds()  # a difference of two datetimes never overflows
        if -_CLOCK_SLACK_S <= lag <= self.timestamp_tolerance:
            record["timestamp"] = named
        else:
            record["timestamp"] = changed
            self.log.warning("%s: the submission named %s was last changed at %s, %.0f s %s: dated by when it was "
                             "last changed (inbound entry %s)", record["username"], _stamp(named), _stamp(changed),
                             abs(lag), "later" if lag > 0 else "earlier", shown(record["filename"]))
        record["stamp"] = _stamp(record["timestamp"])

    def _last_change(self, path: str) -> int:
        """The latest change time (ns) of the entry folder and of everything in it that is its student's, looked at
        in the order and within the limits of `Copy` (so everything collect copies counts), never through a link.

        Whatever belongs to someone else is not collected and does not count; nor does the change time of a folder
        others may write in (nbgrader's own submit leaves the entry 0777), since anyone may change it by adding a file.
        """
        limits = SubmissionFiles(parent=self)
        owners, ignore = self._owners[path], list(self.coursedir.ignore)
        latest, seen = 0, 0

        def counts(st: os.stat_result) -> bool:
            return st.st_uid in owners and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH)

        def folder(fd: int, depth: int, first: list[str]) -> bool:  # False once past SubmissionFiles.max_files
            nonlocal latest, seen
            with os.scandir(fd) as it:
                names = sorted(itertools.islice((e.name for e in it), 100 * limits.max_files))
            for name in [n for n in first if n in names] + [n for n in names if n not in first]:
                if any(fnmatch.fnmatch(name, g) for g in ignore):
                    continue
                seen += 1
                if seen > limits.max_files:
                    return False
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if counts(st):
                    latest = max(latest, st.st_ctime_ns)
                if stat.S_ISDIR(st.st_mode) and depth < limits.max_depth:
                    try:
                        sub = os.open(name, _READ | os.O_DIRECTORY, dir_fd=fd)
                    except OSError:
                        continue
                    try:
                        if not folder(sub, depth + 1, []):
                            return False
                    finally:
                        os.close(sub)
            return True

        try:
            fd = os.open(path, _READ | os.O_DIRECTORY)
        except OSError:
            return os.lstat(path).st_ctime_ns
        try:
            st = os.fstat(fd)
            if counts(st):
                latest = st.st_ctime_ns
            folder(fd, 0, [*self._notebooks, *_NBGRADER_FILES])
        finally:
            os.close(fd)
        return latest or st.st_ctime_ns  # nothing of the student's in it: the folder's own time

    def do_copy(self, src: str, dest: str, log: Any = None) -> None:
        record = next(r for r in self.src_records if os.path.join(self.inbound_path, r["filename"]) == src)
        student = record["username"]
        try:
            copy = Copy(self, student, "collected", owners=self._owners[src])
            copy.run(src, dest, first=[*self._notebooks, *_NBGRADER_FILES])  # what is graded comes first
            changed_ns = self._last_change(src)
            if changed_ns > record["changed_ns"]:  # changed while it was collected: dated again, by what was copied
                self._date(record, src, changed_ns)
            # nbgrader's own files are rewritten, never trusted: a bad time stamp would stop every later collect.
            secret_path = os.path.join(dest, "submission_secret.txt")
            secret = read_small(secret_path)
            if secret is not None and not _SECRET.fullmatch(secret):
                self.log.warning("%s: 'submission_secret.txt' not collected: not a secret nbgrader wrote", student)
            for name, text in (("timestamp.txt", record["stamp"]), ("submission_secret.txt", secret)):
                path = os.path.join(dest, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                if text is not None and (name == "timestamp.txt" or _SECRET.fullmatch(text)):
                    with open(path, "w") as fh:
                        fh.write(text)
        except Exception as e:  # noqa: BLE001 - one student's entry costs that student only, never the batch
            self.log.error("%s: submission not collected: %s", student, e)
            shutil.rmtree(dest, ignore_errors=True)


_EPOCH = datetime.datetime(1970, 1, 1)  # change times as naive UTC, as nbgrader's parse_utc and the gradebook
_CLOCK_SLACK_S = 1.0  # the kernel's coarse clock for change times may lag the clock a name's time was read from


def _stamp(when: datetime.datetime) -> str:
    """A naive UTC time as nbgrader writes it into names and timestamp.txt."""
    return f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"


# -- autograde and generate_feedback: the notebooks, nbgrader's own files, nothing else ------------------------------
class _OnlyNotebooks(BaseConverter):
    """Converters that take from a student's folder only the assignment's notebooks (and nbgrader's own files).

    nbgrader copies every other file of a submission onward (submitted/ to autograded/ to feedback/, and then to
    the student): here they are listed in the log and left where they are, and links are never followed.
    """

    keep: tuple[str, ...] = ()  # nbgrader's own files copied onward
    extras = "not copied"  # what the log says of the student's other files

    def init_notebooks(self) -> None:
        super().init_notebooks()
        limits = SubmissionFiles(parent=self)
        for folder, notebooks in list(self.assignments.items()):
            student = os.path.basename(os.path.dirname(folder))
            why = bad_name(student, limits.max_name_length)
            for path in (os.path.dirname(folder), folder):
                if why is None and not stat.S_ISDIR(os.lstat(path).st_mode):
                    why = f"{path} is a link or a file, not a folder"
            good = [nb for nb in notebooks if why is None and self._regular(student, nb)]
            if why is not None:
                self.log.warning("%s: not %s: %s", shown(student), self._verb, why)
            if good:
                self.assignments[folder] = good
            else:
                del self.assignments[folder]

    @property
    def _verb(self) -> str:
        return "graded" if isinstance(self, Autograde) else "given feedback"

    def _regular(self, student: str, notebook: str) -> bool:
        try:
            fd = os.open(notebook, _READ)
        except OSError as e:
            why = "it is a link (links are never followed)" if os.path.islink(notebook) else e.strerror
        else:
            st = os.fstat(fd)
            os.close(fd)
            why = None
            if not stat.S_ISREG(st.st_mode):
                why = "it is not a regular file (a pipe, socket or device)"
            elif st.st_size > self.coursedir.max_file_size * 1000:
                why = f"{st.st_size} bytes, over the limit of {self.coursedir.max_file_size * 1000} per file"
        if why:
            self.log.warning("%s: %s not %s: %s", student, shown(os.path.basename(notebook)), self._verb, why)
        return why is None

    def init_assignment(self, assignment_id: str, student_id: str) -> None:
        source, dest = self._format_source(assignment_id, student_id), self._format_dest(assignment_id, student_id)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                graded = {f"{nb.name}.ipynb" for nb in gb.find_assignment(assignment_id).notebooks}
            except MissingEntry:
                graded = set()
        copy = Copy(self, student_id, "copied")
        copy.run(source, dest if self.keep else None, only=set(self.keep))
        others = [p for p in copy.left if p not in graded and p not in _NBGRADER_FILES]
        if others:
            listed = ", ".join(shown(p) for p in others[:_LOGGED]) + (f" and {len(others) - _LOGGED} more"
                                                                     if len(others) > _LOGGED else "")
            self.log.warning("%s: %s (%s): %s", student_id, self.extras, assignment_id, listed)


class SafeAutograde(Autograde, _OnlyNotebooks):
    keep = _NBGRADER_FILES
    extras = "files that are not the assignment's notebooks, never graded, run, imported or copied on"


class SafeGenerateFeedback(GenerateFeedback, _OnlyNotebooks):
    """nbgrader's generate_feedback, whose page carries a Content-Security-Policy of its own.

    The feedback HTML is opened anywhere: by the student from disk, by the instructor from the Jupyter server's
    /files/ (with the instructor's session). Its <meta> policy (utils.sanitize.with_feedback_policy) lets no script
    run but the page's own and fetches nothing from outside, so markup that got past the sanitiser still cannot act.
    """

    extras = "files that are not the assignment's notebooks, not copied to feedback/ (only the generated .html is)"

    def write_single_notebook(self, output: str, resources: Any) -> None:
        from .sanitize import with_feedback_policy

        super().write_single_notebook(with_feedback_policy(output), resources)


def install() -> None:
    """Make nbgrader's autograde and generate_feedback (commands and Formgrader's buttons) use the converters above.

    nbgrader has no setting for a converter's class: its apps look the class up in their module when they start.
    """
    from nbgrader.apps import api, autogradeapp, generatefeedbackapp

    # The command-line apps, and the API behind Formgrader's Autograde and Generate Feedback buttons.
    for module in (autogradeapp, api):
        module.Autograde = SafeAutograde
    for module in (generatefeedbackapp, api):
        module.GenerateFeedback = SafeGenerateFeedback
