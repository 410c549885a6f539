"""The course's Formgrader server extension: a Content-Security-Policy on its pages, and its work off the event loop.

**The policy.** Formgrader serves each submission from the instructor's own Jupyter server, where a script could use
the instructor's session (the contents API writes files, kernels run code). `utils.sanitize` removes script from what
is graded; this server extension is the second wall. Every Formgrader page gets a policy without 'unsafe-inline': its
own `<script>` elements carry a fresh nonce, the inline click handlers of its templates are allowed by hash, and
nothing else runs: no inline handler (`onerror=`), no `javascript:` URL, no script from the notebook's part of the
page, no plugin. The server's own `frame-ancestors` rule is kept (on a hub it stops other users' pages from framing
Formgrader).

**Off the event loop.** nbgrader's Formgrader handlers are synchronous: pressed from Formgrader, Autograde (with the
sanitiser and the grading engine), Generate/Release Feedback, Collect, Generate and Release ran on the server's one
event loop, and so did rendering a submission's page with nbconvert. While they ran, the whole server (on a hub, the
instructor's whole server: JupyterLab, kernels, `/api/status`) answered nothing. Here those buttons run in one
worker thread, one job after another in the order pressed (nbgrader's gradebook has one writer, and the grading
engine of `utils.engine.autograde` one zygote), and submission pages are rendered by two other threads, so viewing a
submission never waits behind a class's grading. The button's row says "Please wait..." until its job is done (its
log says how long it waited behind others). Each job works on its own copy of Formgrader's CourseDirectory (nbgrader's
API changes the shared one while it runs, which the pages answered meanwhile would see), each rendering thread on
its own nbconvert exporter (an exporter keeps per-notebook state while it renders), and a button's log holds only its
own command's lines (nbgrader's commands log through the server's logger).

**The class report.** The extension also serves `attn report`'s page (`utils.report`) as a Formgrader page,
/formgrader/attn-report[/ASSIGNMENT][?lang=zh] (and its CSV), behind the instructor's login and rendered in a lane,
and adds "Class report" to Formgrader's sidebar.

Enabled by jupyter-config/jupyter_server_config.d/attn-formgrader-csp.json: `attn lab` puts that folder on
JUPYTER_CONFIG_PATH, and deploy/jupyterhub/setup.sh installs the file into the hub's Jupyter configuration.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import hashlib
import inspect
import io
import json
import logging
import os
import queue
import re
import secrets
import threading
import time
import traceback
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

_HANDLER = re.compile(r'\son[a-z]+\s*=\s*"([^"]*)"', re.IGNORECASE)


def inline_handlers() -> list[str]:
    """Formgrader's own inline event handlers (`onClick="createAssignmentModal();"`...), read from nbgrader's
    templates, so the policy allows exactly those, by hash, whatever nbgrader's version."""
    from nbgrader.server_extensions.formgrader import handlers

    found: set[str] = set()
    for template in Path(handlers.template_path).rglob("*"):
        if template.is_file() and template.suffix in (".tpl", ".j2", ".html"):
            found.update(_HANDLER.findall(template.read_text(encoding="utf-8", errors="replace")))
    return sorted(found)

# Where nbconvert loads MathJax from in the notebook page (Formgrader's default template).
MATHJAX = "https://cdnjs.cloudflare.com"
_SCRIPT = re.compile(rb"<script\b", re.IGNORECASE)
_NOTEBOOK = b'id="notebook-container"'


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@cache
def _handler_hashes() -> str:
    return " ".join(map(_hash, inline_handlers()))


def policy(nonce: str, base: str = "", base_url: str = "/") -> str:
    """The policy for one page: `base` (the server's own: frame-ancestors, report-uri) plus what may run there.

    jupyter_server's report-uri is relative, which a page under /formgrader/ would resolve to a missing handler:
    it is made absolute, so a refused script is reported in the server's log.
    """
    base = re.sub(r"report-uri (?!/)(\S+)", lambda m: f"report-uri {base_url.rstrip('/')}/{m.group(1)}", base)
    rules = [
        base,
        f"script-src 'self' 'nonce-{nonce}' 'unsafe-hashes' {_handler_hashes()} {MATHJAX}",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "img-src 'self' data:",
        f"font-src 'self' data: {MATHJAX}",
        f"style-src 'self' 'unsafe-inline' {MATHJAX}",
        "connect-src 'self'",
    ]
    return "; ".join(r for r in rules if r)


