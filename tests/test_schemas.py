import pyarrow as pa
import pytest
from builders import complete

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import SCORES, read_table, write_table


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
