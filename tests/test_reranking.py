"""Reranking as a sweep dimension: the space's ``rerankers``, a cross-encoder built here
from a tiny random BERT, a scripted ``/rerank`` endpoint, the retrieve step, and a run
through kfp.local with both rerankers beside none on the leaderboard."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from builders import tiny_cross_encoder
from conftest import TEST_API_KEY
from scripted_llm import Step, free_port, overlap_score

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models.llm import Endpoint
from ragsweep.retrieval.reranking import EndpointReranker, Reranking, get_reranker
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import build_chunks, retrieve

ROOT = Path(__file__).resolve().parent.parent
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")

QUESTIONS = ["which port does the admin console use", "how long are backups kept"]
TEXTS = [
    "The admin console uses port 9000.",  # 0
    "Backups are kept for 90 days on the Pro plan.",  # 1
    "Tidewater listens on port 8443.",  # 2
    "The console shows how long backups are kept and which port is used.",  # 3
]


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory) -> Path:
    """A tiny cross-encoder folder with random weights and these texts' words."""
    return tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"), QUESTIONS + TEXTS)


@pytest.fixture
def reranker(llm_server):
    """The scripted server as the reranking endpoint (RAGSWEEP_RERANK_*), answering at once
    instead of backing off."""
    endpoint = Endpoint("reranker", llm_server.url, TEST_API_KEY, role="RERANK")
    return EndpointReranker("rerank:reranker", endpoint, backoff_s=0.0, max_retries=2)


# --- the search space --------------------------------------------------------------------


def test_configurations_without_a_reranker_keep_their_ids_labels_and_sweep_key():
    # values computed on main before rerankers existed (as tests/test_sweep_stores.py guards)
    space = SearchSpace()
    first = space.all_configs()[0]
    assert first["config_id"] == "6cffbb11aa7a"
    assert first["label"] == "sentence-64/16 all-MiniLM-L6-v2 k=1 similarity extractive"
    assert not {"reranker", "rerank_fetch_k"} & set(first)
    assert not {"rerankers", "rerank_fetch_k"} & set(space.to_dict())
    assert RunSettings("docs", "testset.json").record()["sweep_key"] == "0dcf3e86d319"
    explicit = SearchSpace.from_dict({"rerankers": ["none"], "rerank_fetch_k": 20})
    assert explicit.all_configs() == space.all_configs()


def test_a_reranker_doubles_the_grid_and_is_named_in_the_id_and_label(cross_encoder):
    space = SearchSpace.from_dict(
        {
            "chunk_sizes": [64],
            "top_ks": [3],
            "search_types": ["similarity"],
            "rerankers": ["none", "rerank:bge-reranker", f"cross-encoder:{cross_encoder}"],
            "rerank_fetch_k": 10.0,  # a JSON number from a pipeline parameter
        }
    )
    configs = space.all_configs()
    assert [c["label"].split(" k=3 ")[1] for c in configs] == [
        "similarity extractive",
        "similarity rerank=rerank:bge-reranker@10 extractive",
        f"similarity rerank=cross-encoder:{cross_encoder.name}@10 extractive",
    ]
    assert len({c["config_id"] for c in configs}) == 3
    assert configs[1]["reranker"] == "rerank:bge-reranker" and configs[1]["rerank_fetch_k"] == 10
    assert SearchSpace.from_dict(space.to_dict()) == space
    # the space holding exactly one configuration gives it back, id included
    for config in configs:
        assert SearchSpace.of_config(config).all_configs() == [config]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"rerankers": ["colbert"]}, "field 'rerankers': unknown reranker 'colbert'; choose"),
        ({"rerankers": ["rerank:"]}, "field 'rerankers': unknown reranker 'rerank:'"),
        ({"rerankers": ["cross-encoder:/nowhere"]}, "'cross-encoder:/nowhere': /nowhere is not"),
        (
            {"rerankers": ["rerank:m"], "top_ks": [5, 30]},
            "field 'rerank_fetch_k': 20 candidates cannot fill the largest Top K \\(30\\)",
        ),
        ({"rerank_fetch_k": 0}, "field 'rerank_fetch_k': 0 < 1"),
    ],
)
def test_reranker_mistakes_are_clear_errors(data, message):
    with pytest.raises(RagsweepError, match=message):
        SearchSpace.from_dict(data, source="space.yaml")


