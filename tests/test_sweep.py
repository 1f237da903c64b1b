import pyarrow as pa

from ragsweep import answering
from ragsweep.space import SearchSpace
from ragsweep.sweep import build_chunks, evaluate

DOCS = pa.table(
    {
        "doc_id": ["ports.md", "plans.md"],
        "source": ["ports.md", "plans.md"],
        "format": ["md", "md"],
        "text": [
            "Tidewater listens on port 8443 by default. The admin console uses port 9000.",
            "The Basic plan keeps backups for 30 days. The Pro plan keeps backups for 90 days.",
        ],
    }
)
QUESTIONS = pa.table(
    {
        "question_id": ["q1", "q2"],
        "question": ["Which port does the console use?", "How long does Pro keep backups?"],
        "reference_answers": [["9000"], ["90 days"]],
        "reference_doc_ids": [["ports.md"], ["plans.md"]],
    }
)


def test_configurations_that_retrieve_the_same_context_share_one_answer(monkeypatch):
    calls = []

    def counting(batch):
        calls.extend(batch)
        return [answering.Answer(f"answer to {question}") for question, _ in batch]

    monkeypatch.setitem(answering.ANSWERERS, "extractive", counting)
    # two short documents: with chunks of a whole document, k=2 and k=3 retrieve the same two
    space = SearchSpace(chunk_sizes=(64,), top_ks=(2, 3), search_types=("similarity", "mmr"))
    [chunk_config] = space.chunk_configs()
    chunks = build_chunks(DOCS, chunk_config)
    assert chunks.num_rows == 2
    answers = evaluate(chunks, QUESTIONS, space, chunk_config)
    assert answers.num_rows == 4 * 2
    distinct = {
        (q, tuple(ids))
        for q, ids in zip(
            answers["question_id"].to_pylist(),
            answers["retrieved_chunk_ids"].to_pylist(),
            strict=True,
        )
    }
    assert len(calls) == len(distinct) < answers.num_rows
    assert set(answers["answer"].to_pylist()) == {
        f"answer to {q}" for q in QUESTIONS["question"].to_pylist()
    }


def test_every_configuration_of_the_chunk_set_answers_every_question():
    space = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(4,), top_ks=(1, 2))
    [chunk_config] = space.chunk_configs()
    answers = evaluate(build_chunks(DOCS, chunk_config), QUESTIONS, space, chunk_config)
    by_config = answers.group_by("config_id").aggregate([("question_id", "count")])
    assert sorted(by_config["config_id"].to_pylist()) == sorted(
        c["config_id"] for c in space.configs(chunk_config)
    )
    assert set(by_config["question_id_count"].to_pylist()) == {2}
    texts = answers["answer"].to_pylist()
    assert any("9000" in a for a in texts) and any("90 days" in a for a in texts)
