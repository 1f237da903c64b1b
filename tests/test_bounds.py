"""Bounds on every input (issue 37): a test set's fields have limits, refused as the file is
read; counts and sizes are refused below their least, one line each; the embedding model's
tokenizer sees no more of a text than the model reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import ragsweep_here

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import TESTSET
from ragsweep.documents.testsets import LIMITS, export_testset, load_testset
from ragsweep.models import embedding

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODEL = "all-MiniLM-L6-v2"


def giskard_line(**fields) -> str:
    record = {"id": "q1", "question": "Port?", "reference_answer": "8443", **fields}
    return json.dumps(record) + "\n"


# ---- the test set's limits ----------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"question": "x" * (LIMITS["question"] + 1)}, "field 'question' is 10,001 characters"),
        ({"reference_answer": "y" * 100_001}, "field 'reference_answer' is 100,001 characters"),
        ({"reference_context": "z " * 50_001}, "field 'reference_context' is 100,002 characters"),
        (
            {"conversation_history": [{"role": "user", "content": "w" * 100_000}]},
            "field 'conversation_history' is 100,033 characters",
        ),
    ],
)
def test_a_giskard_field_over_its_limit_is_refused_naming_the_line_the_id_and_the_field(
    tmp_path, fields, named
):
    path = tmp_path / "t.jsonl"
    path.write_text(giskard_line(id="q0", question="Fine?") + giskard_line(id="q65", **fields))
    with pytest.raises(RagsweepError) as refused:
        load_testset(str(path))
    assert str(refused.value).startswith(f"{path}: line 2 (id 'q65'): {named}; the limit is ")


def test_fields_at_their_limits_are_read(tmp_path):
    """The limits refuse only what is over them."""
    path = tmp_path / "t.jsonl"
    path.write_text(
        giskard_line(
            question="q" * LIMITS["question"],
            reference_answer="a" * LIMITS["reference_answers"],
            reference_context="c" * LIMITS["reference_context"],
        )
    )
    assert load_testset(str(path)).num_rows == 1


def test_an_autorag_answer_over_its_limit_is_refused_naming_its_item(tmp_path):
    path = tmp_path / "t.json"
    long = "a" * (LIMITS["reference_answers"] + 1)
    items = [{"question": "Q?", "correct_answers": ["ok", long], "correct_answer_document_ids": []}]
    path.write_text(json.dumps(items))
    with pytest.raises(RagsweepError) as refused:
        load_testset(str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}: record 1 (id 'q-")
    assert "field 'correct_answers' item 2 is 100,001 characters; the limit is 100,000" in message


def test_an_arrow_test_set_row_over_a_limit_is_refused_naming_the_row(tmp_path):
    row = dict.fromkeys(TESTSET.names)
    row.update(
        question_id="q9",
        question="q" * (LIMITS["question"] + 1),
        reference_answers=["a"],
        reference_doc_ids=[],
        gold_spans=[],
        question_version="v",
    )
    path = export_testset(pa.Table.from_pylist([row], schema=TESTSET), tmp_path / "t.arrow")
    with pytest.raises(RagsweepError) as refused:
        load_testset(str(path))
    assert str(refused.value).startswith(f"{path}: row 1 (id 'q9'): field 'question' is 10,001")


def test_a_run_with_a_50_mb_question_is_refused_before_the_pipeline_naming_it(tmp_path):
    """The issue's case: the examples' test set and one 50 MB record. Refused as the test set
    is read (the issue's run took 210 s and an 8 GB step), no run folder made."""
    lines = (EXAMPLES / "testset.jsonl").read_text().splitlines()
    huge = {**json.loads(lines[0]), "id": "q65", "question": "x" * (50 << 20)}
    testset = tmp_path / "testset.jsonl"
    testset.write_text("\n".join([*lines, json.dumps(huge)]) + "\n")
    runs = tmp_path / "runs"
    result = ragsweep_here(
        "run", "--docs", str(EXAMPLES / "docs"), "--testset", str(testset), "--no-store",
        "--output", str(runs),
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {testset}: line 65 (id 'q65'): field 'question' is 52,428,800 characters; "
        "the limit is 10,000"
    ]
    assert not runs.exists()


def test_curation_refuses_a_question_or_answer_over_its_limit(tmp_path):
    from ragsweep.curation.stored_sets import add_question, edit_question

    path = tmp_path / "t.jsonl"
    path.write_text(giskard_line())
    testset = load_testset(str(path))
    with pytest.raises(RagsweepError, match=r"^the new question \(id 'q-\w+'\): field 'question'"):
        add_question(testset, "q" * 10_001, ["a"], [])
    with pytest.raises(
        RagsweepError, match=r"^the edited question \(id 'q1'\): field 'reference_answers' is"
    ):
        edit_question(testset, "q1", answers=["a" * 100_001])


# ---- counts and sizes ---------------------------------------------------------------------

KB = ["--docs", str(EXAMPLES / "docs"), "--testset", str(EXAMPLES / "testset.jsonl")]


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["run", *KB, "--max-questions", "-5"],
            "max_questions (--max-questions): must be 0 (every question) or more, not -5",
        ),
        (
            ["run", *KB, "--max-document-bytes", "-5000000"],
            "max_document_bytes (--max-document-bytes): must be 0 (every document) or more, "
            "not -5000000",
        ),
        (
            ["run", *KB, "--max-configs", "-1"],
            "max_configs (--max-configs): must be 0 (no limit) or more, not -1",
        ),
        (["run", *KB, "--seed", "-1"], "seed (--seed): must be 0 or more, not -1"),
        (
            ["run", *KB, "--parallelism", "0"],
            "parallelism (--parallelism): must be 1 or more, not 0",
        ),
        (
            ["run", *KB, "--embedding-shard-bytes", "-1"],
            "embedding_shard_bytes (--embedding-shard-bytes): must be 0 (never shard) or more, "
            "not -1",
        ),
        (
            ["run", *KB, "--retrieval-question-blocks", "0"],
            "retrieval_question_blocks (--retrieval-question-blocks): must be 1 or more, not 0",
        ),
        (
            ["run", *KB, "--memory-limit", "lots"],
            "memory_limit (--memory-limit): 'lots' is not a size like 2GB, 1500MB or 4Gi",
        ),
        (["run", *KB, "--top", "-1"], "--top: must be 0 (every row) or more, not -1"),
        (
            ["generate", "--docs", "d", "--out", "t.jsonl", "--llm", "m", "--num-questions", "-3"],
            "options: field 'num_questions': must be 1 or more, not -3",
        ),
        (
            ["submit", *KB, "--parallelism", "-2"],
            "--parallelism: must be 0 (no bound) or more, not -2",
        ),
        (["submit", *KB, "--gpu", "-1"], "--gpu: must be 0 (none) or more, not -1"),
    ],
)
def test_a_negative_count_is_refused_with_one_line_and_status_2(tmp_path, args, line):
    result = ragsweep_here(*args)
    assert (result.returncode, result.stderr.strip().splitlines()) == (2, [f"error: {line}"])


