"""environment.yml (conda route), pyproject.toml (pip route) and utils/bootstrap.py must agree."""

import os
import re
import subprocess
import sys

import pytest

from utils import bootstrap
from utils.notebooks import ROOT

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11 on")

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    wanted = PROJECT["dependencies"] + [d for extra in ("lab", "dev") for d in PROJECT["optional-dependencies"][extra]]
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    conda_pip = [l.strip()[2:].strip() for l in lines[start + 1:] if l.strip().startswith("- ")]
    conda_pip = [r for r in conda_pip if r != "-e ."]
    assert sorted(conda_pip) == sorted(wanted), "environment.yml's pip list must equal pyproject's dependencies"
    assert "-e ." in (l.strip()[2:].strip() for l in lines), "environment.yml must install the course package"


def test_one_pytorch_range_everywhere():
    """pyproject.toml's range is the bootstrap's, its floor is what notebook 06 needs, and no file pins another."""
    torch = next(d for d in PROJECT["dependencies"] if d.startswith("torch"))
    assert torch.split()[0] == f"torch{bootstrap.TORCH_RANGE}"
    floor = re.search(r">=(\d+)\.(\d+)", bootstrap.TORCH_RANGE).groups()
    assert tuple(map(int, floor)) >= (2, 5), "F.scaled_dot_product_attention(enable_gqa=...) arrived in 2.5"
    assert bootstrap.in_range("2.13.0") and bootstrap.in_range("2.15.0+cpu") and not bootstrap.in_range("2.5.1")
    assert "torch==" not in (ROOT / "Makefile").read_text(), "make install asks utils/bootstrap.py"
    for binder in (ROOT / "binder").glob("*"):
        assert "torch" not in binder.read_text() or bootstrap.TORCH_RANGE in binder.read_text(), binder


def test_the_notebooks_need_only_the_core_dependencies():
    """Colab installs the course without extras: nothing a notebook imports may come from lab or dev."""
    extras = {re.split(r"[<>=;\[ ]", d)[0].lower().replace("-", "_")
              for extra in PROJECT["optional-dependencies"].values() for d in extra}
    from utils import notebooks as nbs

    for assignment in nbs.assignments():
        for cell in nbs.read(nbs.solution_path(assignment)).cells:
            for module in re.findall(r"^\s*(?:from|import) ([\w.]+)", cell.source, re.M):
                assert module.split(".")[0].lower() not in extras, f"{assignment} imports {module}, an extra"


# What `pip config list` prints on the CI machine (files and PIP_* variables), with a second find-links and a section
# that does not apply to `pip install` added.
PIP_CONFIG = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/somewhere/else'
freeze.exclude='uv'
"""


def test_uv_is_given_the_indexes_constraints_and_certificate_pip_is_configured_with():
    settings = bootstrap.pip_settings(PIP_CONFIG)
    assert settings["find-links"] == "/opt/wheels", "a PIP_* variable overrides the configuration files, as in pip"
    assert "exclude" not in settings, "only the sections that apply to `pip install`"
    options, env = bootstrap.uv_options(settings)
    pairs = list(zip(options[::2], options[1::2]))
    assert ("--index-strategy", "unsafe-best-match") in pairs, "pip takes the best version over all its indexes"
    assert ("--extra-index-url", "file:///opt/pypi/simple") in pairs and (
        "--extra-index-url", "file:///opt/pypi-more/simple") in pairs
    assert ("--find-links", "/opt/wheels") in pairs and ("--find-links", "/somewhere/else") not in pairs
    assert ("--constraint", "/etc/xdg/pip/constraints.txt") in pairs, "pip's cap on PyTorch holds for uv too"
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_HTTP_TIMEOUT": "180"}

    mirror = bootstrap.pip_settings("global.index-url='https://pypi.tuna.tsinghua.edu.cn/simple'\n")
    assert bootstrap.uv_options(mirror)[0][2:] == ["--index-url", "https://pypi.tuna.tsinghua.edu.cn/simple"]
    assert bootstrap.uv_options({}) == (["--index-strategy", "unsafe-best-match"], {})


@pytest.mark.parametrize("setting", ["global.proxy='http://proxy:3128'", "install.no-index='true'",
                                     ":env:.client-cert='/home/me/cert.pem'"])
def test_pip_installs_the_course_where_it_is_configured_in_a_way_uv_is_not_told_about(setting):
    assert bootstrap.uv_options(bootstrap.pip_settings(PIP_CONFIG + setting + "\n")) is None


def test_tests_grouped_for_one_worker_run_on_one_worker(tmp_path):
    """`make test` runs with --dist loadgroup so that the tests sharing an expensive module fixture (conftest.py's
    SHARED_FIXTURE) run on one worker, which builds it once. With pytest 9.2 and pytest-xdist 3.8 the groups are
    silently ignored (pytest-dev/pytest-xdist#1386): this fails where they are."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.xdist_group('one'))\n")
    (tmp_path / "test_grouped.py").write_text(
        "import os, pathlib, pytest\n\n@pytest.mark.parametrize('i', range(8))\ndef test_where(i):\n"
        "    (pathlib.Path(os.environ['RAN']) / str(i)).write_text(os.environ['PYTEST_XDIST_WORKER'])\n")
    ran = tmp_path / "ran"
    ran.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-q", str(tmp_path)], cwd=tmp_path, env={**os.environ, "RAN": str(ran)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    workers = {p.read_text() for p in ran.iterdir()}
    assert len(list(ran.iterdir())) == 8 and len(workers) == 1, (
        f"one group ran on {sorted(workers)}: pytest-xdist's loadgroup does not group with this pytest")
