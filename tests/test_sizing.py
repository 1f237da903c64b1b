"""The heavy steps' memory, estimated from the corpus before the sweep, and the check that
refuses a corpus too large for a step's limit (ragsweep/sweep/sizing.py)."""

import pyarrow as pa
import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.sweep import fanout, sizing
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import SearchSpace

MIB = sizing.MIB


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2GB", 2_000_000_000),
        ("1500MB", 1_500_000_000),
        ("4Gi", 4 << 30),
        ("512MiB", 512 << 20),
        ("6gi", 6 << 30),
        ("1.5G", 1_500_000_000),
        ("", None),
    ],
)
def test_sizes_read_as_people_and_kubernetes_write_them(text, size):
    assert sizing.parse_size(text) == size


def test_a_size_that_is_not_one_is_a_clear_error_naming_the_option():
    with pytest.raises(RagsweepError, match=r"--memory-limit\): '2 gigs' is not a size like 2GB"):
        RunSettings(docs="docs", memory_limit="2 gigs")
    with pytest.raises(RagsweepError, match="'0MB' is not a size"):
        sizing.parse_size("0MB")
    assert sizing.step_limits("chunk_embed=6Gi, retrieve=4Gi") == {
        "chunk_embed": 6 << 30,
        "retrieve": 4 << 30,
    }


def test_chunks_are_each_documents_tokens_over_the_stride_rounded_up():
    # 4 bytes a token: 400 bytes are 100 tokens, 3 chunks of 40 (stride 40); with an overlap
    # of 8, (100 - 8) / 32 -> 3; an empty document makes none, a short one one
    assert sizing.estimated_chunks([400], 40, 0, 4.0) == 3
    assert sizing.estimated_chunks([400, 0, 8], 40, 8, 4.0) == 3 + 1
    tokens = "one two three four five six seven eight".split()
    texts = pa.array(["one two three four", "five six seven eight", ""])
    assert sizing.bytes_per_token(texts, str.split) == pytest.approx(
        len(" ".join(tokens[:4]).encode() + " ".join(tokens[4:]).encode()) / 8
    )


@pytest.mark.parametrize(
    ("documents", "chunks", "chunk_embed", "retrieve"),
    [(10_000, 161_587, 624, 542), (100_000, 1_614_406, 903, 856)],
)
def test_the_benchmarks_synthetic_corpus_is_estimated_at_its_measured_peaks(
    documents, chunks, chunk_embed, retrieve
):
    """The constants reproduce the figures they were read from (benchmarks/README.md,
    "Growth": the synthetic corpus at 10,000 and 100,000 documents of ~2,660 bytes, 64-token
    chunks, 1,000 questions, 6 configurations in one group): within 5% of each peak."""
    space = SearchSpace(
        chunk_sizes=(64,),
        chunk_overlaps=(0,),
        top_ks=(1, 10),
        search_types=("similarity", "mmr", "hybrid"),
        embedding_models=("openai:hashed-words",),
    )
    assert len(space.all_configs()) == 6
    items = fanout.retrieval_items(fanout.group_chunk_configs(space.chunk_configs(), 1), 1, 1_000)
    per_token = {"openai:hashed-words": 2.65}
    peaks = sizing.estimate_peaks([2_660] * documents, items, [], 1_000, space, per_token)
    by_step = {p.step: p.bytes / MIB for p in peaks}
    assert peaks[0].chunks == pytest.approx(chunks, rel=0.02)
    assert by_step["chunk_embed"] == pytest.approx(chunk_embed, rel=0.05)
    assert by_step["retrieve"] == pytest.approx(retrieve, rel=0.05)


def test_an_embedding_shard_is_estimated_at_its_measured_peak():
    """benchmarks/README.md, "At scale" (2026-12-01): the 10,000 documents' 26.6 MB in two
    shards of the 20 MB default, ~80,800 chunks each, peaked at 1,115 MB."""
    space = SearchSpace(chunk_sizes=(64,), chunk_overlaps=(0,), embedding_models=("openai:e",))
    configs = space.chunk_configs()
    docs = pa.table({"text": ["x" * 2_660] * 10_000})
    shards = fanout.shard_items(configs, docs, fanout.DEFAULT_SHARD_BYTES)
    assert len(shards) == 2
    peaks = sizing.estimate_peaks([2_660] * 10_000, [], shards, 1_000, space, {"openai:e": 2.65})
    assert [p.bytes / MIB for p in peaks] == pytest.approx([1_115, 1_115], rel=0.05)


