"""The hidden checks' seed: a hash of the learner's whole answer source, keyed with a secret of the grading side.

Every check's random inputs come from `submission_seed(notebook)` (`utils.engine.checking.GradingContext.seed`
derives one seed per check from it). Two things make those inputs impossible for a learner to compute:

- **The key is a secret that lives only on the grading side**: 32 random bytes in ``seed.key`` beside the hidden
  tests (``grader/seed.key``, or in ``$ATTN_GRADER_DIR``), made on first use, mode 0600 and ignored by git. It is
  never in utils/, notebooks/, solutions/ (nbgrader copies every other file of solutions/<assignment>/ into the
  release) or a release, and the learner's code never sees it: the grading sandbox hides the grader folder from the
  worker (`utils.engine.sandbox`), and the key is read by the grading process, never by the zygote or a worker.
- **The whole source is hashed**: every answer cell and every code cell the learner added, comments and docstrings
  included, so an answer cannot carry a table of inputs anywhere outside the hash.

The same notebook always meets the same inputs while the key stays, so a regrade (nbgrader autograde again, an
instructor's `attn check`) gives the same score to the last digit. An instructor who grades on two machines copies
``grader/seed.key`` from the first to the second (``install -m 600``); a new key changes the hidden inputs of every
submission, so a partly wrong answer may then score differently.

A learner's own `attn check` in their own clone makes and uses their own key: the inputs their checks meet there differ
from the instructor's. A correct answer passes on any inputs; only a wrong one can score differently.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

from nbformat import NotebookNode

from .. import notebooks as nbs

#: The key's file name, in the grader folder (`utils.notebooks.grader_dir`).
KEY_FILE = "seed.key"
_KEY_BYTES = 32
_KEYS: dict[str, bytes] = {}  # read once per process and folder


def key_path(folder: Path | None = None) -> Path:
    """Where the key is: ``<grader folder>/seed.key``."""
    return (folder if folder is not None else nbs.grader_dir()) / KEY_FILE


def is_key_in_making(path: Path) -> bool:
    """Whether `path` is a key another grading process is making this instant (`_create`'s temporary name): it comes
    and goes on its own, so what compares the course files before and after grading leaves it out."""
    return path.name.startswith(f".{KEY_FILE}.")


def seed_key(folder: Path | None = None) -> bytes:
    """The grading side's secret key, made on first use (see the module's docstring).

    It is made whole under a temporary name and then linked to ``seed.key``, which fails when the name exists: of two
    grading processes that start at once, one makes the key and both read that one, never a half-written file."""
    path = key_path(folder)
    cached = _KEYS.get(str(path))
    if cached is not None:
        return cached
    key = _read(path)
    if key is None:
        _create(path)
        key = _read(path)
        if key is None:
            raise nbs.CourseError(f"{path} vanished while it was made; grade again")
    _KEYS[str(path)] = key
    return key


def _create(path: Path) -> None:
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise nbs.CourseError(
            f"cannot make the key of the hidden inputs, {path} ({e.strerror}): grade as the user who owns "
            f"{path.parent}, or copy seed.key there from the machine that grades the class") from e
    try:
        with os.fdopen(fd, "w") as fh:
            os.fchmod(fh.fileno(), 0o600)  # whatever the umask
            fh.write(secrets.token_bytes(_KEY_BYTES).hex() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another grading process made it first: theirs is the key
        except OSError:  # a file system without hard links: made in place (a reader at that instant may find it empty)
            with contextlib.suppress(FileExistsError):
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                with open(os.open(path, flags, 0o600), "w") as out, open(tmp) as made:
                    out.write(made.read())
    finally:
        os.unlink(tmp)


def _read(path: Path) -> bytes | None:
    """The key in `path`, or None where there is none yet; never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise nbs.CourseError(f"cannot read the key of the hidden inputs, {path} ({e.strerror}): it must be a "
                              "file of the user who grades, not a link") from e
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise nbs.CourseError(f"{path} is not a regular file: move it aside and grade again to make a new key")
        if st.st_mode & 0o077 and st.st_uid == os.geteuid():
            os.fchmod(fh.fileno(), 0o600)  # copied without its mode: nobody else may read it
        text = fh.read(4 * _KEY_BYTES).decode("ascii", "replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != _KEY_BYTES:
        raise nbs.CourseError(f"{path} is not a key of {_KEY_BYTES} bytes in hex: restore it from the machine that "
                              "graded before, or delete it to make a new one (the hidden inputs of every submission "
                              "then change)")
    return key


def submission_seed(learner: NotebookNode, key: bytes | None = None) -> int:
    """The hidden checks' random seed: the learner's whole code (every answer cell and every code cell they added,
    comments and docstrings included), hashed with the grading side's secret key (`seed_key`, or `key`).

    The same notebook always meets the same inputs, so grading it again gives the same score to the last digit; any
    change to an answer, even a comment, changes every input; and without the key nobody can compute them. The
    course's own cells do not count: grading runs the course's copy of them whatever the notebook holds."""
    digest = hashlib.blake2b(key=seed_key() if key is None else key, digest_size=8, person=b"attn-hidden-in")
    for cell in learner.cells:
        meta = nbs.nbgrader_meta(cell)
        if cell.cell_type != "code" or (meta.get("grade_id") and not meta.get("solution")):
            continue
        source = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        data = source.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big") + data)  # framed: no two lists of cells hash alike
    return int.from_bytes(digest.digest(), "big") >> 4
