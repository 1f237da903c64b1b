import numpy as np

from ragsweep.retrieval import mmr, rank_chunks, similarity


def unit(rows):
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_similarity_ranks_by_cosine_best_first():
    chunks = unit([[1, 0], [0, 1], [1, 1], [1, 0.1]])
    question = unit([[1, 0]])
    assert rank_chunks("similarity", question, chunks, 3).tolist() == [[0, 3, 2]]


def test_top_k_is_a_prefix_of_the_deeper_ranking():
    rng = np.random.default_rng(0)
    chunks, questions = unit(rng.normal(size=(50, 8))), unit(rng.normal(size=(5, 8)))
    deep = rank_chunks("mmr", questions, chunks, 10)
    for k in (1, 3, 5):
        assert (rank_chunks("mmr", questions, chunks, k) == deep[:, :k]).all()
    assert (
        rank_chunks("similarity", questions, chunks, 3)
        == similarity(questions @ chunks.T, chunks, 10)[:, :3]
    ).all()


def test_mmr_returns_less_redundant_chunks_than_similarity():
    # three near-copies of one passage, and one other passage that is still relevant
    chunks = unit([[1, 0.00, 0], [1, 0.01, 0], [1, 0.02, 0], [0.6, 0, 0.8]])
    question = unit([[1, 0, 0.3]])
    sims = question @ chunks.T
    by_similarity = similarity(sims, chunks, 2)[0]
    by_mmr = mmr(sims, chunks, 2)[0]

    def redundancy(picked):
        return float(chunks[picked[0]] @ chunks[picked[1]])

    assert set(by_similarity) <= {0, 1, 2}  # two near-copies
    assert 3 in by_mmr
    assert redundancy(by_mmr) < redundancy(by_similarity)


def test_depth_beyond_the_number_of_chunks_returns_every_chunk():
    chunks = unit([[1, 0], [0, 1]])
    assert rank_chunks("similarity", unit([[0, 1]]), chunks, 5).tolist() == [[1, 0]]
    assert rank_chunks("mmr", unit([[0, 1]]), chunks, 5).tolist() == [[1, 0]]