def peaks_of(blocks: int, questions: int = 200, shard_bytes: int = 0) -> list[sizing.Peak]:
    space = SearchSpace(chunk_sizes=(64,), chunk_overlaps=(0,), top_ks=(1, 3))
    configs = space.chunk_configs()
    sizes = [4_000] * 2_000  # 8 MB at 4 bytes a token: 2,000 x 16 chunks
    items = fanout.retrieval_items(fanout.group_chunk_configs(configs, 1), blocks, questions)
    docs = pa.table({"text": ["x" * 4_000] * 2_000})
    shards = fanout.shard_items(configs, docs, shard_bytes, whole=blocks > 1)
    per_token = {configs[0]["embedding_model"]: 4.0}
    return sizing.estimate_peaks(sizes, items, shards, questions, space, per_token)


def test_each_step_is_the_base_plus_its_chunks_and_rows_at_the_measured_costs():
    configs = len(SearchSpace(chunk_sizes=(64,), chunk_overlaps=(0,), top_ks=(1, 3)).all_configs())
    unsplit = {p.step: p for p in peaks_of(1)}
    assert sorted(unsplit) == ["chunk_embed", "retrieve"]  # nothing sharded: no embed_shard
    chunks = 2_000 * 16
    base, per_chunk = sizing.BASE, sizing.PER_CHUNK
    assert unsplit["chunk_embed"].bytes == base["chunk_embed"] + chunks * per_chunk["chunk_embed"]
    rows = 200 * configs
    assert unsplit["retrieve"].bytes == (
        base["retrieve"] + chunks * per_chunk["retrieve"] + rows * sizing.RETRIEVE_PER_ROW
    )
    split = [p for p in peaks_of(4) if p.step == "retrieve"]
    assert [p.rows for p in split] == [50 * configs] * 4  # each block holds a quarter
    [shard] = [p for p in peaks_of(4) if p.step == "embed_shard"]  # a split embeds in shards
    assert shard.bytes == base["embed_shard"] + chunks * per_chunk["embed_shard"]
    assert len([p for p in peaks_of(1, shard_bytes=2_000_000) if p.step == "embed_shard"]) == 4


def test_a_limit_too_small_names_the_step_the_estimate_and_how_many_blocks_fit():
    unsplit = peaks_of(1, questions=20_000)
    retrieve = next(p for p in unsplit if p.step == "retrieve")
    chunk_embed = next(p for p in unsplit if p.step == "chunk_embed")
    limit = (retrieve.bytes + chunk_embed.bytes) // 2
    assert chunk_embed.bytes < limit < retrieve.bytes  # only retrieve is over
    limits = dict.fromkeys(sizing.HEAVY_STEPS, limit)
    with pytest.raises(RagsweepError) as error:
        sizing.check_memory(unsplit, limits, "--memory-limit", 20_000)
    message = str(error.value)
    assert message.startswith(f"step retrieve would need about {retrieve.bytes / MIB:,.0f} MiB")
    assert f"over its memory limit of {limit / MIB:,.0f} MiB (--memory-limit)" in message
    blocks = int(message.split("--retrieval-question-blocks ")[1].split(")")[0])
    assert blocks > 1
    sizing.check_memory(
        peaks_of(blocks, questions=20_000), limits, "--memory-limit", 20_000
    )  # and they fit
    _, pods = sizing.memory_limits("", "retrieve=1Gi")
    with pytest.raises(
        RagsweepError, match=r"submit --resources FILE\): .*-p retrieval_question_blocks="
    ):
        sizing.check_memory(unsplit, limits, pods, 20_000, cluster=True)


def test_an_embedding_shard_too_large_is_told_a_shard_size_that_fits():
    peaks = peaks_of(1, shard_bytes=4_000_000)  # two shards of 4 MB
    shard = next(p for p in peaks if p.step == "embed_shard")
    limits = {"embed_shard": shard.bytes - 50 * MIB}
    with pytest.raises(RagsweepError, match="step embed_shard") as error:
        sizing.check_memory(peaks, limits, "--memory-limit", 200)
    smaller = int(str(error.value).split("--embedding-shard-bytes ")[1].split(")")[0])
    assert smaller < 4_000_000
    fits = peaks_of(1, shard_bytes=smaller)
    sizing.check_memory(fits, limits, "--memory-limit", 200)


def test_no_limit_is_no_check_and_the_runs_limit_applies_to_every_heavy_step():
    assert sizing.memory_limits("", "") == ({}, "")
    limits, source = sizing.memory_limits("2GB", "retrieve=4Gi")
    assert limits == dict.fromkeys(sizing.HEAVY_STEPS, 2_000_000_000) and "--memory-limit" in source
    limits, source = sizing.memory_limits("", "retrieve=4Gi")
    assert limits == {"retrieve": 4 << 30} and "submit --resources" in source