@pytest.mark.parametrize(
    "field, value",
    [("max_questions", -5), ("max_document_bytes", -1), ("seed", -1), ("max_llm_calls", -1)],
)
def test_the_pipelines_parameters_are_refused_below_their_least_as_the_options_are(field, value):
    """``submit --param`` is checked against the compiled pipeline by the settings the
    pipeline's ``configure`` step builds: a negative count fails as on the command line."""
    from ragsweep.kubeflow import openshift

    pipeline = Path(__file__).resolve().parent.parent / "pipelines" / "sweep_pipeline.yaml"
    arguments = openshift.run_arguments(
        "s3://b/docs/", "s3://b/t.json", "docs-secret", None, [f"{field}={value}"]
    )
    flag = "--" + field.replace("_", "-")
    with pytest.raises(RagsweepError) as refused:
        openshift.preflight(pipeline, arguments)
    assert str(refused.value).startswith(f"{field} ({flag}): must be 0")
    assert str(refused.value).endswith(f"or more, not {value}")


# ---- what the embedding model's tokenizer is given ------------------------------------------


@pytest.fixture
def tokenized(monkeypatch) -> list[str]:
    """Every text the model's tokenizer is given: to count tokens, or in the model's batches."""
    seen: list[str] = []
    count, model = embedding.load_tokenizer, embedding.batch_encoder

    def counting(name):
        tokenize = count(name)
        return lambda text: (seen.append(text), tokenize(text))[1]

    def batches(name):
        encode = model(name)
        return lambda texts: (seen.extend(texts), encode(texts))[1]

    monkeypatch.setattr(embedding, "load_tokenizer", counting)
    monkeypatch.setattr(embedding, "batch_encoder", batches)
    return seen


def test_a_5_mb_question_is_tokenized_only_as_far_as_the_model_reads(tokenized):
    words = [f"word{i % 997}" for i in range(800_000)]
    question = "query: " + " ".join(words)  # 5.6 MB
    assert len(question) > 5_000_000
    limit = embedding.max_input_tokens(MODEL)

    vector = embedding.encode(MODEL, [question])

    assert tokenized and max(map(len, tokenized)) <= limit * embedding.WINDOW_CHARS
    # the model read the tokens it reads of the whole question: the vector is the one the
    # model gives a long head of the question, which it truncates itself
    head = question[:100_000]
    whole = embedding.batch_encoder(MODEL)([head])
    assert np.allclose(vector, whole / np.linalg.norm(whole), atol=1e-5)


def test_a_text_with_long_runs_of_white_space_keeps_every_token_the_model_reads():
    """White space takes no token: the window widens until it holds the tokens the model
    reads, so none of them is lost to the cut."""
    tokenize = embedding.load_tokenizer(MODEL)
    limit = embedding.max_input_tokens(MODEL)
    text = "start" + " " * 50_000 + " ".join(f"w{i}" for i in range(40_000))
    read = embedding.model_input(MODEL, text)
    assert len(read) < len(text)
    assert list(tokenize(read)[:limit]) == list(tokenize(text)[:limit])


def test_a_chunk_is_given_to_the_model_whole():
    chunk = " ".join(["the tidewater server listens on port 8443"] * 30)  # ~1,300 characters
    assert embedding.model_input(MODEL, chunk) is chunk