def add_nonce(body: bytes, nonce: str) -> bytes:
    """Give a nonce to the page's own `<script>` elements: those before the rendered notebook, or all if there is none.

    The notebook's part of the page holds the submission; a script element there (there should be none after the
    sanitiser) gets no nonce, so the browser refuses it.
    """
    end = body.find(_NOTEBOOK)
    head, tail = (body, b"") if end < 0 else (body[:end], body[end:])
    return _SCRIPT.sub(f'<script nonce="{nonce}"'.encode(), head) + tail


def install() -> None:
    """Patch nbgrader's Formgrader handler base class (idempotent)."""
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    if getattr(BaseHandler, "_attn_csp", False):
        return
    base_policy = BaseHandler.content_security_policy
    original_finish = BaseHandler.finish

    def content_security_policy(self: Any) -> str:
        if not hasattr(self, "_attn_nonce"):
            self._attn_nonce = secrets.token_urlsafe(16)
        return policy(self._attn_nonce, base_policy.fget(self), self.base_url)

    def finish(self: Any, chunk: Any = None) -> Any:
        if chunk is not None:
            self.write(chunk)
        content_type = str(self._headers.get("Content-Type", ""))
        if "html" in content_type and self._write_buffer:
            # The header, and with it the nonce, was set when the handler was made (set_default_headers).
            body = add_nonce(add_report_link(b"".join(self._write_buffer), self.base_url), self._attn_nonce)
            self._write_buffer = [body]
        return original_finish(self)

    BaseHandler.content_security_policy = property(content_security_policy)
    BaseHandler.finish = finish
    BaseHandler._attn_csp = True


# -- off the event loop -------------------------------------------------------------------------------------------
#: Formgrader's buttons that write the course: nbgrader's API handler (formgrader/apihandlers.py) -> the NbGraderAPI
#: method its POST calls with the URL's arguments. Its other handlers read the gradebook or change one row of it (a
#: manual score, a comment, a flag, a due date, a student's name) in milliseconds: they stay on the event loop.
WRITES = {
    "AssignHandler": "generate_assignment",
    "UnReleaseHandler": "unrelease",
    "ReleaseHandler": "release_assignment",
    "CollectHandler": "collect",
    "AutogradeHandler": "autograde",
    "GenerateAllFeedbackHandler": "generate_feedback",
    "ReleaseAllFeedbackHandler": "release_feedback",
    "GenerateFeedbackHandler": "generate_feedback",
    "ReleaseFeedbackHandler": "release_feedback",
}


class Lane:
    """Jobs run, in the order submitted, by at most `workers` threads; `await lane.run(fn, *args)` on the event loop.

    The threads are daemons: stopping the server does not wait for a grading in progress, and drops the jobs still
    waiting (nbgrader writes the gradebook in transactions; pressed again, Formgrader's buttons redo their work).
    """

    def __init__(self, name: str, workers: int) -> None:
        self.name, self.workers = name, workers
        self.pending = 0  # submitted, not finished
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self.pending += 1
            if len(self._threads) < min(self.workers, self.pending):
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
                self._threads.append(thread)
                thread.start()
        self._jobs.put((future, fn, args))
        return future

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.wrap_future(self.submit(fn, *args))

    def _work(self) -> None:
        while True:
            future, fn, args = self._jobs.get()
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        result = fn(*args)
                    except BaseException as exc:  # noqa: BLE001 - handed to the request that waits for it
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
            finally:
                with self._lock:
                    self.pending -= 1


#: Everything that writes the course, one job at a time, in the order pressed: nbgrader's gradebook has one writer, the
#: grading engine (`utils.engine.autograde`) one zygote per process, and nbgrader's commands change the process's
#: working folder while they run.
WRITER = Lane("attn-formgrader-write", 1)
#: Submission pages, rendered beside the writer so that a page never waits behind a class's grading.
RENDERER = Lane("attn-formgrader-render", 2)
_THREAD = threading.local()
#: The server's working folder, where Formgrader reads nbgrader_config.py (the course's root, as `attn lab` and the
#: hub start it): taken when the extension loads.
_SERVER_CWD: list[str] = []


