"""How the pipeline's loops divide the work: chunk groups, document shards, shard vectors."""

import pyarrow as pa
import pytest

from ragsweep.core.schemas import read_table, write_table
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.sweep import fanout
from ragsweep.sweep.options import pipeline_arguments
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import (
    build_chunk_sets,
    build_chunks,
    embed_shard,
    retrieve,
    retrieve_group,
)

CONFIGS = [
    {"chunk_config_id": f"c{i}", "embedding_model": model}
    for i, model in enumerate(["b", "a", "b", "a", "b"])
]


def ids(items: list[dict]) -> list[list[str]]:
    return [[c["chunk_config_id"] for c in item["chunk_configs"]] for item in items]


def test_unbounded_parallelism_gives_each_chunk_config_its_own_branch():
    items = fanout.group_chunk_configs(CONFIGS, 0)
    assert [item["group"] for item in items] == [0, 1, 2, 3, 4]
    assert sorted(sum(ids(items), [])) == ["c0", "c1", "c2", "c3", "c4"]
    assert all(len(group) == 1 for group in ids(items))


def test_one_branch_holds_every_chunk_config_with_each_model_together():
    [item] = fanout.group_chunk_configs(CONFIGS, 1)
    assert [c["embedding_model"] for c in item["chunk_configs"]] == ["a", "a", "b", "b", "b"]
    assert ids([item]) == [["c1", "c3", "c0", "c2", "c4"]]  # plan order within a model


def test_bounded_parallelism_deals_nearly_equal_groups_and_never_an_empty_one():
    assert ids(fanout.group_chunk_configs(CONFIGS, 2)) == [["c1", "c3", "c0"], ["c2", "c4"]]
    assert len(fanout.group_chunk_configs(CONFIGS, 9)) == 5
    with pytest.raises(ValueError, match="groups must be 0"):
        fanout.group_chunk_configs(CONFIGS, -1)


def test_document_ranges_cover_every_document_once_in_shards_of_about_the_size():
    sizes = [10, 30, 5, 5, 40, 10, 20, 30]  # 150 bytes
    ranges = fanout.document_ranges(sizes, 50)
    assert len(ranges) == 3
    assert [r for a, b in ranges for r in range(a, b)] == list(range(len(sizes)))
    assert all(sum(sizes[a:b]) <= 70 for a, b in ranges)
    assert fanout.document_ranges(sizes, 0) == [(0, 8)]  # 0: never shard
    assert fanout.document_ranges(sizes, 150) == [(0, 8)]  # fits in one
    assert fanout.document_ranges([1000, 1], 10) == [(0, 1), (1, 2)]  # no more than documents
    assert fanout.document_ranges([5] * 4, 1) == [(0, 1), (1, 2), (2, 3), (3, 4)]


def documents(texts: list[str]) -> pa.Table:
    return pa.table({"doc_id": [f"d{i}.md" for i in range(len(texts))], "text": texts})


def test_shard_items_cross_chunk_configs_with_document_ranges_and_are_never_empty():
    docs = documents(["é" * 50, "b" * 100, "c" * 100])  # é: two bytes
    items = fanout.shard_items(CONFIGS[:2], docs, 120)
    assert len(items) == 2 * 3
    assert {(i["first"], i["stop"]) for i in items} == {(0, 1), (1, 2), (2, 3)}
    assert {i["shards"] for i in items} == {3}
    assert fanout.shard_items(CONFIGS[:2], docs, 0) == [fanout.NO_SHARD]
    assert fanout.shard_items(CONFIGS[:2], docs, 10_000) == [fanout.NO_SHARD]
    assert not fanout.is_shard(fanout.NO_SHARD) and all(map(fanout.is_shard, items))
    assert fanout.shard_documents(docs, items[1])["doc_id"].to_pylist() == ["d1.md"]
    with pytest.raises(ValueError, match="outside the 3 documents"):
        fanout.shard_documents(docs, {**items[0], "stop": 4})


DOCS = documents(
    [
        "Ports are opened by the admin. Each port is listed in the firewall table. "
        "A closed port refuses connections.",
        "Plans renew monthly. An annual plan is billed once. Refunds follow the policy.",
        "The release adds an export button. Exports are written as CSV files.",
    ]
)


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return SearchSpace(chunk_sizes=(16, 32), chunk_overlaps=(0,), top_ks=(1, 2))


