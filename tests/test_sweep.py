import json

import pyarrow as pa
import pyarrow.compute as pc

from ragsweep.answering import answerers
from ragsweep.answering.answers import Answer
from ragsweep.core.schemas import read_table, write_table
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.evaluation.metrics import scored
from ragsweep.models import embedding
from ragsweep.retrieval import search
from ragsweep.sweep.space import SearchSpace, configs_table
from ragsweep.sweep.steps import build_chunks, evaluate, retrieve

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


def retrieved(space: SearchSpace, cache: EmbeddingCache) -> pa.Table:
    """Every configuration's retrievals, chunk set by chunk set as the pipeline's loop does."""
    tables = []
    for chunk_config in space.chunk_configs():
        chunks = build_chunks(DOCS, chunk_config, cache)
        tables.append(retrieve(chunks, QUESTIONS, space, chunk_config, cache))
    return pa.concat_tables(tables)


def test_configurations_that_retrieve_the_same_context_share_one_answer(monkeypatch):
    calls = []

    def counting(batch):
        calls.extend(batch)
        return [Answer(f"answer to {question}") for question, *_ in batch]

    monkeypatch.setitem(answerers.ANSWERERS, "extractive", counting)
    # two short documents: with chunks of a whole document, k=2 and k=3 retrieve the same two
    # chunk sets, and the sentence and token chunkers cut both documents the same way
    space = SearchSpace(
        chunkers=("sentence", "token"),
        chunk_sizes=(64,),
        top_ks=(2, 3),
        search_types=("similarity", "mmr"),
    )
    assert len(space.chunk_configs()) == 2
    answers, _ = evaluate(
        retrieved(space, EmbeddingCache()), QUESTIONS, space.all_configs(), "auto"
    )
    assert answers.num_rows == 2 * 4 * 2
    distinct = set(
        zip(answers["question_id"].to_pylist(), answers["context"].to_pylist(), strict=True)
    )
    # each question's two chunks in at most two orders (similarity, MMR), whichever chunk set
    assert len(calls) == len(distinct) <= 2 * 2 < answers.num_rows
    assert set(answers["answer"].to_pylist()) == {
        f"answer to {q}" for q in QUESTIONS["question"].to_pylist()
    }


def test_without_a_budget_every_configuration_answers_every_question():
    space = SearchSpace(chunk_sizes=(16, 24), chunk_overlaps=(4,), top_ks=(1, 2))
    answers, scores = evaluate(
        retrieved(space, EmbeddingCache()), QUESTIONS, space.all_configs(), "auto"
    )
    by_config = answers.group_by("config_id").aggregate([("question_id", "count")])
    assert sorted(by_config["config_id"].to_pylist()) == sorted(
        c["config_id"] for c in space.all_configs()
    )
    assert set(by_config["question_id_count"].to_pylist()) == {2}
    assert answers["answer"].null_count == 0 and set(answers["round"].to_pylist()) == {0}
    assert scores["answer_correctness"].null_count == 0
    texts = answers["answer"].to_pylist()
    assert any("9000" in a for a in texts) and any("90 days" in a for a in texts)


def test_a_sweep_embeds_each_distinct_text_once_per_model_and_a_rerun_none(tmp_path, monkeypatch):
    embedded: list[str] = []
    encode = embedding.encode
    monkeypatch.setattr(
        embedding, "encode", lambda model, texts: embedded.extend(texts) or encode(model, texts)
    )
    space = SearchSpace(chunk_sizes=(16, 24, 64), chunk_overlaps=(0, 4), top_ks=(1, 2))

    def sweep() -> list[str]:
        cache = EmbeddingCache(tmp_path)
        chunk_texts = []
        for chunk_config in space.chunk_configs():
            chunks = build_chunks(DOCS, chunk_config, cache)
            retrieve(chunks, QUESTIONS, space, chunk_config, cache)
            chunk_texts += chunks["text"].to_pylist()
        return chunk_texts

    chunk_texts = sweep()
    assert len(space.chunk_configs()) == 6 and len(chunk_texts) > len(set(chunk_texts))
    assert sorted(embedded) == sorted(set(chunk_texts) | set(QUESTIONS["question"].to_pylist()))
    embedded.clear()
    sweep()
    assert embedded == []


def test_one_ranking_per_search_setting_serves_every_top_k(monkeypatch):
    rankings = []
    rank = search.rank

    def counting(index, search_type, depth, **params):
        rankings.append((search_type, depth, params))
        return rank(index, search_type, depth, **params)

    import ragsweep.retrieval.store_search

    monkeypatch.setattr(ragsweep.retrieval.store_search, "rank", counting)
    space = SearchSpace(
        chunk_sizes=(16,),
        chunk_overlaps=(4,),
        top_ks=(1, 2, 3, 4),
        search_types=("similarity", "mmr", "hybrid"),
        mmr_lambdas=(0.5, 0.9),
    )
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache()
    retrievals = retrieve(
        build_chunks(DOCS, chunk_config, cache), QUESTIONS, space, chunk_config, cache
    )
    assert retrievals.num_rows == 4 * 4 * 2  # Top K x (similarity, mmr:0.5, mmr:0.9, hybrid)
    assert sorted(r[0] for r in rankings) == ["hybrid", "mmr", "mmr", "similarity"]
    assert {r[1] for r in rankings} == {4}