def private_coursedir(shared: Any) -> Any:
    """A copy of Formgrader's CourseDirectory for one job.

    nbgrader's API sets `assignment_id` and `student_id` on the CourseDirectory it holds for as long as a command runs
    (`temp_attrs`); on Formgrader's shared one, the pages answered meanwhile would see them (the assignment list,
    which asks the exchange with them, would call other assignments unreleased while a submission is graded). A
    relative sqlite gradebook (the course's `sqlite:///gradebook.db`) is made absolute under the course's root, where
    nbgrader's converters open it (they chdir there): the working folder is the process's, shared with the handlers
    that run meanwhile, some of which (nbgrader's assignment list) change it for a moment.
    """
    values = {name: getattr(shared, name) for name in shared.trait_names(config=True)}
    url = str(values.get("db_url", ""))
    path = url.removeprefix("sqlite:///")
    if url.startswith("sqlite:///") and path and not path.startswith(("/", ":memory:")) and values.get("root"):
        values["db_url"] = "sqlite:///" + os.path.join(values["root"], path)
    return type(shared)(parent=shared.parent, **values)


def private_api(handler: Any) -> Any:
    """nbgrader's `BaseHandler.api` (the configuration read again, as for every Formgrader request) on a private
    CourseDirectory. Made on the event loop; its commands run in a lane."""
    from nbgrader.apps.api import NbGraderAPI

    level = handler.log.level
    app = handler.coursedir.parent
    app.load_config_file()
    api = NbGraderAPI(private_coursedir(handler.coursedir), handler.authenticator, parent=app)
    api.log_level = level
    return api


def capture_log(app: Any, fmt: str = "[%(levelname)s] %(message)s") -> dict[str, Any]:
    """nbgrader's `utils.capture_log` (runs a command; its log is what Formgrader shows after a button), keeping only
    the records of the thread that runs the command.

    In the server, nbgrader's apps log through the server's own logger (traitlets gives them the running
    Application's), which the requests answered meanwhile on the event loop log through too: their lines would
    otherwise end up in the log of whichever button is running."""
    from tornado.log import LogFormatter

    here = threading.get_ident()
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(LogFormatter(fmt=fmt))
    handler.addFilter(lambda record: record.thread == here)
    app.log.addHandler(handler)
    try:
        app.start()
    except BaseException:  # noqa: BLE001 - as nbgrader's: a failed command (sys.exit included) is a result
        result: dict[str, Any] = {"success": False, "error": traceback.format_exc()}
    else:
        result = {"success": True}
    finally:
        app.log.removeHandler(handler)
    if text := buffer.getvalue():
        result["log"] = text
    return result


def back_to_server_cwd(log: Any) -> None:
    """After a command: the server's working folder back where it was, if the command left it elsewhere.

    nbgrader's converters go to the course's root for as long as they run and then back to the folder they started in;
    a handler that changed folder for a moment meanwhile (nbgrader's assignment list does) could have them take its
    folder for that one."""
    if not _SERVER_CWD:
        return
    try:
        here = os.getcwd()
    except OSError:  # the folder is gone
        here = ""
    if here != _SERVER_CWD[0]:
        log.warning("Formgrader: a command left the server in %r: back to %r", here, _SERVER_CWD[0])
        os.chdir(_SERVER_CWD[0])


def thread_exporter(shared: Any) -> Any:
    """This thread's copy of Formgrader's nbconvert exporter (`settings['nbgrader_exporter']`), with its configuration.

    An HTMLExporter is not for two notebooks at once: each rendering registers filters bound to that notebook on the
    exporter's own Jinja environment."""
    mine = getattr(_THREAD, "exporter", None)
    if mine is None or mine[0] is not shared:
        mine = _THREAD.exporter = (shared, type(shared)(config=shared.config))
    return mine[1]


