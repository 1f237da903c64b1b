"""pattern.json records its schema version and the ragsweep that wrote it; its readers
(`ragsweep best PATTERN`, ``read_pattern``) read an older one as it is and refuse a newer."""

import json

import numpy as np
import pyarrow as pa
import pytest
import yaml
from builders import make_answers, make_scores, make_testset
from conftest import ragsweep_here

from ragsweep import __version__
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import DOCUMENTS
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.models.llm import LLMSettings
from ragsweep.patterns import PATTERN_SCHEMA_VERSION, read_pattern, write_patterns
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace, configs_table


@pytest.fixture
def pattern(tmp_path):
    """The folder of one pattern written from a one-configuration board."""
    space = SearchSpace(top_ks=(2,), search_types=("similarity",), chunk_sizes=(64,))
    ids, questions = [space.all_configs()[0]["config_id"]], ["q0", "q1"]
    board = build_board(
        make_scores(ids, questions, np.ones((1, 2))),
        make_answers(ids, questions),
        make_testset(questions),
        configs_table(space.all_configs()),
        "answer_correctness",
        settings=RunSettings("docs", "t.json", space, "answer_correctness").record(),
    )
    [folder] = write_patterns(
        tmp_path / "patterns",
        board.leaderboard,
        board.results,
        make_answers(ids, questions),
        make_testset(questions),
        pa.Table.from_pylist([], schema=DOCUMENTS),
        space,
        LLMSettings(),
        1,
    )
    return folder


def rewrite(folder, **fields) -> None:
    """pattern.json with ``fields`` set (None: removed)."""
    data = json.loads((folder / "pattern.json").read_text())
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    (folder / "pattern.json").write_text(json.dumps(data))


def test_pattern_json_records_its_schema_version_and_producer(pattern):
    data = json.loads((pattern / "pattern.json").read_text())
    assert data["schema_version"] == PATTERN_SCHEMA_VERSION == 1
    assert data["producer"] == {"name": "ragsweep", "version": __version__}
    assert read_pattern(pattern) == data


def test_best_of_a_pattern_prints_a_space_holding_exactly_its_configuration(pattern):
    config_id = read_pattern(pattern)["ragsweep"]["config_id"]

    for given in (pattern, pattern / "pattern.json"):
        result = ragsweep_here("best", str(given))

        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"# pattern {pattern.name}: ")
        [config] = SearchSpace.from_dict(yaml.safe_load(result.stdout)).all_configs()
        assert config["config_id"] == config_id


def test_a_pattern_json_of_an_older_ragsweep_without_the_fields_is_read(pattern):
    rewrite(pattern, schema_version=None, producer=None)

    assert "schema_version" not in read_pattern(pattern)
    assert ragsweep_here("best", str(pattern)).returncode == 0


def test_a_newer_schema_version_is_refused_with_one_line(pattern):
    rewrite(pattern, schema_version=PATTERN_SCHEMA_VERSION + 1, producer={"version": "9.0"})

    with pytest.raises(RagsweepError) as refused:
        read_pattern(pattern)
    assert str(refused.value) == (
        f"{pattern / 'pattern.json'}: schema_version 2 is newer than ragsweep {__version__} "
        "reads (1); ragsweep 9.0 wrote it: upgrade ragsweep to read it"
    )
    result = ragsweep_here("best", str(pattern))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: {refused.value}"
