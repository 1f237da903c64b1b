import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from builders import complete

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import SCHEMA_VERSION, SCORES, read_table, write_table
from ragsweep.sweep.space import CONFIGS, LEADERBOARD, SearchSpace, configs_table


def scores(n=2):
    return complete(
        pa.table(
            {
                "config_id": ["c"] * n,
                "question_id": [f"q{i}" for i in range(n)],
                "context_correctness": [1.0] * n,
                "document_recall": [1.0] * n,
                "span_recall": [None] * n,
                "span_precision": [None] * n,
                "recall_vs_exact": [1.0] * n,
                "answer_correctness": [0.5] * n,
                "faithfulness": [1.0] * n,
                "correctness": [None] * n,
                "correctness_reason": [None] * n,
                "judge_error": [None] * n,
                "judge_llm_calls": [None] * n,
            }
        ),
        SCORES,  # the metrics this table leaves out, null
    )


def test_artifact_round_trips_with_kind_and_version(tmp_path):
    path = write_table(scores(), tmp_path / "scores.arrow", "scores")
    table = read_table(path, "scores")
    assert table.num_rows == 2
    assert table.schema.metadata[b"ragsweep.kind"] == b"scores"


def test_reading_an_artifact_of_another_kind_is_a_clear_error(tmp_path):
    path = write_table(scores(), tmp_path / "scores.arrow", "scores")
    with pytest.raises(RagsweepError, match="expected a leaderboard artifact, found scores"):
        read_table(path, "leaderboard")


def test_reading_a_file_that_is_not_arrow_is_a_clear_error(tmp_path):
    path = tmp_path / "x.arrow"
    path.write_text("hello")
    with pytest.raises(RagsweepError, match="not a readable Arrow artifact"):
        read_table(path, "scores")


def test_writing_a_table_missing_a_column_fails(tmp_path):
    with pytest.raises(KeyError):
        write_table(scores().drop(["faithfulness"]), tmp_path / "s.arrow", "scores")


def test_configuration_columns_keep_the_search_spaces_types_through_an_artifact(tmp_path):
    # the space declares a configuration's columns: core keeps them as written, typed, even
    # a column null in every row (no configuration has a reranker)
    configs = configs_table(SearchSpace(chunk_sizes=(64,), top_ks=(2, 4)).all_configs())
    assert configs["rerank_fetch_k"].null_count == configs.num_rows == 4
    read = read_table(write_table(configs, tmp_path / "settings.arrow", "settings"), "settings")
    assert read.schema.remove_metadata() == CONFIGS
    assert read.equals(configs)


def test_a_leaderboard_without_a_declared_column_is_a_clear_error(tmp_path):
    board = pa.Table.from_pylist([], schema=LEADERBOARD).drop(["questions"])
    with pytest.raises(RagsweepError, match="a leaderboard table lacks the column.s. questions"):
        write_table(board, tmp_path / "l.arrow", "leaderboard")
    path = tmp_path / "written.arrow"
    meta = {b"ragsweep.kind": b"leaderboard", b"ragsweep.schema_version": SCHEMA_VERSION.encode()}
    with ipc.new_file(path, board.schema.with_metadata(meta)) as writer:
        writer.write_table(board.replace_schema_metadata(meta))
    with pytest.raises(RagsweepError, match=f"{path}: a leaderboard table lacks .* questions"):
        read_table(path, "leaderboard")