def _offloaded_post(method: str) -> Callable[..., Any]:
    from nbgrader.server_extensions.formgrader.base import check_notebook_dir, check_xsrf
    from tornado import web

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    async def post(self: Any, *args: str) -> None:
        api = private_api(self)
        what = f"{method} {'/'.join(args)}"
        ahead = WRITER.pending
        if ahead:
            self.log.info("Formgrader: %s waits for %d job(s) pressed before it", what, ahead)
        pressed, started = time.monotonic(), []

        def job() -> Any:
            started.append(time.monotonic())
            try:
                return getattr(api, method)(*args)
            finally:
                back_to_server_cwd(self.log)

        result = await WRITER.run(job)
        waited, ran = started[0] - pressed, time.monotonic() - started[0]
        self.log.info("Formgrader: %s took %.1f s (after %.1f s behind other jobs)", what, ran, waited)
        if waited >= 1 and isinstance(result, dict):
            note = f"[INFO] Formgrader ran this after {waited:.0f} s behind the jobs pressed before it ({ran:.0f} s)\n"
            result["log"] = note + (result.get("log") or "")
        self.write(json.dumps(result))

    post.__name__ = post.__qualname__ = "post"
    return post


def _submission_page() -> Callable[..., Any]:
    """Formgrader's SubmissionHandler.get (nbgrader 0.9's, formgrader/handlers.py) with the rendering in a lane."""
    from nbgrader.api import MissingEntry
    from nbgrader.server_extensions.formgrader.base import check_notebook_dir, check_xsrf
    from tornado import web

    @web.authenticated
    @check_xsrf
    @check_notebook_dir
    async def get(self: Any, submission_id: str) -> Any:
        try:
            submission = self.gradebook.find_submission_notebook_by_id(submission_id)
            assignment_id = submission.assignment.assignment.name
            notebook_id = submission.notebook.name
            student_id = submission.student.id
        except MissingEntry:
            raise web.HTTPError(404, f"Invalid submission: {submission_id}") from None

        # redirect if there isn't a trailing slash in the uri
        if os.path.split(self.request.path)[1] == submission_id:
            url = self.request.path + "/"
            if self.request.query:
                url += "?" + self.request.query
            return self.redirect(url, permanent=True)

        filename = os.path.join(os.path.abspath(self.coursedir.format_path(
            self.coursedir.autograded_directory, student_id, assignment_id)), f"{notebook_id}.ipynb")
        relative_path = os.path.relpath(filename, self.coursedir.root)
        resources = {
            "assignment_id": assignment_id,
            "notebook_id": notebook_id,
            "submission_id": submission.id,
            "base_url": self.base_url,
            "student": student_id,
            "last_name": submission.student.last_name,
            "first_name": submission.student.first_name,
            "notebook_path": self.url_prefix + "/" + relative_path,
        }
        api, exporter, key = private_api(self), self.exporter, submission.id

        def render() -> str | None:
            indices = api.get_notebook_submission_indices(assignment_id, notebook_id)
            resources.update(index=indices.get(key, -2), total=len(indices))
            if not os.path.exists(filename):
                return None
            return thread_exporter(exporter).from_filename(filename, resources=resources)[0]

        html = await RENDERER.run(render)
        if html is None:
            resources["filename"] = filename
            html = self.render("formgrade_404.tpl", resources=resources)
            self.clear()
            self.set_status(404)
        self.write(html)

    return get


# -- the class report: `attn report` as a Formgrader page ---------------------------------------------------------
#: Where Formgrader's sidebar gets its "Class report" entry: after its last own entry.
_SIDEBAR = re.compile(rb'(<a href="[^"]*/formgrader/manage_students">[^<]*</a></li>)')


def add_report_link(body: bytes, base_url: str) -> bytes:
    """Formgrader's page with "Class report" in its sidebar: looked for only before the rendered notebook, if any (a
    submission could hold a look-alike of the sidebar's link)."""
    end = body.find(_NOTEBOOK)
    head, tail = (body, b"") if end < 0 else (body[:end], body[end:])
    entry = f'<li role="presentation"><a href="{base_url}/formgrader/attn-report">Class report</a></li>'.encode()
    return _SIDEBAR.sub(lambda m: m.group(1) + entry, head, count=1) + tail