# --- the endpoint ------------------------------------------------------------------------


def test_the_endpoint_orders_the_candidates_by_its_scores_and_scores_each_pair_once(
    llm_server, reranker
):
    reranking = Reranking(get=lambda name: reranker)
    candidates = np.array([[2, 1, 0, 3], [0, 3, -1, -1]])
    ranking, ms = reranking.rerank("rerank:reranker", QUESTIONS, TEXTS, candidates)
    for q, row in enumerate(candidates.tolist()):
        found = [i for i in row if i >= 0]
        want = sorted(found, key=lambda i: -overlap_score(QUESTIONS[q], TEXTS[i]))
        assert ranking.ids[q].tolist() == want + [-1] * (4 - len(found))
    assert ranking.ids[0].tolist()[:2] == [0, 3]  # the console's port before the other port
    assert (ms > 0).all()
    first = llm_server.reranked[0]
    assert set(first) == {"model", "query", "documents", "top_n"}
    assert first["model"] == "reranker" and first["top_n"] == len(first["documents"])
    assert set(llm_server.authorizations) == {f"Bearer {TEST_API_KEY}"}
    assert len(llm_server.reranked) == 2  # one request per question

    # the same pairs again, in another order, and one new pair: only the new pair is sent
    again, _ = reranking.rerank("rerank:reranker", QUESTIONS, TEXTS, np.array([[3, 0], [1, 0]]))
    assert again.ids.tolist() == [[0, 3], [1, 0]]
    assert [r["documents"] for r in llm_server.reranked[2:]] == [[TEXTS[1]]]


def test_the_endpoint_is_retried_and_its_failure_names_it_without_the_key(llm_server, reranker):
    llm_server.rerank_script.extend([Step(status=429, headers={"Retry-After": "0"}), Step()])
    [(scores, _)] = reranker.score([(QUESTIONS[0], TEXTS)])
    assert scores.tolist() == [overlap_score(QUESTIONS[0], t) for t in TEXTS]
    assert len(llm_server.reranked) == 2

    llm_server.rerank_script.extend([Step(status=503)] * 3)
    with pytest.raises(RagsweepError) as failed:
        reranker.score([(QUESTIONS[0], TEXTS)])
    message = str(failed.value)
    assert message.startswith(f"reranker rerank:reranker at {llm_server.url}/rerank failed")
    assert "after 3 call(s): HTTP 503" in message and TEST_API_KEY not in message

    llm_server.rerank_script.append(Step(status=401))  # not retried
    with pytest.raises(RagsweepError, match="after 1 call\\(s\\): HTTP 401"):
        reranker.score([(QUESTIONS[0], TEXTS)])
    llm_server.rerank_script.append(Step(body='{"results": [{"index": 0}]}'))
    with pytest.raises(RagsweepError, match="malformed response"):
        reranker.score([(QUESTIONS[0], TEXTS)])


def test_the_endpoint_comes_from_rerank_variables_else_the_llms(monkeypatch):
    for name in ("RERANK", "LLM"):
        monkeypatch.delenv(f"RAGSWEEP_{name}_BASE_URL", raising=False)
        monkeypatch.delenv(f"RAGSWEEP_{name}_API_KEY", raising=False)
    with pytest.raises(RagsweepError, match="no endpoint; set RAGSWEEP_RERANK_BASE_URL"):
        get_reranker("rerank:bge")
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", "http://llm:8000/v1")
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", "llm-key")
    assert get_reranker("rerank:bge").endpoint.base_url == "http://llm:8000/v1"
    monkeypatch.setenv("RAGSWEEP_RERANK_BASE_URL", "http://reranker:8000/v1/")
    own = get_reranker("rerank:bge").endpoint
    assert (own.base_url, own.api_key) == ("http://reranker:8000/v1", "")  # no key sent on
    dead = f"http://user:{TEST_API_KEY}@127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("RAGSWEEP_RERANK_BASE_URL", dead)
    monkeypatch.setenv("RAGSWEEP_RERANK_API_KEY", TEST_API_KEY)
    reranker = get_reranker("rerank:bge")
    reranker.max_retries, reranker.backoff_s = 1, 0.0
    with pytest.raises(RagsweepError, match="ConnectError") as failed:
        reranker.score([("q", ["a"])])
    assert TEST_API_KEY not in str(failed.value) and "127.0.0.1" in str(failed.value)


