"""Plugins: a third-party package (``tests/plugin_example``) adds a vector store, a metric, a
chunker and a reranker through entry points, with no edit of ragsweep, and they work end to
end: sweep, leaderboard, patterns, the compiled pipeline's Secrets. And the registry's errors."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pattern_scripts import offline_env
from test_patterns import RAGSWEEP
from test_pipeline import example_subset
from test_platform import documents

from ragsweep.core.errors import RagsweepError
from ragsweep.documents.chunking import chunker_names, get_chunker
from ragsweep.evaluation.leaderboard import metric_intervals
from ragsweep.evaluation.metrics import Metric, registered_metrics
from ragsweep.patterns import pattern_code
from ragsweep.reporting.report import scale_of
from ragsweep.retrieval.reranking import Reranking, check_reranker
from ragsweep.retrieval.vector_stores import connection_keys
from ragsweep.sweep.space import SearchSpace

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).resolve().parent / "plugin_example"
PLUGIN_STORE = EXAMPLE / "ragsweep_example" / "filestore.py"
PLUGIN_CHUNKER = EXAMPLE / "ragsweep_example" / "paragraphs.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example package installed by pip into a folder of its own (a copy of its source
    is built, so the checkout stays clean); subprocesses get it on PYTHONPATH."""
    source = tmp_path_factory.mktemp("source") / "plugin_example"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    pip += ["--no-build-isolation", "--target", str(target), str(source)]
    result = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (target / "ragsweep_example" / "filestore.py").is_file()
    return target


def artifact(path: Path) -> list[dict]:
    """An artifact's rows, read as written: its columns include the plugin's metric, which
    this process (the plugin not installed) does not declare."""
    with pa.ipc.open_file(pa.memory_map(str(path))) as reader:
        return reader.read_all().to_pylist()


