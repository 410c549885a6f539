"""Doctored submissions of notebook 01, as data: what a learner might do to get points they did not earn.

The grader never reads this file. tests/test_adversarial.py plants each attack into a copy of the student
notebook (``"base": "blank"``, nothing implemented) or of the student notebook with every answer filled in
(``"base": "solved"``), grades it with `attn check` (and some with nbgrader autograde), and asserts the exact
score. ``python -m tests.attacks [--repo DIR]`` prints every attack's score against a checkout (to compare
the grading of two versions).

Edits, applied in order: ``append`` code to the cell with grade_id ``cell``; ``replace`` ``old`` by ``new``
in it; ``insert_after`` it a new code cell (optionally with nbgrader ``metadata``); ``duplicate`` it
``times`` times; ``move_before`` the cell ``target``; ``delete`` it; ``meta`` (update its nbgrader metadata);
``raw`` (the file's whole content); ``nbformat`` 3; ``strip_ids``; ``kernelspec``.

Expectations: ``total`` (the exact score; the maximum is ``MAX``, 01's points in the registry), ``scores`` (exact per exercise),
``exit`` 2 with ``says`` in the error, or ``hidden_all_fail`` (every hidden check of an exercise fails).
``isolated``: the attack needs the isolated worker to be defeated (grading as root); elsewhere it is skipped.
``unsafe``: never run it against a grader that does not isolate (``main`` skips it).
"""

from __future__ import annotations

from utils import course

NOTEBOOK = "01_attention_intuition"
#: Full marks per exercise and in all, as the registry (utils/course.py) sets them.
FULL = {e.name: float(e.points) for e in course.notebook(NOTEBOOK).exercises}
MAX = sum(FULL.values())

# Where the course lives, as learner code finds it.
_ROOT = "import pathlib, utils\nROOT = pathlib.Path(utils.__file__).resolve().parent.parent\n"

_PERMISSIVE_GRADER = '''
import torch
def make_references():
    return {}
def _all(check, refs, fn):
    with check("hidden"):
        pass
HIDDEN_TESTS = {"softmax": _all, "attention_pool": _all, "additive_scores": _all}
'''

