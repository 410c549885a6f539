"""The example commands of README.md and of the pages it leads to (GUIDES: docs/install.md, learners.md, …; the
site shows the same pages), run as a reader would type them. "README" below means all of them.

Every command line in a ```bash block of these files, and the inline commands listed in INLINE, is either run by a
test here (RUN: command -> the test that runs it) or listed in NOT_RUN with the reason; a command added to the
README without either fails `test_every_readme_command_is_run_or_excused`. Commands run verbatim, from the course
folder, except where a note says what is added and why (training is cut short with ATTN_TRAIN_STEPS, and the
translator uses the finished solution notebook and a temporary checkpoint instead of the reader's).
docs/COURSE.md's table of exercise names and points is compared with solutions/ too.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from utils import course
from utils import notebooks as nbs
from utils.translator.corpus import make_corpus, write_pairs

from .conftest import free_port

ROOT = nbs.ROOT
#: README.md and the pages it sends its readers to, whose commands a reader types as README's own.
GUIDES = ("README.md", "docs/install.md", "docs/learners.md", "docs/instructors.md", "docs/submissions.md",
          "docs/commands.md", "docs/maintainers.md")
README = "\n".join((ROOT / name).read_text(encoding="utf-8") for name in GUIDES)
SOLUTION_08 = ROOT / "solutions" / "08_transformer_translator"
STEPS = 20  # ATTN_TRAIN_STEPS for README's training commands: seconds, not minutes


def bash_block_commands(text: str) -> list[str]:
    """Each command line of the ```bash blocks, without its trailing comment."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            found.append(re.sub(r"\s+#\s.*$", "", line).strip())
    return found


#: Commands README gives inside a sentence (not in a bash block) that a reader would type.
INLINE = [
    ".venv/bin/attn lab --no-browser --port 8889",
    ".venv/bin/attn lab --lang zh",
    ".venv/bin/attn release --lang zh --solutions",
    ".venv/bin/attn autograde 01_attention_intuition --jobs 2",
    "make release",
    "make bench",
    "ATTN_TRAIN_STEPS=20 .venv/bin/attn train",
    "apt-get install fonts-noto-cjk fonts-noto-color-emoji",
]

RUN = {
    "make lab": "test_make_lab_serves_the_course",
    ".venv/bin/attn lab --no-browser --port 8889": "test_attn_lab_with_options_serves_the_course",
    ".venv/bin/attn check notebooks/01_attention_intuition": "test_check_grades_a_blank_copy",
    ".venv/bin/attn progress": "tests/test_progress.py::test_the_documented_command_reports_the_learners_copies",
    "make install": "test_make_install_is_a_no_op_when_installed",
    '.venv/bin/attn translate "yesterday the small dog saw the woman"': "test_translate_greedy",
    '.venv/bin/attn translate --beam 4 --attention cross.png "yesterday the woman has written a letter"':
        "test_translate_beam_with_heatmap",
    ".venv/bin/attn translate --vocabulary": "test_translate_lists_its_vocabulary",
    ".venv/bin/attn train --steps 6000 --force": "trained (fixture), with ATTN_TRAIN_STEPS",
    ".venv/bin/attn train --data my_pairs.tsv": "test_train_on_your_own_pairs",
    "ATTN_TRAIN_STEPS=20 .venv/bin/attn train": "test_quick_training_as_documented",
    ".venv/bin/python -m utils.bootstrap": "test_bootstrap_keeps_an_installed_pytorch_and_says_what_it_downloaded",
    ".venv/bin/attn lab --lang zh": "test_attn_lab_in_chinese_serves_the_chinese_copies_with_chinese_menus",
    ".venv/bin/attn release --lang zh --solutions": "test_release_writes_the_chinese_solutions_for_nbgrader",
    # in a course folder with a synthetic class of 02 and a few students of 01 (tests/synthetic_class.py)
    ".venv/bin/attn report 02_scaled_dot_product_attention":
        "tests/test_report.py::test_the_report_counts_every_planted_mistake_exactly",
    ".venv/bin/attn report": "tests/test_report.py::test_the_whole_course_in_one_report",
    ".venv/bin/attn report 02_scaled_dot_product_attention --lang zh":
        "tests/test_report.py::test_the_report_in_chinese_names_the_mistakes_and_links_their_sections",
    # verbatim, in a course folder with a gradebook made by nbgrader's API (and first without one)
    **{command: "tests/test_export.py::test_the_documented_export_commands_run_in_a_course_folder" for command in (
        ".venv/bin/attn export --format canvas", ".venv/bin/attn export --format moodle",
        ".venv/bin/attn export --format csv --out -")},
}

_NBGRADER = ("writes release/, exchange/, submitted/, autograded/, feedback/ and gradebook.db into the course "
             "folder; tests/test_nbgrader_flow.py runs generate_assignment, release_assignment, fetch, submit, "
             "collect, autograde and generate_feedback on a copy, tests/test_hub.py release_feedback through a hub")
NOT_RUN = {
    "make test": "the whole suite, this file included (README gives its measured time)",
    "python -m venv .venv": "makes .venv, which the tests run in (make install does the same)",
    ".venv/bin/attn lab": "the route without make's `make lab`; `make lab` and `attn lab` with options are run here",
    ".venv/bin/attn autograde 01_attention_intuition --jobs 2": "writes the gradebook of the course folder; "
        "tests/test_nbgrader_flow.py runs `attn autograde 01_attention_intuition --jobs 2` in a copy",
    "conda env create -f environment.yml": "no conda here, and it downloads; tests/test_environment.py checks "
                                           "environment.yml against pyproject.toml",
    "conda activate attention-course": "needs the conda environment above",
    "attn lab": "the conda route's `make lab`; `make lab` and `attn lab` with options are run here",
    "make release": "rewrites notebooks/ (backing up changed copies); tests/test_release.py and test_cli.py's "
                    "`attn release --check` cover it",
    "make bench": "measures every notebook's budget: minutes",
    "apt-get install fonts-noto-cjk fonts-noto-color-emoji": "needs root and the network",
    ".venv/bin/nbgrader generate_assignment 01_attention_intuition": _NBGRADER,
    ".venv/bin/nbgrader release_assignment 01_attention_intuition": _NBGRADER,
    ".venv/bin/nbgrader collect 01_attention_intuition": _NBGRADER,
    ".venv/bin/nbgrader autograde 01_attention_intuition --create": _NBGRADER,
    ".venv/bin/nbgrader generate_feedback 01_attention_intuition": _NBGRADER,
    ".venv/bin/nbgrader release_feedback 01_attention_intuition": _NBGRADER,
    ".venv/bin/nbgrader export": _NBGRADER + " (`nbgrader export` itself is run by no test)",
    "sudo useradd --create-home mrs-ng; sudo useradd --create-home alice; ...":
        "creates Unix users as root; tests/test_hub.py makes its own",
    "sudo deploy/jupyterhub/setup.sh --python /usr/bin/python3 mrs-ng alice bob carol":
        "root, system-wide; tests/test_hub.py runs setup.sh (with this environment) and a real hub",
    "sudo /opt/attn-env/bin/jupyterhub -f deploy/jupyterhub/jupyterhub_config.py": "as above: tests/test_hub.py",
}


def test_every_readme_command_is_run_or_excused():
    in_blocks = bash_block_commands(README)
    assert in_blocks, "no ```bash block found in README.md"
    flat = " ".join(README.split())  # an inline command may wrap onto the next line
    for command in INLINE:
        assert f"`{command}" in flat, f"INLINE lists {command!r}, which README no longer gives"
    given = set(in_blocks) | set(INLINE)
    unaccounted = sorted(given - set(RUN) - set(NOT_RUN))
    assert not unaccounted, f"README commands neither run nor excused here: {unaccounted}"
    stale = sorted((set(RUN) | set(NOT_RUN)) - given)
    assert not stale, f"listed here but no longer in README: {stale}"
    assert not set(RUN) & set(NOT_RUN)


