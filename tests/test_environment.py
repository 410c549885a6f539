"""environment.yml (conda route) and pyproject.toml (pip route) must install the same things."""

import tomllib

from utils.notebooks import ROOT


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- pip:")
    conda_pip = [l.strip()[2:].strip() for l in lines[start + 1:] if l.strip().startswith("- ")]
    conda_pip = [r for r in conda_pip if r != "-e ."]
    assert sorted(conda_pip) == sorted(pyproject), "environment.yml's pip list must equal pyproject's dependencies"
    assert "-e ." in (l.strip()[2:].strip() for l in lines), "environment.yml must install the course package"


def test_torch_is_pinned_to_the_cpu_build_on_disk():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch==2.13.0" in pyproject
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()

