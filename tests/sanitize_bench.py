"""The sanitiser and the views against issue 32's inputs, before and after: `.venv/bin/python -m tests.sanitize_bench`.

Before: the markdown audit as it was (nbconvert's renderer, then the standard library's html.parser walking the
HTML), on an unterminated comment followed by `<a` repeated (CVE-2025-6069, quadratic in Python before 3.11.13),
measured at 15 and 30 KB (audited after, under the cap) and, for 64 KB (measured up to a time limit) and 1 MB
(extrapolated from the quadratic), where the cell is over the cap after and shown as text unrendered.
After: `sanitize_notebook` on a notebook holding that cell. Then the 9 MB answer of `1+1+...` rendered to its
feedback page and Formgrader's page, in a separate process (its peak memory is that process's).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import subprocess
import sys
import time
from html.parser import HTMLParser

import nbformat

from utils import notebooks as nbs
from utils.sanitize import course_markdown, render_markdown, sanitize_notebook

NB = "01_attention_intuition"


class _OldAudit(HTMLParser):
    """utils.sanitize._Audit as it was before issue 32 (what it checked does not matter here: the parse does)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags += 1


def cve(size: int) -> str:
    return "<!--" + "<a" * ((size - 4) // 2)


def old_audit(text: str) -> float:
    start = time.monotonic()
    audit = _OldAudit()
    audit.feed(render_markdown(text))
    audit.close()
    return time.monotonic() - start


def _old_audit_in(queue: multiprocessing.Queue, size: int) -> None:
    queue.put(old_audit(cve(size)))


def old_audit_limited(size: int, limit: float) -> float | None:
    """The old audit's time on a cell of `size`, or None when it ran past `limit` seconds (then stopped)."""
    queue: multiprocessing.Queue = multiprocessing.Queue()
    proc = multiprocessing.Process(target=_old_audit_in, args=(queue, size))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None
    return queue.get()


def new_sanitize(size: int) -> tuple[float, list[str]]:
    nb = nbs.read(nbs.release_path(NB))
    nb.cells.append(nbformat.v4.new_markdown_cell(cve(size)))
    start = time.monotonic()
    notes = sanitize_notebook(nb, course_markdown(NB))  # as autograde runs it: the course's markdown is trusted
    return time.monotonic() - start, notes


_STOCK = """
import resource, time, nbformat
from nbconvert import HTMLExporter
from utils import notebooks as nbs
nb = nbs.read(nbs.release_path("01_attention_intuition"))
answer = next(c for c in nb.cells if nbs.is_answer_cell(c))
answer.source = "x = " + "1+" * {n} + "1\\n" + answer.source
start = time.monotonic()
html = HTMLExporter(template_name="lab").from_notebook_node(nb)[0]
print(time.monotonic() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, len(html))
"""


def stock_render(chars: int) -> tuple[float, int, int]:
    """nbconvert as it comes (no course configuration) on an answer of `chars` characters of `1+1+...`."""
    proc = subprocess.run([sys.executable, "-c", _STOCK.format(n=chars // 2)], capture_output=True, text=True,
                          cwd=nbs.ROOT, timeout=600)
    seconds, peak, size = proc.stdout.split()
    return float(seconds), int(peak), int(size)


def render_nine_mb() -> dict:
    proc = subprocess.run([sys.executable, "-c", "import json, tests.test_sanitize_bounds as t; "
                           "print(json.dumps(t.render_nine_mb_feedback()))"],
                          capture_output=True, text=True, cwd=nbs.ROOT, timeout=600)
    if proc.returncode:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=float, default=60, help="seconds the old audit may run on one cell")
    args = parser.parse_args()
    print(f"Python {platform.python_version()}; html.parser is quadratic here unless it is 3.11.13+ / 3.12.11+ / "
          "3.13.4+")
    print("CVE-2025-6069 cell: '<!--' then '<a' repeated")
    measured = {size: old_audit(cve(size)) for size in (15_000, 30_000)}  # audited after, under the cap
    for size, took in measured.items():
        after, _ = new_sanitize(size)
        print(f"  {size / 1024:>5.1f} KB  before (html.parser audit) {took:8.2f} s   after (sanitize_notebook) "
              f"{after:6.3f} s")
    rate = measured[30_000] / 30_000 ** 2  # quadratic: seconds per character squared
    for size in (65_536, 1_048_576):
        took = old_audit_limited(size, args.limit) if size <= 65_536 else None
        before = (f"{took:8.2f} s" if took is not None
                  else f"~{rate * size ** 2:,.0f} s (extrapolated; not run)" if size > 65_536
                  else f"> {args.limit:.0f} s (stopped)")
        after, notes = new_sanitize(size)
        print(f"  {size // 1024:>5} KB  before (html.parser audit) {before}   after (sanitize_notebook) {after:6.3f} s")
        print(f"           log: {notes[-1]}")
    seconds, peak, size = stock_render(100_000)
    print(f"Before, nbconvert as it comes on an answer of 100 KB of `1+1+...` (a ninetieth of issue 32's): {seconds:.1f} s, "
          f"peak memory {peak} MB, a page of {size:,} bytes")
    print("The 9 MB answer of `1+1+...+1` (issue 32: killed at 8 GB after 504 s before), rendered in a fresh process:")
    result = render_nine_mb()
    print(f"  feedback and Formgrader pages together {result['seconds']:.2f} s, peak memory {result['peak_mb']} MB "
          f"(the process, Python and nbconvert included); pages {result['feedback_bytes']:,} and "
          f"{result['formgrader_bytes']:,} bytes; cut with a note: {result['noted']}; the graded notebook keeps the "
          f"whole answer: {result['graded_whole']}")


if __name__ == "__main__":
    main()