def test_shard_vectors_serve_every_chunk_and_the_model_embeds_nothing_more(tmp_path, space):
    chunk_configs = space.chunk_configs()
    items = fanout.shard_items(chunk_configs, DOCS, 100)
    assert len(items) == 2 * 3
    for n, item in enumerate(items):
        shard_cache = EmbeddingCache()
        embed_shard(DOCS, item, shard_cache, EmbeddingCache(tmp_path / f"shard{n}"))
        assert shard_cache.encoded > 0
    merged = tmp_path / "merged"
    assert fanout.merge_folders([tmp_path / f"shard{n}" for n in range(6)], merged) == 6
    cache = EmbeddingCache(tmp_path / "cache", tiers=[merged])
    build_chunk_sets(DOCS, chunk_configs, cache, tmp_path / "chunks")
    assert cache.encoded == 0 and cache.from_tiers > 0
    unsharded = EmbeddingCache()
    for config in chunk_configs:
        alone = build_chunks(DOCS, config, unsharded)
        grouped = fanout.read_chunk_set(tmp_path / "chunks", config["chunk_config_id"])
        same = ["chunk_id", "doc_id", "start", "end", "text"]
        assert grouped.select(same).equals(alone.select(same))
        pairs = zip(grouped["embedding"].to_pylist(), alone["embedding"].to_pylist(), strict=True)
        for a, b in pairs:
            assert a == pytest.approx(b, abs=1e-5)


def test_chunk_sets_sharing_texts_embed_each_distinct_text_once(tmp_path):
    # Chunk sets are built one at a time, the vectors of earlier ones dropped: a text an
    # earlier set embedded is read back from the cache. It was embedded again (the cache's
    # own shards were never indexed): 3,413 texts embedded for 2,426 distinct ones on the
    # Click docs' six chunk sets.
    configs = SearchSpace(chunk_sizes=(16, 32), chunk_overlaps=(0, 4)).chunk_configs()
    cache = EmbeddingCache(tmp_path / "cache")
    build_chunk_sets(DOCS, configs, cache, tmp_path / "chunks")
    texts = [
        text
        for config in configs
        for text in fanout.read_chunk_set(tmp_path / "chunks", config["chunk_config_id"])[
            "text"
        ].to_pylist()
    ]
    assert len(set(texts)) < len(texts)  # the sets share texts
    assert cache.encoded == len(set(texts))
    assert cache.shards_read > 0


def test_an_empty_merge_is_an_empty_tier(tmp_path, space):
    merged = tmp_path / "merged"
    assert fanout.merge_folders([], merged) == 0
    cache = EmbeddingCache(tmp_path / "cache", tiers=[merged])
    build_chunk_sets(DOCS, space.chunk_configs()[:1], cache, tmp_path / "chunks")
    assert cache.encoded > 0 and cache.from_tiers == 0


def test_a_group_retrieves_as_its_chunk_sets_do_one_by_one(tmp_path, space):
    testset = pa.table(
        {"question_id": ["q1", "q2"], "question": ["Who opens ports?", "How are exports written?"]}
    )
    chunk_configs = space.chunk_configs()
    cache = EmbeddingCache(tmp_path / "cache")
    written = build_chunk_sets(DOCS, chunk_configs, cache, tmp_path / "chunks", testset)
    assert written == [c["chunk_config_id"] for c in chunk_configs]
    # the questions' vectors travel with the chunks: retrieval embeds nothing, from no cache
    reader = EmbeddingCache(tiers=[fanout.question_vectors(tmp_path / "chunks")])
    grouped = retrieve_group(tmp_path / "chunks", testset, space, chunk_configs, reader)
    assert reader.encoded == 0 and reader.from_tiers == 2
    alone = [
        retrieve(
            fanout.read_chunk_set(tmp_path / "chunks", c["chunk_config_id"]),
            testset,
            space,
            c,
            cache,
        )
        for c in chunk_configs
    ]
    keep = ["config_id", "question_id", "retrieved_chunk_ids", "retrieved_doc_ids"]
    assert grouped.select(keep).equals(pa.concat_tables(alone).select(keep))
    assert grouped.num_rows == len(space.all_configs()) * 2
    # one artifact for the group, though each chunk set has its own passages
    written = read_table(write_table(grouped, tmp_path / "retrievals", "retrievals"), "retrievals")
    assert written["passages"].to_pylist() == grouped["passages"].to_pylist()


def test_a_chunks_folder_missing_a_set_names_it(tmp_path):
    write_table(
        pa.table(
            {
                "chunk_id": [0],
                "doc_id": ["d"],
                "start": [0],
                "end": [1],
                "text": ["x"],
                "embedding": [[1.0]],
            }
        ),
        fanout.chunk_set_path(tmp_path, "c0"),
        "chunks",
    )
    assert fanout.read_chunk_set(tmp_path, "c0").num_rows == 1
    with pytest.raises(Exception, match="c9.arrow"):
        fanout.read_chunk_set(tmp_path, "c9")


def test_a_negative_shard_size_is_a_clear_error():
    from ragsweep.core.errors import RagsweepError
    from ragsweep.sweep.settings import RunSettings

    with pytest.raises(RagsweepError, match=r"--embedding-shard-bytes\): must be 0"):
        RunSettings("docs", "testset.json", embedding_shard_bytes=-1)
    assert (
        pipeline_arguments(RunSettings("docs", "t.json", embedding_shard_bytes=0))[
            "embedding_shard_bytes"
        ]
        == 0
    )
    with pytest.raises(ValueError, match="shard bytes must be 0"):
        fanout.shard_items(CONFIGS, documents(["a"]), -1)


