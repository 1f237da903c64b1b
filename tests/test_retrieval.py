import numpy as np

from ragsweep.retrieval.search import BM25, Index, rank_chunks
from ragsweep.retrieval.vector_stores import IndexSpec, open_store


def unit(rows):
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def index(questions, chunks, question_texts=None, chunk_texts=None):
    store = open_store("memory", "test")
    store.create(unit(chunks), chunk_texts or [""] * len(chunks), IndexSpec())
    return Index(
        store=store,
        question_vectors=unit(questions),
        chunk_vectors=unit(chunks),
        questions=question_texts or [""] * len(questions),
        chunk_texts=chunk_texts or [""] * len(chunks),
    )


def test_similarity_ranks_by_cosine_best_first():
    idx = index([[1, 0]], [[1, 0], [0, 1], [1, 1], [1, 0.1]])
    assert rank_chunks(idx, "similarity", 3).tolist() == [[0, 3, 2]]


def test_every_top_k_is_a_prefix_of_the_deepest_ranking():
    rng = np.random.default_rng(0)
    idx = index(rng.normal(size=(5, 8)), rng.normal(size=(50, 8)))
    for search_type in ("similarity", "mmr", "hybrid"):
        deep = rank_chunks(idx, search_type, 10)
        for k in (1, 3, 5):
            assert (rank_chunks(idx, search_type, k) == deep[:, :k]).all(), search_type


def test_mmr_returns_less_redundant_chunks_than_similarity():
    # three near-copies of one passage, and one other passage that is still relevant
    chunks = unit([[1, 0.00, 0], [1, 0.01, 0], [1, 0.02, 0], [0.6, 0, 0.8]])
    idx = index([[1, 0, 0.3]], chunks)
    by_similarity = rank_chunks(idx, "similarity", 2)[0]
    by_mmr = rank_chunks(idx, "mmr", 2)[0]

    def redundancy(picked):
        return float(chunks[picked[0]] @ chunks[picked[1]])

    assert set(by_similarity) <= {0, 1, 2}  # two near-copies
    assert 3 in by_mmr
    assert redundancy(by_mmr) < redundancy(by_similarity)


def test_mmr_with_lambda_one_is_plain_similarity():
    rng = np.random.default_rng(1)
    idx = index(rng.normal(size=(4, 6)), rng.normal(size=(30, 6)))
    assert (rank_chunks(idx, "mmr", 5, mmr_lambda=1.0) == rank_chunks(idx, "similarity", 5)).all()


def test_hybrid_finds_the_chunk_with_the_exact_rare_term_that_vectors_miss():
    texts = [
        "Sync errors are shown in the activity panel.",
        "The desktop client reports sync problems in a banner.",
        "Error TW-4471 means the storage quota is exceeded.",
    ]
    # the vectors favour the two generic chunks; only the keywords know TW-4471
    idx = index([[1, 0.2]], [[1, 0.1], [1, 0.15], [0.2, 1]], ["What does TW-4471 mean?"], texts)
    assert 2 not in rank_chunks(idx, "similarity", 2)[0]
    assert rank_chunks(idx, "hybrid", 2)[0].tolist()[0] == 2


def test_bm25_scores_rarer_matching_terms_higher_and_unmatched_zero():
    scores = (
        BM25(["retention is 30 days", "backup", "days days days", "nothing relevant"])
        .scores(["backup retention days"])
        .toarray()
    )
    assert scores.shape == (1, 4)
    assert scores[0, 3] == 0
    assert scores[0, 0] > scores[0, 2]  # two distinct terms beat one repeated term


def test_depth_beyond_the_number_of_chunks_returns_every_chunk():
    idx = index([[0, 1]], [[1, 0], [0, 1]], ["q"], ["a", "b"])
    for search_type in ("similarity", "mmr", "hybrid"):
        assert sorted(rank_chunks(idx, search_type, 5)[0].tolist()) == [0, 1]


GERMAN = [
    "Die Synchronisierung läuft im Hintergrund und zeigt Fehler im Aktivitätsbereich.",
    "Der Desktop-Client meldet Probleme bei der Synchronisierung in einem Banner.",
    "Die Aufbewahrungsfrist für gelöschte Dateien beträgt 30 Tage.",
]


def test_bm25_finds_a_german_rare_term_whatever_its_case_and_accents():
    for query in ("Wie lange ist die Aufbewahrungsfrist?", "AUFBEWAHRUNGSFRIST geloschte Dateien"):
        scores = BM25(GERMAN).scores([query]).toarray()[0]
        assert scores.argmax() == 2 and scores[1] == 0  # no German stop words: "die" counts


def test_hybrid_finds_the_german_chunk_with_the_rare_term_that_vectors_miss():
    idx = index(
        [[1, 0.2]], [[1, 0.1], [1, 0.15], [0.2, 1]], ["Was ist die Aufbewahrungsfrist?"], GERMAN
    )
    assert 2 not in rank_chunks(idx, "similarity", 2)[0]
    assert rank_chunks(idx, "hybrid", 2)[0].tolist()[0] == 2


def test_bm25_matches_chinese_queries_on_character_pairs():
    chunks = ["默认端口是8443。", "管理控制台使用9000端口。", "备份保留30天。"]
    scores = BM25(chunks).scores(["管理控制台用哪个端口？"]).toarray()[0]
    assert scores.argmax() == 1 and scores[2] == 0
