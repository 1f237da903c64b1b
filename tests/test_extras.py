"""Optional parts (setup.cfg's extras): without their packages, ragsweep says in one line which
extra to install, before any work starts. A package is made missing the way Python itself
reports one: ``sys.modules[name] = None`` makes its import raise ModuleNotFoundError."""

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ["run", "--docs", "examples/docs", "--testset", "examples/testset.jsonl", "--output", "{tmp}"]


def ragsweep_without(package: str, *args: str) -> subprocess.CompletedProcess:
    code = (
        f"import sys; sys.modules[{package!r}] = None\n"
        "from ragsweep.cli import main\n"
        f"sys.argv = ['ragsweep', *{list(args)!r}]\n"
        "main()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize(
    ("package", "args", "message"),
    [
        (
            "pymilvus",
            [*RUN, "--vector-stores", "milvus"],
            "the milvus vector store needs pymilvus: pip install 'ragsweep[milvus]'",
        ),
        (
            "psycopg",
            [*RUN, "--vector-stores", "pgvector"],
            "the pgvector vector store needs psycopg: pip install 'ragsweep[pgvector]'",
        ),
        (
            "psycopg",
            ["runs", "--store", "postgresql+psycopg://me:s3cret@127.0.0.1:1/results"],
            "results store postgresql+psycopg://me:***@127.0.0.1:1/results needs psycopg: "
            "pip install 'ragsweep[postgres]'",
        ),
        (
            "starlette",
            ["ui", "--port", "1"],
            "ragsweep ui needs starlette: pip install 'ragsweep[ui]'",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it_before_any_work(package, args, message, tmp_path):
    result = ragsweep_without(package, *[a.format(tmp=tmp_path) for a in args])
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"error: {message}"
    assert "s3cret" not in result.stderr + result.stdout
    assert not list(tmp_path.iterdir())  # no run folder: nothing started


def test_tracking_without_mlflow_names_the_extra(monkeypatch):
    from ragsweep.core.errors import RagsweepError
    from ragsweep.reporting import tracking

    monkeypatch.setitem(sys.modules, "mlflow.exceptions", None)
    with pytest.raises(RagsweepError, match=r"needs mlflow: pip install 'ragsweep\[mlflow\]'"):
        tracking.log_sweep(None, "http://127.0.0.1:1", "run")


def test_all_is_every_optional_extra_and_make_installs_it():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    extras = {
        name: {line for line in value.splitlines() if line.strip()}
        for name, value in config["options.extras_require"].items()
    }
    optional = sorted(name for name in extras if name not in ("all", "test"))
    assert optional == ["milvus", "mlflow", "pgvector", "postgres", "ui"]
    assert extras["all"] == set().union(*(extras[name] for name in optional))
    assert "-e '.[all,test]'" in (ROOT / "Makefile").read_text()
    assert "pip install -c constraints.txt '.[all]'" in (ROOT / "Containerfile").read_text()