def report_handler() -> type:
    """The handler of /formgrader/attn-report[/ASSIGNMENT][?lang=zh] (and `.csv`): `utils.report`'s page for the
    course Formgrader serves, rendered in a lane, with links to each assignment's page, the other language and the CSV.
    A Formgrader page: the instructor's login, and the policy above (the report has no script at all)."""
    from nbgrader.server_extensions.formgrader.base import BaseHandler, check_notebook_dir, check_xsrf
    from tornado import web

    class ReportHandler(BaseHandler):
        @web.authenticated
        @check_xsrf
        @check_notebook_dir
        async def get(self: Any, name: str = "") -> None:
            from . import report
            from .notebooks import CourseError

            stem, as_csv = (name or "course").removesuffix(".csv"), (name or "").endswith(".csv")
            assignment = None if stem == "course" else stem
            lang = self.get_argument("lang", "en")
            if lang not in ("en", "zh") or (assignment is not None and assignment not in report.known()):
                raise web.HTTPError(404)
            api = private_api(self)

            def render() -> str:
                datas = report.collect(api, [assignment] if assignment else None)
                if as_csv:
                    return report.render_csv(datas)
                nav = report.page_links(f"{self.base_url}/formgrader", assignment, lang, [d.assignment for d in datas])
                return report.render_html(datas, lang, lab_url=f"{self.base_url}/", nav=nav)

            try:
                body = await RENDERER.run(render)
            except CourseError as exc:
                raise web.HTTPError(404, str(exc)) from None
            if as_csv:
                self.set_header("Content-Type", "text/csv; charset=utf-8")
                self.set_header("Content-Disposition", f'attachment; filename="{stem}.csv"')
            self.write(body)

    return ReportHandler


def _calls(function: Any, text: str) -> bool:
    """Whether nbgrader's handler method still makes the call this module replaces (True where its source is unknown)."""
    try:
        return text in inspect.getsource(inspect.unwrap(function))
    except (OSError, TypeError):
        return True


def install_offload(log: Any = None) -> list[str]:
    """Replace Formgrader's handlers that grade, sanitise, copy or render with ones that run that work in a lane
    (idempotent). Returns the handlers replaced; one whose nbgrader code no longer makes the expected call is left as
    it is, with a warning in `log`."""
    from nbgrader.apps import api
    from nbgrader.server_extensions.formgrader import apihandlers, handlers

    if getattr(handlers.BaseHandler, "_attn_offload", None) is not None:
        return handlers.BaseHandler._attn_offload
    api.capture_log = capture_log  # what NbGraderAPI's commands call (imported by name into its module)
    _SERVER_CWD[:] = [os.getcwd()]
    done = []
    for name, method in WRITES.items():
        cls = getattr(apihandlers, name, None)
        if cls is not None and _calls(cls.post, f"self.api.{method}("):
            cls.post = _offloaded_post(method)
            done.append(name)
        elif log is not None:
            log.warning("Formgrader's %s is not the one utils.formgrader_csp knows: it runs on the event loop", name)
    if _calls(handlers.SubmissionHandler.get, "self.exporter.from_filename("):
        handlers.SubmissionHandler.get = _submission_page()
        done.append("SubmissionHandler")
    elif log is not None:
        log.warning("Formgrader's SubmissionHandler is not the one utils.formgrader_csp knows: pages render on the "
                    "event loop")
    handlers.BaseHandler._attn_offload = done
    return done


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "utils.formgrader_csp"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    try:
        install()
        offloaded = install_offload(serverapp.log)
    except ImportError:  # no nbgrader in this environment: no Formgrader to protect
        return
    from jupyter_server.utils import url_path_join

    rules = serverapp.web_app.default_router.rules
    serverapp.web_app.add_handlers(".*$", [
        (url_path_join(serverapp.base_url, r"/formgrader/attn-report/?([^/]*)"), report_handler())])
    # tornado puts a new group before the server's own, after Formgrader's, whose catch-all (`/formgrader/.*`, its
    # 404 page) would answer first: the report's group goes first.
    rules.insert(0, rules.pop(-2))
    serverapp.log.info("Formgrader pages carry a Content-Security-Policy (utils.formgrader_csp)")
    serverapp.log.info("Formgrader's buttons and submission pages run off the event loop (utils.formgrader_csp): %s",
                       ", ".join(offloaded))
