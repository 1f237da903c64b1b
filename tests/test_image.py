"""The steps' image: the Containerfile installs what was tested, and `make image` says plainly
when it cannot build."""

import configparser
import re
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def requirements(*sections: tuple[str, str]) -> list[Requirement]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = [line for s, key in sections for line in config[s][key].splitlines()]
    found = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return [r for r in found if r.name != "ragsweep"]


def install_requires() -> list[Requirement]:
    return requirements(("options", "install_requires"))


def runtime_requires() -> list[Requirement]:
    """What the image installs: the core and every optional extra, no test tools."""
    extras = ("milvus", "pgvector", "postgres", "mlflow", "ui")
    return install_requires() + requirements(*[("options.extras_require", e) for e in extras])


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def test_constraints_pin_every_runtime_dependency_within_setup_cfg():
    pins = constraints()
    for requirement in runtime_requires():
        version = pins.get(canonicalize_name(requirement.name))
        assert version, f"constraints.txt lacks {requirement.name}: run make constraints"
        assert requirement.specifier.contains(version), f"{requirement}: pinned {version}"


def test_containerfile_installs_torch_cpu_and_the_package_offline():
    text = (ROOT / "Containerfile").read_text()
    assert re.search(r"^FROM registry\.access\.redhat\.com/ubi9/python-311", text, re.M)
    [torch] = [r for r in install_requires() if r.name == "torch"]
    assert f'--index-url "$TORCH_INDEX" torch{torch.specifier}' in text
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in text
    assert "pip install -c constraints.txt '.[all]'" in text
    assert "HF_HUB_OFFLINE=1" in text


def test_constraints_come_from_the_runtime_environment_not_the_test_one():
    pins = constraints()
    for tool in ("pytest", "moto", "playwright", "ruff", "pgserver", "import-linter"):
        assert canonicalize_name(tool) not in pins, f"{tool} is a test tool, not in the image"


@pytest.mark.parametrize(
    ("engine", "message"),
    [("", "no container engine"), ("false", "false cannot reach its engine")],
)
def test_make_image_without_a_working_engine_says_so_and_fails(engine, message):
    result = subprocess.run(
        ["make", "-s", "image", f"CONTAINER_ENGINE={engine}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert message in result.stderr
    assert "build -f Containerfile" not in result.stdout