def with_plugin(installed: Path, **env: str) -> dict[str, str]:
    path = [installed, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
    return {**offline_env(), "PYTHONPATH": os.pathsep.join(map(str, path)), **env}


def test_a_third_party_store_metric_and_chunker_sweep_rank_and_deploy_with_no_ragsweep_edit(
    installed, tmp_path, pattern_scripts, scripted_embedder
):
    """``ragsweep run`` (kfp.local) over the plugin's store and chunker beside the built-in
    ones, ranked by the plugin's lower-is-better metric; its patterns carry the plugin's
    pattern code and, run without ragsweep or the plugin installed, retrieve what the sweep
    retrieved. The sweep and the scripts embed through the scripted endpoint
    (``openai:embedder``): no embedding model is loaded."""
    out = tmp_path / "runs"
    docs, testset = example_subset(tmp_path)
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(docs)]
        + ["--testset", str(testset), "--chunk-sizes", "128", "--top-k", "3"]
        + ["--chunkers", "sentence,paragraphs", "--vector-stores", "memory,filestore"]
        + ["--search-types", "similarity", "--metric", "answer_words", "--patterns", "4"]
        + ["--embedding-models", "openai:embedder", "--cache", str(tmp_path / "vectors")]
        + ["--output", str(out), "--no-store"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=with_plugin(
            installed,
            FILESTORE_DIR=str(tmp_path / "filestore"),
            RAGSWEEP_EMBEDDING_BASE_URL=scripted_embedder.url,
        ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = out.iterdir()

    board = artifact(run / "leaderboard.arrow")
    assert {(r["chunker"], r["vector_store"]) for r in board} == {
        (chunker, store)
        for chunker in ("sentence", "paragraphs")
        for store in ("memory", "filestore")
    }
    # ranked by the plugin's metric, lower is better: fewest words first
    words = [r["answer_words"] for r in board]
    assert words == sorted(words) and words[0] < words[-1]
    assert all(r["answer_words_low"] <= r["answer_words"] <= r["answer_words_high"] for r in board)
    results = artifact(run / "results.arrow")
    assert all(r["answer_words"] == len(r["answer"].split()) for r in results)
    # the plugin's store searches exactly: what memory found, for each chunker
    by_config = {(r["config_id"], r["question_id"]): r for r in results}
    for chunker in ("sentence", "paragraphs"):
        ids = {r["vector_store"]: r["config_id"] for r in board if r["chunker"] == chunker}
        for (config_id, question_id), row in by_config.items():
            if config_id == ids["filestore"]:
                memory = by_config[(ids["memory"], question_id)]
                assert row["retrieved_doc_ids"] == memory["retrieved_doc_ids"]
                assert row["recall_vs_exact"] == 1.0

    patterns = {p.name: p for p in (run / "patterns").iterdir()}
    assert sorted(patterns) == sorted(f"{r['rank']}-{r['config_id']}" for r in board)
    for row in board:
        folder = patterns[f"{row['rank']}-{row['config_id']}"]
        store_code, chunker_code = folder / "vector_store.py", folder / "chunker.py"
        assert store_code.exists() == (row["vector_store"] == "filestore")
        assert chunker_code.exists() == (row["chunker"] == "paragraphs")
        if store_code.exists():
            assert store_code.read_bytes() == PLUGIN_STORE.read_bytes()
        if chunker_code.exists():
            assert chunker_code.read_bytes() == PLUGIN_CHUNKER.read_bytes()
    [plugged] = [
        patterns[f"{r['rank']}-{r['config_id']}"]
        for r in board
        if (r["chunker"], r["vector_store"]) == ("paragraphs", "filestore")
    ]
    index = tmp_path / "index"
    endpoint = {"RAGSWEEP_EMBEDDING_BASE_URL": scripted_embedder.url}
    built = pattern_scripts.run(
        plugged / "indexing.py", "--docs", str(docs), "--index", str(index), env=endpoint
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (index / "vectors.npy").is_file()  # the plugin's write_index built it
    evaluated = json.loads((plugged / "evaluation_results.json").read_text())
    asked = pattern_scripts.run(
        plugged / "inference.py",
        "--index",
        str(index),
        *[e["question"] for e in evaluated],
        env=endpoint,
    )
    assert asked.returncode == 0, asked.stderr[-3000:]
    found: list[list[dict]] = []
    for line in asked.stdout.splitlines():
        hit = json.loads(line)
        if hit["rank"] == 1:
            found.append([])
        found[-1].append({"text": hit["text"], "document_id": hit["document_id"]})
    assert found == [e["answer_contexts"] for e in evaluated]


def test_the_compiled_pipeline_mounts_a_plugin_stores_secret_keys_on_the_retrieve_step(
    example, tmp_path
):
    """Compiled in this process, the plugin's entry points registered: the pipeline is built
    again (not the one this process may have built before), reading the stores now
    registered."""
    from kfp import compiler

    from ragsweep.pipelines import sweep_pipeline

    target = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(sweep_pipeline._cluster_pipeline.__wrapped__(), str(target))
    _, executors = documents(target)
    [secret] = [
        s
        for s in executors["exec-retrieve"]["secretAsEnv"]
        if s["secretNameParameter"]["componentInputParameter"].endswith("vector_store_secret_name")
    ]
    keys = [k["secretKey"] for k in secret["keyToEnv"]]
    assert "FILESTORE_DIR" in keys  # the plugin's, beside the built-ins'
    assert sorted(keys) == sorted(connection_keys())  # every store registered here
    assert "FILESTORE_DIR" not in (ROOT / "pipelines" / "sweep_pipeline.yaml").read_text()


@pytest.fixture
def example(plugins, monkeypatch):
    """The example package importable in this process, its entry points registered."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    groups = {}
    for line in (EXAMPLE / "setup.cfg").read_text().split("[options.entry_points]")[1].splitlines():
        if line and not line.startswith((" ", "#")):
            group = groups.setdefault(line.rstrip(" ="), {})
        elif "=" in line:
            name, _, value = line.partition("=")
            group[name.strip()] = value.strip()
    plugins({k: v for k, v in groups.items() if k != "ragsweep.metrics"})  # SCORES is fixed here
    return groups


def test_a_reranker_plugin_is_checked_and_reorders_the_searchs_candidates(example):
    with pytest.raises(RagsweepError, match="reranker 'overlap:x': x is not a number of letters"):
        check_reranker("overlap:x")
    with pytest.raises(RagsweepError, match=r"overlap:<the shortest word counted>"):
        check_reranker("overlap")
    reordered, _ = Reranking().rerank(
        "overlap:4",
        ["Which port does the console use?"],
        ["Backups run every night.", "The admin console uses port 9000."],
        np.array([[0, 1]]),
    )
    assert reordered.ids.tolist() == [[1, 0]]
    space = SearchSpace.from_dict({"rerankers": ["overlap:4"], "top_ks": [3]})
    configs = space.all_configs()
    assert {c["reranker"] for c in configs} == {"overlap:4"}
    code, problem = pattern_code(configs[0])
    assert not code and "cannot rerank with overlap" in problem


def test_a_chunker_plugin_is_swept_by_name_and_its_chunks_lie_in_their_documents(example):
    assert chunker_names() == ["headings", "paragraphs", "semantic", "sentence", "token"]
    split = get_chunker("paragraphs")(8, 0, str.split)
    text = (
        "One two three.\nFour.\n\n\nFive six.\n\n  Seven eight nine ten eleven twelve thirteen.\n"
    )
    assert split(text) == [
        "One two three.\nFour.\n\n\nFive six.",
        "Seven eight nine ten eleven twelve thirteen.",
    ]
    space = SearchSpace.from_dict({"chunkers": ["paragraphs", "sentence"]})
    assert {c["chunker"] for c in space.all_configs()} == {"paragraphs", "sentence"}


def test_two_packages_registering_one_name_differently_is_an_error_naming_both(plugins):
    plugins({"ragsweep.chunkers": {"sentence": "elsewhere:split"}})
    with pytest.raises(
        RagsweepError,
        match=r"ragsweep.chunkers: 'sentence' is registered twice, as "
        r"elsewhere:split and ragsweep.documents.chunking:sentence; uninstall one",
    ):
        chunker_names()


def test_a_plugin_that_cannot_be_imported_fails_in_one_line_naming_it(plugins):
    plugins({"ragsweep.vector_stores": {"gone": "no_such_module_here:Store"}})
    with pytest.raises(
        RagsweepError,
        match=r"vector store 'gone' \(no_such_module_here:Store\) cannot be loaded: "
        "ModuleNotFoundError",
    ):
        SearchSpace.from_dict({"vector_stores": ["gone"]}).all_configs()


def test_an_unknown_store_or_chunker_names_the_registered_ones():
    with pytest.raises(
        RagsweepError,
        match=r"unknown value 'nope'; choose from \['headings', 'semantic', 'sentence', 'token'\]",
    ):
        SearchSpace.from_dict({"chunkers": ["nope"]})
    with pytest.raises(
        RagsweepError, match=r"choose from \['memory', 'milvus', 'oracle', 'pgvector'\]"
    ):
        SearchSpace.from_dict({"vector_stores": ["nope"]})


def test_a_metric_plugin_must_declare_a_metric_not_a_bare_function(plugins, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    plugins({"ragsweep.metrics": {"length": "ragsweep_example.metrics:answer_words"}})
    with pytest.raises(
        RagsweepError,
        match=r"metric 'length' \(ragsweep_example.metrics:answer_words\) is not a "
        r"ragsweep.evaluation.metrics.Metric",
    ):
        registered_metrics()


def test_the_reports_interval_axis_is_the_metrics_declared_range(plugins, monkeypatch):
    """A metric with no upper bound (the example's answer length) is drawn on an axis up to
    the widest interval, not clipped to [0, 1]; a bounded one keeps its declared range."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    plugins({"ragsweep.metrics": {"answer_words": "ragsweep_example.metrics:ANSWER_WORDS"}})
    board = pa.table(
        {
            "answer_words_low": [3.0, 9.0],
            "answer_words_high": [7.0, 14.0],
            "faithfulness_low": [0.2, 0.4],
            "faithfulness_high": [0.5, 0.9],
        }
    )
    assert scale_of(board, "answer_words") == (0.0, 14.0)
    assert scale_of(board, "faithfulness") == (0.0, 1.0)


COMPARE_LOWER_IS_BETTER = """
import json, sys
import numpy as np
import pyarrow as pa
sys.path.insert(0, sys.argv[1])
from builders import SPACE, make_answers, make_scores, make_testset
from ragsweep.evaluation.leaderboard import build_board
from ragsweep.reporting.exports import sorted_board
from ragsweep.reporting.regression import compare_runs
from ragsweep.sweep.settings import RunSettings
from ragsweep.sweep.space import configs_table

def run(words):
    configs = SPACE.all_configs()[: len(words)]
    ids = [c["config_id"] for c in configs]
    questions = [f"q{i:03d}" for i in range(words.shape[1])]
    scores = make_scores(ids, questions, np.ones_like(words))
    at = scores.schema.get_field_index("answer_words")
    scores = scores.set_column(at, "answer_words", pa.array(words.ravel()))
    space = RunSettings("docs", "testset.json", SPACE, "answer_words").record()
    board = build_board(scores, make_answers(ids, questions), make_testset(questions),
                        configs_table(configs), "answer_words", settings=space)
    return board.leaderboard, board.results

before = np.random.default_rng(0).integers(5, 15, (3, 60)).astype(float)
longer = compare_runs(run(before), run(before + 3), metric="answer_words")
shorter = compare_runs(run(before), run(before - 3), metric="answer_words")
print(json.dumps({
    "board": run(before)[0]["answer_words"].to_pylist(),
    "sorted": sorted_board(run(before)[0].sort_by([("rank", "descending")]), "answer_words")[
        "answer_words"].to_pylist(),
    "longer": [longer.table["verdict"].to_pylist(), longer.table["difference"].to_pylist(),
               longer.best_regressed, longer.alarm.difference],
    "shorter": [shorter.table["verdict"].to_pylist(), shorter.best_regressed],
}))
"""


def test_a_lower_is_better_metric_ranks_lowest_first_and_a_rise_is_a_regression(installed):
    """The plugin's answer length, lower is better: the leaderboard (and ``--sort``) puts the
    shortest first, and answers 3 words longer every time are a regression (the difference
    reported as +3, in the metric's own terms), 3 words shorter an improvement."""
    result = subprocess.run(
        [sys.executable, "-c", COMPARE_LOWER_IS_BETTER, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=600,
        env=with_plugin(installed),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert found["board"] == sorted(found["board"]) == found["sorted"]  # and --sort so
    verdicts, differences, alarm, alarm_difference = found["longer"]
    assert verdicts == ["regressed"] * 3 and alarm
    assert differences == pytest.approx([3.0] * 3) and alarm_difference == pytest.approx(3.0)
    assert found["shorter"] == [["improved"] * 3, False]


# a metric on a 1-to-5 scale, registered by a test below as "test_plugins:LIKERT"
LIKERT = Metric("answer", lambda item: 3.0, low=1.0, high=5.0)


def test_an_unbounded_metrics_interval_surrounds_its_mean_and_a_bounded_one_keeps_its_range(
    plugins, monkeypatch
):
    """The example's answer length (34 words on average, no upper bound) once got the interval
    [0.839, 38.315]: the Clopper-Pearson floor of 0-to-1 scores was applied to it. Its
    interval is the cluster bootstrap's, around its mean; a 1-to-5 metric's stays in [1, 5]."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    plugins(
        {
            "ragsweep.metrics": {
                "answer_words": "ragsweep_example.metrics:ANSWER_WORDS",
                "likert": "test_plugins:LIKERT",
            }
        }
    )
    rng = np.random.default_rng(0)
    clusters = np.repeat(np.arange(20), 3)
    words = rng.integers(25, 45, size=(2, 60)).astype(float)
    center, low, high = metric_intervals("answer_words", words, clusters, 2000, 0)
    assert np.all((low > 25) & (low < center) & (center < high) & (high < 45)), (low, high)

    likert = np.full((1, 60), 5.0)  # every score at the top: the interval is not [5, 5]
    center, low, high = metric_intervals("likert", likert, clusters, 2000, 0)
    assert center[0] == 5.0 and high[0] == 5.0 and 1.0 <= low[0] < 5.0