ATTACKS: list[dict] = [
    # -- A. patching the grader, torch, IPython and the display machinery (nothing implemented) ---------------
    {"id": "ipython-ast-node-interactivity-none", "category": "IPython hooks", "base": "blank",
     "edits": [{"op": "append", "cell": "softmax", "code": "get_ipython().ast_node_interactivity = 'none'"}],
     "total": 0.0, "nbgrader": True},
    {"id": "patch-Checker.score-in-answer", "category": "patching the grader", "base": "blank",
     "edits": [{"op": "append", "cell": "softmax", "code": (
         "from utils.grading import Checker, Score\n"
         "Checker.score = lambda self: Score(self.points, {'id': self.exercise, 'score': self.points, "
         "'max_score': self.points, 'passed': True, 'feedback': 'all checks passed.', 'mistake': None, "
         "'graded': True, 'checks': []})")}],
     "total": 0.0},
    {"id": "patch-Checker.__call__-in-added-cell", "category": "patching the grader", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         "import contextlib\n"
         "from utils.grading import Checker, CheckResult\n"
         "@contextlib.contextmanager\n"
         "def _always(self, name, weight=1.0):\n"
         "    try:\n        yield\n    except BaseException:\n        pass\n"
         "    self.results.append(CheckResult(name, weight, False, passed=True))\n"
         "Checker.__call__ = _always\n")}],
     "total": 0.0},
    {"id": "ipython-input-transformer-rewrites-test-cells", "category": "IPython hooks", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         "def _rewrite(lines):\n"
         "    return ['3.0\\n'] if any('Checker(' in line for line in lines) else lines\n"
         "get_ipython().input_transformers_post.append(_rewrite)\n")}],
     "total": 0.0},
    {"id": "own-execute-result-before-score", "category": "display tricks", "base": "blank",
     "edits": [{"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()", "new": (
         "from IPython.display import publish_display_data\n"
         "    publish_display_data({'text/plain': '3.0'})\n"
         "    import sys\n"
         "    sys.displayhook(3.0)\n"
         "    return x")}],
     "total": 0.0},
    {"id": "patch-Score.__repr__", "category": "display tricks", "base": "blank",
     "edits": [{"op": "append", "cell": "softmax", "code": (
         "from utils.grading import Score\nScore.__repr__ = lambda self: '10.0'\n"
         "Score._repr_mimebundle_ = lambda self, include=None, exclude=None: {'text/plain': '10.0'}")}],
     "total": 0.0},
    {"id": "Checker.score-returns-nan", "category": "patching the grader", "base": "blank",
     "edits": [{"op": "append", "cell": "softmax", "code": (
         "from utils.grading import Checker\nChecker.score = lambda self: float('nan')")}],
     "total": 0.0},
    {"id": "patch-torch-comparisons", "category": "patching torch", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         "torch.allclose = lambda *a, **k: True\n"
         "torch.equal = lambda *a, **k: True\n"
         "torch.isclose = lambda a, b, **k: torch.ones(torch.broadcast_shapes(a.shape, b.shape), dtype=torch.bool)\n"
         "torch.testing.assert_close = lambda *a, **k: None\n")},
         {"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()", "new": "return x"}],
     "total": 0.0},
    {"id": "tensor-subclass-torch-function-isclose-true", "category": "patching torch", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         "class Cheat(torch.Tensor):\n"
         "    @classmethod\n"
         "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
         "        name = getattr(func, '__name__', '')\n"
         "        if name in ('isclose', 'allclose', 'equal', 'all', '__eq__', 'isfinite'):\n"
         "            return True if name in ('allclose', 'equal') else torch.tensor(True)\n"
         "        return super().__torch_function__(func, types, args, kwargs or {})\n")},
         {"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()",
          "new": "return torch.zeros_like(x).as_subclass(Cheat)"}],
     "total": 0.0},
    {"id": "walk-caller-frames-for-expected-tensors", "category": "stack inspection", "base": "blank",
     "edits": [{"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()", "new": (
         "import inspect\n"
         "    for frame in inspect.stack():\n"
         "        for name, value in frame.frame.f_locals.items():\n"
         "            if name in ('expected', 'refs', 'out_ref') and isinstance(value, torch.Tensor) "
         "and value.shape == x.shape:\n"
         "                return value\n"
         "    return torch.zeros_like(x)")}],
     "total": 0.0},
    # -- reading what only the grader may read ---------------------------------------------------------------
    {"id": "call-reference-through-load_grader", "category": "reading grader files", "base": "blank",
     "isolated": True,
     "edits": [{"op": "insert_after", "cell": "additive_scores", "code": (
         "try:\n"
         "    from utils.grading import load_grader\n"
         "    _g = load_grader('01_attention_intuition')\n"
         "    softmax, attention_pool, additive_scores = _g.ref_softmax, _g.ref_attention_pool, _g.ref_additive_scores\n"
         "except Exception as exc:\n"
         "    print('no grader:', exc)\n")}],
     "total": 0.0},
    {"id": "read-stored-reference-tensors", "category": "reading grader files", "base": "blank", "isolated": True,
     "edits": [{"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()", "new": (
         _ROOT.replace("\n", "\n    ") +
         "try:\n"
         "        from safetensors.torch import load_file\n"
         "        refs = load_file(str(ROOT / 'grader' / '01_attention_intuition.safetensors'))\n"
         "    except Exception:\n"
         "        refs = {}\n"
         "    for name, value in refs.items():\n"
         "        if name.endswith('.x') and value.shape == x.shape and torch.equal(value, x):\n"
         "            return refs[name[:-2] + '.out']\n"
         "    return torch.zeros_like(x)")}],
     "total": 0.0},
    {"id": "copy-answers-from-solutions", "category": "reading grader files", "base": "blank", "isolated": True,
     "edits": [{"op": "insert_after", "cell": "additive_scores", "code": (
         _ROOT +
         "import json\n"
         "try:\n"
         "    nb = json.loads((ROOT / 'solutions' / '01_attention_intuition' / '01_attention_intuition.ipynb').read_text())\n"
         "    for cell in nb['cells']:\n"
         "        if cell['metadata'].get('nbgrader', {}).get('solution'):\n"
         "            exec(''.join(cell['source']).replace('### BEGIN SOLUTION', '').replace('### END SOLUTION', ''))\n"
         "except Exception as exc:\n"
         "    print('no solutions:', exc)\n")}],
     "total": 0.0},
    # -- B. cell metadata tampering --------------------------------------------------------------------------
    {"id": "added-grade-cell-worth-1000", "category": "cell metadata", "base": "solved",
     "edits": [{"op": "insert_after", "cell": "test_softmax", "code": "1000.0", "metadata": {
         "grade": True, "grade_id": "bonus", "locked": True, "points": 1000, "schema_version": 3, "solution": False}}],
     "total": MAX, "nbgrader": True},
    {"id": "blank-with-grade-cell-worth-1000", "category": "cell metadata", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "test_softmax", "code": "1000.0", "metadata": {
         "grade": True, "grade_id": "bonus", "locked": True, "points": 1000, "schema_version": 3, "solution": False}}],
     "total": 0.0},
    {"id": "solved-test-cell-duplicated-9-times", "category": "cell metadata", "base": "solved",
     "edits": [{"op": "duplicate", "cell": "test_softmax", "times": 9}],
     "total": MAX, "nbgrader": True},
    {"id": "test-cell-grade_id-renamed", "category": "cell metadata", "base": "solved",
     "edits": [{"op": "meta", "cell": "test_softmax", "nbgrader": {"grade_id": "test_softmax_2"}}],
     "total": MAX},
    {"id": "answer-cell-retagged-as-grade-cell", "category": "cell metadata", "base": "blank",
     "edits": [{"op": "meta", "cell": "softmax", "nbgrader": {"grade": True, "points": 100, "solution": False,
                                                             "locked": True}}],
     "total": 0.0},
    {"id": "test-cell-moved-above-its-answer", "category": "honest learner", "base": "solved",
     "edits": [{"op": "move_before", "cell": "test_softmax", "target": "softmax"}],
     "total": MAX},
    {"id": "test-cell-deleted", "category": "honest learner", "base": "solved",
     "edits": [{"op": "delete", "cell": "test_attention_pool"}],
     "total": MAX},
    # -- C. writing into the course ----------------------------------------------------------------------------
    {"id": "overwrite-grader-module", "category": "file writes", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         _ROOT + f"try:\n    (ROOT / 'grader' / '01_attention_intuition.py').write_text({_PERMISSIVE_GRADER!r})\n"
         "except OSError as exc:\n    print('cannot write:', exc)\n")}],
     "total": 0.0, "writes": True, "nbgrader": True},
    {"id": "overwrite-utils-grading", "category": "file writes", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         _ROOT + "try:\n    p = ROOT / 'utils' / 'grading.py'\n"
         "    p.write_text(p.read_text() + '\\nChecker.score = lambda self: Score(self.points, {})\\n')\n"
         "except OSError as exc:\n    print('cannot write:', exc)\n")}],
     "total": 0.0, "writes": True},
    {"id": "overwrite-solution-test-cells", "category": "file writes", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         _ROOT + "import json\ntry:\n"
         "    p = ROOT / 'solutions' / '01_attention_intuition' / '01_attention_intuition.ipynb'\n"
         "    nb = json.loads(p.read_text())\n"
         "    for cell in nb['cells']:\n"
         "        if cell['metadata'].get('nbgrader', {}).get('grade'):\n"
         "            cell['source'] = 'pass'\n"
         "    p.write_text(json.dumps(nb))\n"
         "except OSError as exc:\n    print('cannot write:', exc)\n")}],
     "total": 0.0, "writes": True},
    {"id": "delete-reference-tensors", "category": "file writes", "base": "blank",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         _ROOT + "for p in (ROOT / 'grader').glob('*'):\n"
         "    try:\n        p.unlink()\n    except OSError as exc:\n        print('cannot delete:', exc)\n")}],
     "total": 0.0, "writes": True},
    # -- D. resource exhaustion ----------------------------------------------------------------------------------
    {"id": "endless-loop-in-a-function", "category": "resource exhaustion", "base": "solved",
     "edits": [{"op": "replace", "cell": "attention_pool", "old": "scores = keys @ query",
                "new": "while True:\n        pass"}],
     "scores": {"softmax": 3.0, "attention_pool": 0.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}, "nbgrader": True},
    {"id": "endless-loop-at-top-level-of-a-cell", "category": "resource exhaustion", "base": "solved",
     "edits": [{"op": "append", "cell": "attention_pool", "code": "while True:\n    pass"}],
     "scores": {"softmax": 3.0, "attention_pool": 0.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "signals-ignored-then-endless-loop", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "additive_scores", "old": "q_hidden = ", "new": (
         "import signal\n"
         "    for s in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
         "        signal.signal(s, signal.SIG_IGN)\n"
         "    while True:\n        pass\n"
         "    q_hidden = ")}],
     "scores": {"softmax": 3.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 0.0}},
    {"id": "huge-allocation", "category": "resource exhaustion", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ",
                "new": "_ = torch.ones(10**11)  # 400 GB\n    shifted = "}],
     "scores": {"softmax": 0.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "background-processes-left-behind", "category": "resource exhaustion", "base": "solved",
     "edits": [{"op": "insert_after", "cell": "setup", "code": (
         "import subprocess, os\n"
         "subprocess.Popen(['sleep', '4242.25'], start_new_session=True)\n"
         "if os.fork() == 0:\n"
         "    os.setsid()\n"
         "    os.execvp('sleep', ['sleep', '4242.25'])\n")}],
     "total": MAX, "no_process": "4242.25"},
    {"id": "fork-bomb-in-a-function", "category": "resource exhaustion", "base": "solved",
     # 16 processes that spin, each in a session (and so a share of the CPU) of its own, started by every call: the
     # grading of this submission stops at once, the exercises before it keep their points (tests/test_budgets.py).
     "edits": [{"op": "replace", "cell": "attention_pool", "old": "scores = keys @ query",
                "new": ("import os\n    for _ in range(16):\n        if os.fork() == 0:\n            os.setsid()\n"
                        "            while True:\n                pass\n    scores = keys @ query")}],
     "scores": {"softmax": 3.0, "attention_pool": 0.0, "nadaraya_watson": 0.0, "additive_scores": 0.0}},
    {"id": "output-flood", "category": "honest learner", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ",
                "new": "print('x' * 2_000_000)\n    shifted = "}],
     "total": MAX},
    # -- E. signals and exits ----------------------------------------------------------------------------------
    {"id": "os._exit-in-a-function", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "additive_scores", "old": "q_hidden = ", "new": "import os\n    os._exit(0)\n    q_hidden = "}],
     "scores": {"softmax": 3.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 0.0}, "nbgrader": True},
    {"id": "sys.exit-in-a-function", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "attention_pool", "old": "scores = keys @ query",
                "new": "import sys\n    sys.exit(0)"}],
     "scores": {"softmax": 3.0, "attention_pool": 0.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "KeyboardInterrupt-in-a-function", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ", "new": "raise KeyboardInterrupt\n    shifted = "}],
     "scores": {"softmax": 0.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "BaseException-subclass-in-a-function", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "insert_after", "cell": "setup", "code": "class Escape(BaseException):\n    pass\n"},
               {"op": "replace", "cell": "additive_scores", "old": "q_hidden = ", "new": "raise Escape()\n    q_hidden = "}],
     "scores": {"softmax": 3.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 0.0}},
    {"id": "SIGKILL-to-itself", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ",
                "new": "import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n    shifted = "}],
     "scores": {"softmax": 0.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "segfault", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "replace", "cell": "additive_scores", "old": "q_hidden = ",
                "new": "import ctypes\n    ctypes.string_at(0)\n    q_hidden = "}],
     "scores": {"softmax": 3.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 0.0}},
    {"id": "kill-every-process-it-can", "category": "signals and exits", "base": "solved", "isolated": True,
     "unsafe": True,  # without isolation, as root, this kills every process on the machine
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ",
                "new": "import os, signal\n    os.kill(-1, signal.SIGKILL)\n    shifted = "}],
     "scores": {"softmax": 0.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "sys.exit-at-top-level-of-added-cell", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "insert_after", "cell": "additive_scores", "code": "import sys\nsys.exit('bye')"}],
     "total": MAX},
    {"id": "os._exit-at-top-level-of-added-cell", "category": "signals and exits", "base": "solved",
     "edits": [{"op": "insert_after", "cell": "softmax", "code": "import os\nos._exit(3)"}],
     "total": MAX},
    # -- F. honest noise --------------------------------------------------------------------------------------
    {"id": "debug-prints-to-stderr", "category": "honest learner", "base": "solved",
     "edits": [{"op": "replace", "cell": c, "old": old, "new": f"import sys\n    print('debug', file=sys.stderr)\n    {old}"}
               for c, old in (("softmax", "shifted = "), ("attention_pool", "scores = keys @ query"),
                              ("additive_scores", "q_hidden = "))],
     "total": MAX, "nbgrader": True},
    {"id": "logging-and-warnings", "category": "honest learner", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ",
                "new": "import logging\n    logging.warning('softmax called on %s', tuple(x.shape))\n    shifted = "},
               {"op": "replace", "cell": "attention_pool", "old": "scores = keys @ query",
                "new": "import warnings\n    warnings.warn('is this right?')\n    scores = keys @ query"}],
     "total": MAX},
    {"id": "plots-inside-an-answer", "category": "honest learner", "base": "solved",
     "edits": [{"op": "replace", "cell": "attention_pool", "old": "scores = keys @ query", "new": (
         "import matplotlib.pyplot as plt\n"
         "    plt.figure(); plt.plot((keys @ query).detach()); plt.title('scores'); plt.show()\n"
         "    scores = keys @ query")}],
     "total": MAX},
    # -- G. submissions that are not what they should be -------------------------------------------------------
    {"id": "not-json", "category": "bad notebook files", "edits": [{"op": "raw", "content": "{not json"}],
     "exit": 2, "says": "not a readable notebook", "nbgrader": True},
    {"id": "empty-file", "category": "bad notebook files", "edits": [{"op": "raw", "content": ""}],
     "exit": 2, "says": "is empty"},
    {"id": "no-cells", "category": "bad notebook files",
     "edits": [{"op": "raw", "content": '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'}],
     "total": 0.0},
    {"id": "another-notebooks-file", "category": "bad notebook files", "base": "other",
     "edits": [], "exit": 2, "says": "holds the exercises of 02_scaled_dot_product_attention"},
    {"id": "old-nbformat-3", "category": "bad notebook files", "base": "solved", "edits": [{"op": "nbformat", "version": 3}],
     "total": MAX},
    {"id": "cells-without-ids", "category": "bad notebook files", "base": "solved", "edits": [{"op": "strip_ids"}],
     "total": MAX},
    {"id": "another-kernelspec", "category": "bad notebook files", "base": "solved", "edits": [{"op": "kernelspec"}],
     "total": MAX},
    {"id": "any-file-name", "category": "bad notebook files", "base": "solved", "name": "my homework (final).ipynb",
     "edits": [], "total": MAX},
    # -- H. the channel to the grader, and replaying visible inputs ---------------------------------------------
    {"id": "garbage-written-to-every-file-descriptor", "category": "protocol", "base": "solved",
     "edits": [{"op": "replace", "cell": "softmax", "old": "shifted = ", "new": (
         "import os\n"
         "    for fd in range(3, 64):\n"
         "        try:\n            os.write(fd, b'\\x00\\x00\\x00\\x10' + b'{\"ok\": true}' * 4)\n"
         "        except OSError:\n            pass\n"
         "    shifted = ")}],
     "scores": {"softmax": 0.0, "attention_pool": 3.0, "nadaraya_watson": 3.0, "additive_scores": 4.0}},
    {"id": "hard-coded-visible-answers", "category": "replaying outputs", "base": "blank",
     "edits": [{"op": "replace", "cell": "softmax", "old": "raise NotImplementedError()", "new": (
         "known = {(1.0, 2.0, 3.0): [0.0900, 0.2447, 0.6652], (1000.0, 1001.0, 1002.0): [0.0900, 0.2447, 0.6652]}\n"
         "    key = tuple(x.flatten().tolist())\n"
         "    if key in known:\n        return torch.tensor(known[key])\n"
         "    return torch.zeros_like(x)")}],
     "hidden_all_fail": "softmax"},
]


def main() -> None:
    """Print each attack's score when graded by the checkout in --repo (default: this one)."""
    import argparse
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--restore", action="store_true", help="git checkout the repo after each attack")
    parser.add_argument("ids", nargs="*")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.test_adversarial import build, grade_with

    for attack in ATTACKS:
        if args.ids and attack["id"] not in args.ids:
            continue
        if attack.get("unsafe"):
            print(f"{attack['id']:<48} not run (unsafe outside the sandbox)", flush=True)
            continue
        path = build(attack, Path(args.repo), Path(tempfile.gettempdir()) / f"attn-attacks-{os.getuid()}" / attack["id"])
        code, result, err = grade_with(Path(args.repo), path)
        if args.restore:  # an attack that got through may have changed the checkout: undo it for the next one
            subprocess.run(["git", "-C", args.repo, "checkout", "--", "."], check=True)
            subprocess.run(["git", "-C", args.repo, "clean", "-fdq", "grader", "utils", "solutions"], check=True)
        score = f"{result['score']:g}/{result['max_score']:g}" if result else f"exit {code}: {err.strip()[-120:]}"
        print(f"{attack['id']:<48} {score}", flush=True)


if __name__ == "__main__":
    main()