# --- the cross-encoder -------------------------------------------------------------------


def test_the_cross_encoder_orders_the_candidates_by_its_own_scores(cross_encoder):
    from sentence_transformers import CrossEncoder

    name = f"cross-encoder:{cross_encoder}"
    candidates = np.array([[0, 1, 2, 3], [3, 2, 1, 0]])
    ranking, ms = Reranking().rerank(name, QUESTIONS, TEXTS, candidates)
    model = CrossEncoder(str(cross_encoder), local_files_only=True)
    for q in range(2):
        scores = model.predict([(QUESTIONS[q], t) for t in TEXTS], show_progress_bar=False)
        assert ranking.ids[q].tolist() == np.argsort(-scores, kind="stable").tolist()
    assert (ms > 0).all()


class Recording:
    """A reranker that scores a text by its length and records what it was asked."""

    def __init__(self, whole_lists: bool) -> None:
        self.name, self.whole_lists, self.asked = "recording", whole_lists, []

    def score(self, items):
        self.asked += [(question, list(texts)) for question, texts in items]
        return [(np.array([float(len(t)) for t in texts]), 1.0) for _, texts in items]


def test_a_cross_encoder_scores_each_questions_candidates_together_every_time():
    """A cross-encoder's scores depend on the batch (a pattern's script scores a question's
    candidates in one call): a candidate list is scored whole, its texts once and in the
    search's order, and reused only for the same list; an endpoint gets only new pairs."""
    lists = Recording(whole_lists=True)
    reranking = Reranking(get=lambda name: lists)
    first, ms = reranking.rerank("r", QUESTIONS, TEXTS, np.array([[2, 1, 0], [0, -1, -1]]))
    assert first.ids.tolist() == [[1, 0, 2], [0, -1, -1]]  # longest text first
    assert ms.tolist() == [1.0, 1.0]  # each question's call
    overlapping = np.array([[3, 2, 1], [0, -1, -1]])  # a new list for the first question
    reranking.rerank("r", QUESTIONS, TEXTS + [TEXTS[2]], np.array([[4, 2, 1], [0, -1, -1]]))
    reranking.rerank("r", QUESTIONS, TEXTS, overlapping)
    assert lists.asked == [
        (QUESTIONS[0], [TEXTS[2], TEXTS[1], TEXTS[0]]),
        (QUESTIONS[1], [TEXTS[0]]),
        (QUESTIONS[0], [TEXTS[2], TEXTS[1]]),  # a duplicate text once
        (QUESTIONS[0], [TEXTS[3], TEXTS[2], TEXTS[1]]),  # whole, though two were scored
    ]
    pairs = Recording(whole_lists=False)
    reranking = Reranking(get=lambda name: pairs)
    reranking.rerank("r", QUESTIONS, TEXTS, np.array([[2, 1, 0], [0, -1, -1]]))
    reranking.rerank("r", QUESTIONS, TEXTS, overlapping)
    assert pairs.asked[-1:] == [(QUESTIONS[0], [TEXTS[3]])]


def test_a_folder_that_holds_no_cross_encoder_is_a_clear_error(tmp_path):
    with pytest.raises(RagsweepError, match=f"reranker cross-encoder:{tmp_path}: cannot load"):
        get_reranker(f"cross-encoder:{tmp_path}")


# --- the retrieve step -------------------------------------------------------------------

DOCS = pa.table(
    {
        "doc_id": [f"d{i}.md" for i in range(len(TEXTS))],
        "source": [f"d{i}.md" for i in range(len(TEXTS))],
        "format": ["md"] * len(TEXTS),
        "text": TEXTS,
    }
)
TESTSET = pa.table(
    {
        "question_id": ["q1", "q2"],
        "question": QUESTIONS,
        "reference_answers": [["9000"], ["90 days"]],
        "reference_doc_ids": [["d0.md"], ["d1.md"]],
    }
)