def test_retrievals_store_each_chunk_text_once_and_read_back_as_passages(tmp_path):
    space = SearchSpace(chunk_sizes=(16,), chunk_overlaps=(4,), top_ks=(1, 2, 3))
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache()
    chunks = build_chunks(DOCS, chunk_config, cache)
    path = write_table(
        retrieve(chunks, QUESTIONS, space, chunk_config, cache), tmp_path / "r", "retrievals"
    )
    retrievals = read_table(path, "retrievals")
    [stored] = retrievals["passages"].chunks
    assert len(stored.values.dictionary) == chunks.num_rows  # not once per retrieval
    texts = chunks["text"].to_pylist()
    for ids, passages in zip(
        retrievals["retrieved_chunk_ids"].to_pylist(),
        retrievals["passages"].to_pylist(),
        strict=True,
    ):
        assert passages == [texts[i] for i in ids]


GISKARD_OOS_ANSWER = "This question can not be answered by the context."

TYPED = pa.table(
    {
        "question_id": ["simple", "follow-up", "oos", "no-reference"],
        "question": [
            "Which port does the console use?",
            "And how long are they kept there?",
            "Is there a discount for students?",
            "How long does Pro keep backups?",
        ],
        "reference_answers": [["9000"], ["90 days"], [GISKARD_OOS_ANSWER], ["90 days"]],
        "reference_doc_ids": [["ports.md"], ["plans.md"], ["plans.md"], []],
        "reference_context": [None] * 4,
        "gold_spans": [
            [{"doc_id": "ports.md", "start": 43, "end": 77}],
            [{"doc_id": "plans.md", "start": 43, "end": 81}],
            [{"doc_id": "plans.md", "start": 0, "end": 42}],
            [],
        ],
        "question_type": ["simple", "conversational", "out of scope", "simple"],
        "topic": [None] * 4,
        "conversation_history": [
            "[]",
            json.dumps(
                [
                    {"role": "user", "content": "My company pays for backups on the Pro plan."},
                    {"role": "assistant", "content": "How can I help you with that?"},
                ]
            ),
            "[]",
            None,
        ],
    }
)


def test_question_types_are_retrieved_scored_and_broken_down_as_they_ask():
    space = SearchSpace(
        chunk_sizes=(16,), chunk_overlaps=(0,), top_ks=(1,), search_types=("similarity", "hybrid")
    )
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache()
    chunks = build_chunks(DOCS, chunk_config, cache)
    retrievals = retrieve(chunks, TYPED, space, chunk_config, cache)
    configs = space.all_configs()
    answers, scores = evaluate(retrievals, TYPED, configs, "auto")
    rows = {(r["config_id"], r["question_id"]): r for r in scores.to_pylist()}
    for config in configs:
        # the follow-up names neither plan nor backups: its history does
        [span] = retrievals.filter(
            pc.and_(
                pc.equal(retrievals["config_id"], config["config_id"]),
                pc.equal(retrievals["question_id"], "follow-up"),
            )
        )["retrieved_spans"].to_pylist()[0]
        assert span["doc_id"] == "plans.md" and span["start"] >= 42, config["search_type"]

        def row(question, config=config):
            return rows[(config["config_id"], question)]

        assert row("follow-up")["context_correctness"] == 1.0
        assert row("simple")["span_recall"] > 0 and row("simple")["span_precision"] > 0
        for question in ("oos", "no-reference"):  # left out of every retrieval metric
            assert [row(question)[m] for m in scored("retrieval")] == [None] * 4, question
        assert row("oos")["answer_correctness"] == 0.0  # the extractive answerer never refuses
        assert row("no-reference")["answer_correctness"] > 0
    board = build_board(scores, answers, TYPED, configs_table(configs))
    failed = {r["question_id"]: r["reason"] for r in board.failures.to_pylist()}
    assert failed["oos"] == "the question is out of scope and the answer does not refuse"
    breakdown = board.breakdown
    by_type = breakdown.filter(pc.equal(breakdown["dimension"], "question_type")).to_pylist()
    assert {r["value"] for r in by_type} == {"simple", "conversational", "out of scope"}
    for r in by_type:
        if r["value"] == "out of scope":
            assert r["questions"] == 1 and r["context_correctness"] is None
            assert r["answer_correctness"] == 0.0
        if r["value"] == "simple":
            assert r["questions"] == 2 and r["span_recall"] is not None
