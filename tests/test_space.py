import pytest

from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import config_id
from ragsweep.sweep.space import SearchSpace, chunk_config_from


def test_config_ids_are_stable_and_independent_of_key_order():
    a = {"chunk_size": 128, "top_k": 3, "search_type": "mmr"}
    b = {"search_type": "mmr", "top_k": 3, "chunk_size": 128}
    assert config_id(a) == config_id(b)
    assert config_id(a) != config_id({**a, "top_k": 5})
    assert len(config_id(a)) == 12


def test_grid_is_the_product_of_chunk_configs_and_retrieval_settings():
    space = SearchSpace(
        chunk_sizes=(64, 128, 192),
        top_ks=(1, 3, 5),
        search_types=("similarity", "mmr", "hybrid"),
        mmr_lambdas=(0.5, 0.8),
    )
    configs = space.all_configs()
    assert len(space.chunk_configs()) == 3
    assert len(configs) == 3 * 3 * (1 + 2 + 1)
    assert len({c["config_id"] for c in configs}) == len(configs)
    labels = [c["label"] for c in configs[:4]]
    assert labels == [
        "sentence-64/16 all-MiniLM-L6-v2 k=1 similarity extractive",
        "sentence-64/16 all-MiniLM-L6-v2 k=1 mmr:0.5 extractive",
        "sentence-64/16 all-MiniLM-L6-v2 k=1 mmr:0.8 extractive",
        "sentence-64/16 all-MiniLM-L6-v2 k=1 hybrid extractive",
    ]


def test_overlap_of_half_the_chunk_size_is_pruned():
    space = SearchSpace(chunk_sizes=(32, 128), chunk_overlaps=(16,))
    assert [c["chunk_size"] for c in space.chunk_configs()] == [128]


def test_space_where_every_chunk_config_is_pruned_is_an_error():
    with pytest.raises(RagsweepError, match="no valid chunk configuration"):
        SearchSpace.from_dict({"chunk_sizes": [32], "chunk_overlaps": [16]})


@pytest.mark.parametrize(
    "data, message",
    [
        ({"chunk_size": [1]}, "unknown field"),
        ({"search_types": ["fuzzy"]}, "field 'search_types': unknown value 'fuzzy'"),
        ({"top_ks": [0]}, "field 'top_ks': 0 is not positive"),
        ({"top_ks": ["3"]}, "field 'top_ks': expected whole number values, got '3'"),
        ({"chunk_overlaps": [-1]}, "neither a number of tokens nor a fraction"),
        ({"chunk_overlaps": [1.5]}, "neither a number of tokens nor a fraction"),
        ({"mmr_lambdas": [1.2]}, "field 'mmr_lambdas': 1.2 is not in"),
        ({"mmr_fetch_k": 0}, "field 'mmr_fetch_k'"),
        ({"embedding_models": ["/nowhere"]}, "not a local sentence-transformers folder"),
        ({"chunk_sizes": []}, "expected a non-empty list"),
    ],
)
def test_bad_search_space_gives_a_clear_error(data, message):
    with pytest.raises(RagsweepError, match=message):
        SearchSpace.from_dict(data, source="space.yaml")


def test_space_round_trips_through_plain_data():
    space = SearchSpace(top_ks=(2, 4))
    assert SearchSpace.from_dict(space.to_dict()) == space


def test_whole_numbers_from_json_pipeline_parameters_are_accepted():
    # kfp hands dict parameters over as JSON structs, so 64 arrives as 64.0
    space = SearchSpace.from_dict({"chunk_sizes": [64.0, 128.0], "top_ks": [3.0]})
    assert space.chunk_sizes == (64, 128) and space.top_ks == (3,)
    with pytest.raises(RagsweepError, match="expected whole number values, got 64.5"):
        SearchSpace.from_dict({"chunk_sizes": [64.5]})


def test_chunk_config_from_a_pipeline_loop_keeps_its_configuration_ids():
    space = SearchSpace()
    [first, *_] = space.chunk_configs()
    looped = {k: float(v) if isinstance(v, int) else v for k, v in first.items()}
    assert looped["chunk_size"] == 64.0
    assert chunk_config_from(looped) == first
    assert space.configs(chunk_config_from(looped)) == space.configs(first)


def test_overlap_given_as_a_fraction_is_resolved_to_tokens_and_deduplicated():
    space = SearchSpace(chunk_sizes=(64, 128), chunk_overlaps=(0.125, 8))
    pairs = [(c["chunk_size"], c["chunk_overlap"]) for c in space.chunk_configs()]
    # 0.125 of 64 is 8 tokens: the same chunk config as an overlap of 8, evaluated once
    assert pairs == [(64, 8), (128, 16), (128, 8)]


def test_chunk_size_above_the_models_input_is_pruned_and_reported():
    space = SearchSpace(chunk_sizes=(128, 512))
    assert [c["chunk_size"] for c in space.chunk_configs()] == [128]
    assert space.pruned() == [
        "chunk size 512 exceeds all-MiniLM-L6-v2's maximum input of 254 tokens"
    ]


def test_search_space_yaml_is_read_and_checked(tmp_path):
    good = tmp_path / "space.yaml"
    good.write_text("chunk_sizes: [64, 128]\ntop_ks: [2]\nsearch_types: [hybrid]\n")
    space = SearchSpace.from_yaml(good)
    assert len(space.all_configs()) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("chunk_sizes: [64\ntop_ks: 2\n")
    with pytest.raises(RagsweepError, match=r"bad.yaml: malformed YAML at line \d+"):
        SearchSpace.from_yaml(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("top_k: [2]\n")
    with pytest.raises(RagsweepError, match=r"wrong.yaml: unknown field\(s\) \['top_k'\]"):
        SearchSpace.from_yaml(wrong)
    with pytest.raises(RagsweepError, match="missing.yaml: cannot read"):
        SearchSpace.from_yaml(tmp_path / "missing.yaml")


def test_the_example_search_space_is_valid():
    from pathlib import Path

    space = SearchSpace.from_yaml(Path(__file__).parent.parent / "examples" / "space.yaml")
    assert len(space.all_configs()) == 96


def test_an_endpoint_embedding_model_is_counted_in_the_bundled_tokens_and_never_pruned():
    space = SearchSpace(chunk_sizes=(128, 512), embedding_models=("openai:text-embedding",))
    assert [c["chunk_size"] for c in space.chunk_configs()] == [128, 512]
    assert space.all_configs()[0]["label"].startswith("sentence-128/16 openai:text-embedding ")