# -- running a command line ------------------------------------------------------------------------------------

def run(command: str, cwd: Path = ROOT, env: dict[str, str] | None = None, extra: tuple[str, ...] = (),
        timeout: int = 300) -> subprocess.CompletedProcess:
    """Run one README command line: `VAR=value` prefixes go to the environment; `.venv/bin/attn` is this
    interpreter's `utils.cli` (the same program, wherever the test runs from); `extra` options are appended."""
    words = shlex.split(command)
    env = {**os.environ, **(env or {})}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] == ".venv/bin/attn":
        words = [sys.executable, "-m", "utils.cli", *words[1:]]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([*words, *extra], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def one_clean_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout
    return lines[0]


# -- the translator -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """README's `attn train --steps 6000 --force`, cut to STEPS steps by ATTN_TRAIN_STEPS, with the finished solution
    notebook (a reader's own copy starts blank) and a temporary checkpoint (the reader's is in checkpoints/)."""
    path = tmp_path_factory.mktemp("translator") / "translator.safetensors"
    proc = run(".venv/bin/attn train --steps 6000 --force", env={"ATTN_TRAIN_STEPS": str(STEPS)},
               extra=("--notebook", str(SOLUTION_08), "--checkpoint", str(path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert f"ATTN_TRAIN_STEPS={STEPS}: training {STEPS} steps only" in out
    assert re.search(r"^data: the course's corpus \(40,000 pairs, seed 0\); 39,700 to train on, 300 held out", out,
                     re.M)
    assert re.search(rf"^step {STEPS}\s+seconds [\d.]+\s+loss [\d.]+\s+bleu [\d.]+", out, re.M), out
    assert f"trained to step {STEPS} (" in out and path.is_file()
    return path


def _translate_options(checkpoint: Path) -> tuple[str, ...]:
    return ("--notebook", str(SOLUTION_08), "--checkpoint", str(checkpoint))


def _target_words(checkpoint: Path) -> set[str]:
    from utils.translator import read_checkpoint

    return set(read_checkpoint(checkpoint)[1]["tgt_vocab"])


def test_translate_greedy(trained):
    command = '.venv/bin/attn translate "yesterday the small dog saw the woman"'
    line = one_clean_line(run(command, extra=_translate_options(trained)))
    # An untrained model's words, but words of the target language (and every source word was known: exit 0).
    assert line and set(line.split()) <= _target_words(trained), line


def test_translate_beam_with_heatmap(trained, tmp_path):
    command = '.venv/bin/attn translate --beam 4 --attention cross.png "yesterday the woman has written a letter"'
    proc = run(command, cwd=tmp_path, extra=_translate_options(trained))
    line = one_clean_line(proc)
    assert set(line.split()) <= _target_words(trained), line
    assert (tmp_path / "cross.png").read_bytes()[:4] == b"\x89PNG"
    assert "cross-attention heatmap: cross.png" in proc.stderr


def test_translate_lists_its_vocabulary(trained):
    proc = run(".venv/bin/attn translate --vocabulary", extra=("--checkpoint", str(trained)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("180 words:"), proc.stdout[:200]  # README: "the 180 English words"
    verbs = next(line for line in proc.stdout.splitlines() if line.strip().startswith("verbs:"))
    assert {"saw", "written", "writes"} <= set(verbs.split()) and "reads" not in verbs


def test_readme_sentences_use_only_known_words(trained):
    """Every sentence README gives `attn translate` is in the model's vocabulary; a word outside it gets one line."""
    from utils.translator import read_checkpoint
    from utils.translator.corpus import tokenize

    known = set(read_checkpoint(trained)[1]["src_vocab"])
    sentences = re.findall(r'attn translate [^"\n]*"([^"]+)"', README)
    assert len(sentences) >= 2
    for sentence in sentences:
        assert set(tokenize(sentence)) <= known, sentence
    proc = run('.venv/bin/attn translate "the woman reads the book"', extra=_translate_options(trained))
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "never seen 'reads' (try '" in proc.stderr, proc.stderr


def test_train_on_your_own_pairs(tmp_path):
    """README's `attn train --data my_pairs.tsv`, in a folder holding such a file, cut short by ATTN_TRAIN_STEPS."""
    write_pairs(tmp_path / "my_pairs.tsv", make_corpus(200, seed=1, max_words=8))
    proc = run(".venv/bin/attn train --data my_pairs.tsv", cwd=tmp_path, env={"ATTN_TRAIN_STEPS": "4"},
               extra=("--notebook", str(SOLUTION_08), "--checkpoint", str(tmp_path / "own.safetensors")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^data: my_pairs\.tsv \(200 pairs\); 180 to train on, 20 held out; vocabulary \d+ / \d+; "
                     r"unknown held-out words [\d.]+% / [\d.]+%$", proc.stdout, re.M), proc.stdout
    assert "trained to step 4 (" in proc.stdout and (tmp_path / "own.safetensors").is_file()


def test_quick_training_as_documented(tmp_path):
    """`ATTN_TRAIN_STEPS=20 .venv/bin/attn train` trains 20 steps; on a reader's blank notebook it says what to
    finish first, in one line, before any training."""
    command = "ATTN_TRAIN_STEPS=20 .venv/bin/attn train"
    blank = run(command, extra=("--notebook", "08_transformer_translator", "--checkpoint", str(tmp_path / "x")))
    assert blank.returncode == 2 and "Traceback" not in blank.stderr
    assert "not implemented yet: finish that exercise of notebook 08 first" in blank.stderr, blank.stderr
    proc = run(command, extra=("--eval-every", "10", "--notebook", str(SOLUTION_08),
                               "--checkpoint", str(tmp_path / "q.safetensors")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [int(m) for m in re.findall(r"^step (\d+) ", proc.stdout, re.M)]
    assert steps == [10, 20], proc.stdout


# -- the other commands -----------------------------------------------------------------------------------------

def test_check_grades_a_blank_copy():
    proc = run(".venv/bin/attn check notebooks/01_attention_intuition")
    assert proc.returncode == 0, proc.stderr[-3000:]
    total = course.points(course.notebook("01_attention_intuition").points)  # the registry's, as README's table
    assert proc.stdout.splitlines()[0] == f"notebooks/01_attention_intuition: 0 / {total} points"
    assert "not implemented yet" in proc.stdout


def test_make_install_is_a_no_op_when_installed():
    if subprocess.run(["make", "-q", "install"], cwd=ROOT).returncode != 0:
        pytest.skip("the environment is older than pyproject.toml: `make install` would download packages")
    proc = run("make install")
    assert proc.returncode == 0, proc.stderr
    assert "pip install" not in proc.stdout, proc.stdout


def _serve(command: list[str], tmp_path: Path, env: dict[str, str]) -> str:
    """Start a JupyterLab command, find its URL in the log, list notebooks/ through it, then stop it."""
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1", "BROWSER": "true", **env}
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline, listing = time.time() + 90, None
        while time.time() < deadline and listing is None:
            assert server.poll() is None, log.read_text()[-3000:]
            found = re.search(r"(http://(?:127\.0\.0\.1|localhost):\d+)/lab\S*\?token=(\w+)", log.read_text())
            if found:
                base, token = found.groups()
                try:
                    with urllib.request.urlopen(f"{base}/api/contents/notebooks?token={token}", timeout=5) as r:
                        listing = r.read().decode()
                except OSError:
                    pass
            time.sleep(0.5)
        assert listing is not None, "JupyterLab did not answer within 90 s: " + log.read_text()[-3000:]
        assert all(a in listing for a in nbs.assignments())
        return base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_make_lab_serves_the_course(tmp_path):
    """`make lab` verbatim (BROWSER=true: the browser it opens is a no-op here): it serves notebooks/. Where the
    environment is older than pyproject.toml, `make lab` would first reinstall it (a download): then the same
    recipe runs with the install step marked done (`make -o .venv/.installed lab`)."""
    up_to_date = subprocess.run(["make", "-q", "install"], cwd=ROOT).returncode == 0
    _serve(["make", "lab"] if up_to_date else ["make", "-o", ".venv/.installed", "lab"], tmp_path, {})


def test_attn_lab_with_options_serves_the_course(tmp_path):
    """README's `.venv/bin/attn lab --no-browser --port 8889` (another free port if 8889 is taken)."""
    import socket

    with socket.socket() as s:
        port = 8889 if s.connect_ex(("127.0.0.1", 8889)) != 0 else free_port()
    base = _serve([sys.executable, "-m", "utils.cli", "lab", "--no-browser", "--port", str(port)], tmp_path,
                  {"PYTHONPATH": str(ROOT)})
    assert base.endswith(f":{port}")


def test_attn_lab_in_chinese_serves_the_chinese_copies_with_chinese_menus(tmp_path):
    """README's `.venv/bin/attn lab --lang zh`: notebooks/zh/ served, JupyterLab's language set to zh_CN."""
    import json

    from utils import release

    port = free_port()
    env = {"PYTHONPATH": str(ROOT)}
    home = {**os.environ, "HOME": str(tmp_path), "JUPYTER_PLATFORM_DIRS": "1", "BROWSER": "true", **env}
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "utils.cli", "lab", "--lang", "zh", "--no-browser", "--port",
                                   str(port)], cwd=ROOT, env=home, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline, settings = time.time() + 90, None
        while time.time() < deadline and settings is None:
            assert server.poll() is None, log.read_text()[-3000:]
            found = re.search(r"(http://(?:127\.0\.0\.1|localhost):\d+)/lab\S*\?token=(\w+)", log.read_text())
            if found:
                base, token = found.groups()
                try:
                    url = f"{base}/lab/api/settings/@jupyterlab/translation-extension:plugin?token={token}"
                    with urllib.request.urlopen(url, timeout=5) as r:
                        settings = json.loads(r.read().decode())
                    with urllib.request.urlopen(f"{base}/api/contents/notebooks/zh?token={token}", timeout=5) as r:
                        listing = r.read().decode()
                except OSError:
                    settings = None
            time.sleep(0.5)
        assert settings is not None, log.read_text()[-3000:]
        assert "/lab/tree/notebooks/zh" in log.read_text() or "notebooks/zh" in log.read_text()
        # The course's overrides make zh_CN the language setting's default (JupyterLab then loads its language pack).
        assert settings["schema"]["properties"]["locale"]["default"] == "zh_CN", str(settings)[:1500]
        assert all(a in listing for a in nbs.assignments())
        assert release.release_dir("zh").name in str(release.release_dir("zh"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_release_writes_the_chinese_solutions_for_nbgrader():
    """README's `.venv/bin/attn release --lang zh --solutions`: solutions-zh/ as nbgrader's source, Chinese."""
    import shutil

    target = ROOT / "solutions-zh"
    existed = target.exists()
    try:
        line = one_clean_line(run(".venv/bin/attn release --lang zh --solutions"))
        assert "solutions-zh/" in line
        for assignment in nbs.assignments():
            text = "".join(c.source for c in nbs.read(target / assignment / f"{assignment}.ipynb").cells)
            assert 'set_language("zh")' in text and "### BEGIN SOLUTION" in text
    finally:
        if not existed:
            shutil.rmtree(target, ignore_errors=True)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_bootstrap_keeps_an_installed_pytorch_and_says_what_it_downloaded(installer):
    """README's route without make: `python -m utils.bootstrap` in the environment the tests run in keeps its
    PyTorch (in the supported range) and installs nothing new: it says so, which installer installed the course
    (uv; pip where ATTN_INSTALLER=pip, or where uv cannot be used), and how many MB it downloaded."""
    env = {**os.environ, "ATTN_INSTALLER": installer}
    proc = subprocess.run([sys.executable, "-m", "utils.bootstrap", "--extras", "lab,dev"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert re.search(r"PyTorch \S+ is installed and supported: kept", proc.stdout), proc.stdout
    assert f"(lab,dev), installed by {installer}:" in proc.stdout, proc.stdout
    assert re.search(r"downloaded in all: \d+ MB", proc.stdout), proc.stdout


def test_bootstrap_falls_back_to_pip_where_uv_fails(monkeypatch, capsys):
    """Where uv fails (an index it cannot read, say), pip installs the course, and the learner is told why."""
    from utils import bootstrap

    calls = []
    monkeypatch.setattr(bootstrap, "install_torch", lambda: 0.0)
    monkeypatch.setattr(bootstrap, "uv", lambda *args: (2, 1.5, "error: Failed to fetch: https://mirror.example/simple"))
    monkeypatch.setattr(bootstrap, "pip", lambda *args, **kw: calls.append(args) or (0, 3.0, ""))
    assert bootstrap.main(["--extras", "lab"]) == 0
    out = capsys.readouterr().out
    assert calls == [("-e", f"{ROOT}[lab]")], calls
    assert "uv could not install the course; pip installs it instead" in out and "mirror.example" in out, out
    assert "installed by pip: 4 MB downloaded" in out and "downloaded in all: 4 MB" in out, out

    monkeypatch.setattr(bootstrap, "pip", lambda *args, **kw: (1, 0.0, "ERROR: No matching distribution for nbgrader"))
    with pytest.raises(SystemExit, match="could not be installed:\nERROR: No matching distribution"):
        bootstrap.main([])


def test_attn_table_options_exist():
    """Each `attn` command in README's table accepts every option the table gives it."""
    rows = re.findall(r"^\| `attn (\w+)([^`]*)` \|", README, re.M)
    assert {name for name, _ in rows} >= {"lab", "check", "release", "references", "execute", "bench", "train",
                                          "translate"}
    for name, synopsis in rows:
        options = re.findall(r"--[a-z][a-z-]*", synopsis)
        if not options:
            continue
        proc = run(f".venv/bin/attn {name} --help")
        assert proc.returncode == 0, proc.stderr
        missing = [o for o in options if o not in proc.stdout]
        assert not missing, f"attn {name} --help lacks {missing}"


# -- docs/COURSE.md: the contract ---------------------------------------------------------------------------------

def test_course_contract_matches_the_solutions():
    """docs/COURSE.md's exercise names and points are the solutions' grade cells, in order."""
    import nbformat

    text = (ROOT / "docs" / "COURSE.md").read_text(encoding="utf-8")
    documented = [(nb, name, float(points)) for nb, name, points in
                  re.findall(r"^\| \d\d \| `(\d\d_\w+)` \| `(\w+)` \| ([\d.]+) \|$", text, re.M)]
    actual = []
    for assignment in nbs.assignments():
        for cell in nbformat.read(nbs.solution_path(assignment), 4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                actual.append((assignment, meta["grade_id"].removeprefix("test_"), float(meta["points"])))
    assert documented == actual
    for path in (ROOT / "README.md", ROOT / "CONTRIBUTING.md"):
        assert "../shared" not in path.read_text(encoding="utf-8"), f"{path.name} points outside the repository"
    for doc in ("COURSE.md", "STYLE.md", "TOOLCHAIN.md"):
        assert (ROOT / "docs" / doc).is_file()


# -- README as a front door, and the pages it leads to -------------------------------------------------------------

def test_readmes_first_screen_shows_the_course_and_the_ways_in():
    """What a newcomer decides on (issue 36): what the course is, one picture, the one-click starts, the two
    commands and the course map, before any install detail; the rest lives on the pages README links to."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    map_at = next(i for i, line in enumerate(lines) if line.startswith("| 01 |"))
    first_screen = "\n".join(lines[:map_at])
    for what, needle in (("the picture", "<img src=\"docs/images/"), ("Colab", "colab.research.google.com"),
                         ("Binder", course.binder_url()), ("Codespaces", course.codespaces_url()),
                         ("make lab", "make lab"), ("make test", "make test")):
        assert needle in first_screen, f"README's first screen lacks {what}"
    assert map_at < 35, f"README's course map starts at line {map_at + 1}: keep the first screen short"
    assert len(lines) <= 80, f"README has {len(lines)} lines: details belong on the pages of docs/ it links to"
    for name in ("uv", "jsonschema", "OMP_NUM_THREADS"):
        assert not re.search(rf"\b{name}\b", text), f"README mentions {name}: an install or sizing detail for docs/"
    alt = re.search(r'<img src="docs/images/[^"]+"[^>]*alt="([^"]{80,})"', text, re.S)
    assert alt, "README's picture needs an alt text that says what it shows"


def test_every_link_of_readme_and_its_pages_leads_somewhere():
    """Each relative link of README and docs/*.md names a file of the repository, and its #anchor a heading there
    (as GitHub makes them: lower case, punctuation dropped, spaces to hyphens)."""

    def anchors(path: Path) -> set[str]:
        heads = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}

    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text):
            if re.match(r"[a-z]+:", target):
                continue
            name, _, anchor = target.partition("#")
            path = (page.parent / name).resolve() if name else page
            if not path.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


# -- the commands the notebooks recommend ---------------------------------------------------------------------------

_SUBCOMMANDS = r"(?:check|translate|train|lab|release|autograde|i18n|references|execute|docs|bench)"


def notebook_commands() -> dict[str, set[str]]:
    """The `attn` command lines the student notebooks (English and Chinese) give a learner to type: the lines of
    their markdown code blocks and their code spans that call a subcommand with arguments (a bare `attn check`
    names the command, it is not one to type), without a trailing comment; {command: the notebooks giving it}."""
    found: dict[str, set[str]] = {}
    copies = sorted(nbs.NOTEBOOKS.glob("[0-9]*/*.ipynb")) + sorted((nbs.NOTEBOOKS / "zh").glob("[0-9]*/*.ipynb"))
    for path in copies:
        for cell in nbs.read(path).cells:
            if cell.cell_type != "markdown":
                continue
            blocks = re.findall(r"```[^\n]*\n(.*?)```", cell.source, re.S)
            spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", cell.source, flags=re.S))
            for line in [line for block in blocks for line in block.splitlines()] + spans:
                line = re.sub(r"\s+#\s.*$", "", line.strip()).strip()
                if re.match(rf"^(?:[A-Z_]+=\S+ )*(?:\S*/)?attn {_SUBCOMMANDS} \S", line):
                    found.setdefault(line, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_command_a_notebook_recommends_is_written_as_readme_writes_it():
    """A notebook's commands start with README's `.venv/bin/attn` (08 once dropped it), and each is a command README
    gives (and a test above runs), an `attn check` of a notebook that exists, or an `attn translate` that
    `test_every_translate_command_a_notebook_recommends_runs` runs."""
    commands = notebook_commands()
    assert any("attn translate" in c for c in commands), "notebook 08 recommends no attn translate any more?"
    readme = set(bash_block_commands(README)) | set(INLINE)
    for command, where in sorted(commands.items()):
        assert re.match(r"^(?:[A-Z_]+=\S+ )*\.venv/bin/attn ", command), f"{sorted(where)}: {command!r} drops .venv/bin/"
        words = shlex.split(command)
        while re.match(r"^[A-Z_]+=", words[0]):
            words.pop(0)
        if words[1] == "check" and len(words) == 3:
            assert (ROOT / words[2]).is_dir(), f"{sorted(where)}: {command!r}: no such folder"
        elif words[1] != "translate":  # the Chinese copies add --lang zh (messages in Chinese, the notebooks/zh/ copy)
            assert command.replace(" --lang zh", "") in readme, f"{sorted(where)}: {command!r} is neither README's " \
                                                                  "nor run by a test"


def test_every_translate_command_a_notebook_recommends_runs(trained, tmp_path):
    """Run as written (with the finished solution and the short-trained checkpoint, as README's): exit 0, one line
    of the target language on stdout. 08 §12 once recommended a sentence with a word the model has never seen.
    README's own commands are run by the tests above and not again here; of the Chinese copy's, which are README's
    with `--lang zh`, one is run, and speaks Chinese."""
    readme = set(bash_block_commands(README)) | set(INLINE)
    commands = [c for c in notebook_commands() if re.match(r"^\.venv/bin/attn translate ", c)]
    chinese = sorted((c for c in commands if " --lang zh" in c), key=lambda c: "--vocabulary" not in c)
    assert commands and chinese
    for command in sorted(c for c in commands if c.replace(" --lang zh", "") not in readme) + chinese[:1]:
        proc = run(command, cwd=tmp_path, extra=_translate_options(trained))
        assert proc.returncode == 0, (command, proc.stderr[-2000:])
        if "--vocabulary" in command:
            assert "个词：" in proc.stdout.splitlines()[0] and "名词:" in proc.stdout, (command, proc.stdout[:300])
        else:
            line = one_clean_line(proc)
            assert set(line.split()) <= _target_words(trained), (command, line)
