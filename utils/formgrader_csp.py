"""A Content-Security-Policy on Formgrader's pages: markup that got past the sanitiser still cannot run script there.

Formgrader serves each submission from the instructor's own Jupyter server, where a script could use the instructor's
session (the contents API writes files, kernels run code). `utils.sanitize` removes script from what is graded;
this server extension is the second wall. Every Formgrader page gets a policy without 'unsafe-inline': its own
`<script>` elements carry a fresh nonce, the inline click handlers of its templates are allowed by hash, and nothing
else runs: no inline handler (`onerror=`), no `javascript:` URL, no script from the notebook's part of the page, no
plugin. The server's own `frame-ancestors` rule is kept (on a hub it stops other users' pages from framing
Formgrader).

Enabled by jupyter-config/jupyter_server_config.d/attn-formgrader-csp.json: `attn lab` puts that folder on
JUPYTER_CONFIG_PATH, and deploy/jupyterhub/setup.sh installs the file into the hub's Jupyter configuration.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
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
            body = add_nonce(b"".join(self._write_buffer), self._attn_nonce)
            self._write_buffer = [body]
        return original_finish(self)

    BaseHandler.content_security_policy = property(content_security_policy)
    BaseHandler.finish = finish
    BaseHandler._attn_csp = True


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "utils.formgrader_csp"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    try:
        install()
    except ImportError:  # no nbgrader in this environment: no Formgrader to protect
        return
    serverapp.log.info("Formgrader pages carry a Content-Security-Policy (utils.formgrader_csp)")