def test_retrieval_reranks_the_searchs_first_candidates_then_takes_top_k(
    llm_server, tmp_path, cross_encoder
):
    space = SearchSpace.from_dict(
        {
            "chunk_sizes": [64],
            "top_ks": [1, 2],
            "search_types": ["similarity", "mmr"],
            "rerankers": ["none", "rerank:reranker", f"cross-encoder:{cross_encoder}"],
            "rerank_fetch_k": 4,
        }
    )
    [chunk_config] = space.chunk_configs()
    cache = EmbeddingCache(str(tmp_path / "cache"))
    chunks = build_chunks(DOCS, chunk_config, cache)
    table = retrieve(chunks, TESTSET, space, chunk_config, cache)
    configs = {c["config_id"]: c for c in space.configs(chunk_config)}
    rows = table.to_pylist()
    assert len(rows) == 2 * 2 * 3 * 2  # top_ks x searches x rerankers x questions
    texts = chunks["text"].to_pylist()
    for row in rows:
        config = configs[row["config_id"]]
        question = QUESTIONS[int(row["question_id"][1]) - 1]
        if config.get("reranker") == "rerank:reranker":
            # all four chunks are candidates: the top k by the endpoint's scores
            best = sorted(range(4), key=lambda i: -overlap_score(question, texts[i]))
            assert row["retrieved_chunk_ids"] == best[: config["top_k"]]
        if "reranker" in config:
            assert row["rerank_latency_ms"] > 0
        else:
            assert row["rerank_latency_ms"] is None
        assert row["recall_vs_exact"] == 1.0
    # every (question, chunk) pair scored once, though six configurations read the endpoint
    sent = [(r["query"], d) for r in llm_server.reranked for d in r["documents"]]
    assert len(sent) == len(set(sent)) == 2 * 4


# --- the pipeline ------------------------------------------------------------------------


def test_a_run_sweeps_none_and_both_rerankers_through_kfp_local(
    llm_server, tmp_path, cross_encoder
):
    runs = tmp_path / "runs"
    result = subprocess.run(
        [
            RAGSWEEP, "run", "--docs", str(ROOT / "examples" / "docs"),
            "--testset", str(ROOT / "examples" / "testset.jsonl"), "--max-questions", "8",
            "--chunk-sizes", "128", "--top-k", "3", "--search-types", "similarity",
            "--rerankers", f"none,rerank:reranker,cross-encoder:{cross_encoder}",
            "--output", str(runs), "--no-store",
        ],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    [run_dir] = runs.iterdir()
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard")
    by_reranker = {r["reranker"]: r for r in board.to_pylist()}
    assert set(by_reranker) == {"none", "rerank:reranker", f"cross-encoder:{cross_encoder}"}
    assert by_reranker["none"]["rerank_latency_p50_ms"] is None
    assert by_reranker["none"]["rerank_fetch_k"] is None
    for name in ("rerank:reranker", f"cross-encoder:{cross_encoder}"):
        assert by_reranker[name]["rerank_latency_p50_ms"] > 0
        assert by_reranker[name]["rerank_fetch_k"] == 20
        assert "rerank=" in by_reranker[name]["label"]
    asked = {r["query"] for r in llm_server.reranked}
    assert len(asked) == 8  # one request per question: the endpoint was really used
    results = read_table(run_dir / "results.arrow", "results")
    assert results["rerank_latency_ms"].null_count == 8  # none's rows only


def test_a_dead_rerank_endpoint_stops_the_run_before_it_starts_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSWEEP_RERANK_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("RAGSWEEP_RERANK_API_KEY", TEST_API_KEY)
    result = subprocess.run(
        [
            RAGSWEEP, "run", "--docs", str(ROOT / "examples" / "docs"),
            "--testset", str(ROOT / "examples" / "testset.jsonl"),
            "--rerankers", "none,rerank:bge", "--output", str(tmp_path / "runs"),
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and TEST_API_KEY not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "rerank endpoint http://127.0.0.1:" in line and "unreachable" in line
    assert not (tmp_path / "runs").exists()