def test_question_blocks_cross_every_group_and_cover_each_question_once():
    groups = fanout.group_chunk_configs(CONFIGS, 2)
    items = fanout.retrieval_items(groups, 3, 7)
    assert [(i["group"], i["block"], i["blocks"]) for i in items] == [
        (g, b, 3) for g in (0, 1) for b in range(3)
    ]
    assert ids(items) == [ids(groups)[0]] * 3 + [ids(groups)[1]] * 3
    testset = pa.table({"question_id": [f"q{n}" for n in range(7)]})
    blocks = [fanout.question_block(testset, i)["question_id"].to_pylist() for i in items[:3]]
    assert [len(b) for b in blocks] == [3, 2, 2]
    assert sum(blocks, []) == testset["question_id"].to_pylist()
    assert fanout.retrieval_items(groups, 1, 7) == groups  # one block: the groups unchanged
    assert fanout.question_block(testset, groups[0]).equals(testset)
    assert len(fanout.retrieval_items(groups, 9, 2)) == 2 * 2  # never an empty block
    with pytest.raises(ValueError, match="question blocks must be 1"):
        fanout.retrieval_items(groups, 0, 7)


def test_each_question_block_names_its_collections_apart_when_the_run_has_an_id():
    [one, two] = fanout.retrieval_items(fanout.group_chunk_configs(CONFIGS[:1], 1), 2, 4)
    names = {fanout.block_run_id("20261206-0600", item) for item in (one, two)}
    assert names == {"20261206-0600-block0", "20261206-0600-block1"}
    assert fanout.block_run_id("20261206-0600", {"group": 0}) == "20261206-0600"  # unsplit
    assert fanout.block_run_id("", one) == ""  # no id: each step's collections are random


def test_a_split_run_lists_every_chunk_set_as_a_shard_even_below_the_shard_size():
    items = fanout.shard_items(CONFIGS[:2], DOCS, 0, whole=True)
    assert [(i["chunk_config"]["chunk_config_id"], i["first"], i["stop"]) for i in items] == [
        ("c0", 0, 3),
        ("c1", 0, 3),
    ]
    assert all(map(fanout.is_shard, items))
    assert fanout.shard_items(CONFIGS[:2], documents([]), 0, whole=True) == [fanout.NO_SHARD]


def test_retrieval_split_by_question_blocks_equals_the_whole_and_embeds_nothing_twice(
    tmp_path, space
):
    testset = pa.table(
        {
            "question_id": ["q1", "q2", "q3"],
            "question": ["Who opens ports?", "How are exports written?", "When do plans renew?"],
        }
    )
    chunk_configs = space.chunk_configs()
    [group] = fanout.group_chunk_configs(chunk_configs, 1)
    keep = ["config_id", "question_id", "retrieved_chunk_ids", "retrieved_doc_ids", "passages"]

    whole_cache = EmbeddingCache(tmp_path / "whole-cache")
    build_chunk_sets(DOCS, chunk_configs, whole_cache, tmp_path / "whole", testset)
    reader = EmbeddingCache(tiers=[fanout.question_vectors(tmp_path / "whole")])
    whole = retrieve_group(tmp_path / "whole", testset, space, chunk_configs, reader)

    # as the pipeline runs a split: the shard loop embeds each chunk set once, then each
    # (group, block) branch rebuilds the chunk sets from those vectors and retrieves its block
    for n, item in enumerate(fanout.shard_items(chunk_configs, DOCS, 0, whole=True)):
        embed_shard(DOCS, item, EmbeddingCache(), EmbeddingCache(tmp_path / f"shard{n}"))
    merged = tmp_path / "merged"
    fanout.merge_folders([tmp_path / f"shard{n}" for n in range(len(chunk_configs))], merged)
    parts, questions_embedded = [], 0
    for item in fanout.retrieval_items([group], 2, testset.num_rows):
        block = fanout.question_block(testset, item)
        folder = tmp_path / f"block{item['block']}"
        cache = EmbeddingCache(tmp_path / f"cache{item['block']}", tiers=[merged])
        build_chunk_sets(DOCS, item["chunk_configs"], cache, folder, block)
        questions_embedded += cache.encoded  # no chunk: only the block's questions
        reader = EmbeddingCache(tiers=[fanout.question_vectors(folder)])
        parts.append(retrieve_group(folder, block, space, item["chunk_configs"], reader))
        assert reader.encoded == 0
    assert questions_embedded == testset.num_rows  # one model, one query prefix

    def ordered(table: pa.Table) -> pa.Table:
        order = [("config_id", "ascending"), ("question_id", "ascending")]
        return table.select(keep).sort_by(order)

    split = pa.concat_tables(parts)
    assert split.num_rows == whole.num_rows == len(space.all_configs()) * testset.num_rows
    # the same rows; each block's passages are a dictionary of its own retrieved chunks
    assert ordered(split).to_pylist() == ordered(whole).to_pylist()
