"""Patterns you can run: a run folder holds its best configurations as pattern folders, and
their scripts, run without ragsweep, retrieve what the sweep retrieved."""

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import tiny_cross_encoder
from pattern_scripts import PatternScripts, offline_env
from scripted_llm import ScriptedLLM

from ragsweep import patterns
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table
from ragsweep.models import embedding
from ragsweep.patterns import SUPPORT, write_scripts
from ragsweep.retrieval import reranking, search
from ragsweep.sweep.settings import check_count

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
SEARCH_TYPES = {"similarity", "mmr", "hybrid"}
EVERY = 4  # the sweeps ask every fourth question of the examples' test set: 16 of 64
# runs a pattern's script with ragsweep made unimportable: the scripts must not need it
WITHOUT_RAGSWEEP = (
    "import runpy, sys; sys.modules['ragsweep'] = None; script = sys.argv[1]; "
    "sys.path.insert(0, script.rsplit('/', 1)[0]); sys.argv = sys.argv[1:]; "
    "runpy.run_path(script, run_name='__main__')"
)


def script(
    path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run one script in an interpreter of its own (``PatternScripts`` runs many in one)."""
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RAGSWEEP, str(path), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**offline_env(), **(env or {})},
    )


def questions() -> list[dict]:
    """The sweeps' questions: a pattern's scripts reproduce the sweep question by question,
    whatever their number, so a quarter of the examples' test set (across its documents)."""
    return json.loads((EXAMPLES / "testset.json").read_text())[::EVERY]


def sweep(out: Path, cache: Path, *options: str, env: dict[str, str] | None = None) -> Path:
    """Sweep the examples' documents and ``questions()`` with one chunk set and Top K 3,
    embedding through ``cache``; the run folder."""
    testset = out.parent / "testset.json"
    testset.write_text(json.dumps(questions()))
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(EXAMPLES / "docs")]
        + ["--testset", str(testset), "--chunk-sizes", "128", "--top-k", "3"]
        + ["--output", str(out), "--no-store", "--cache", str(cache), *options],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**offline_env(), **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = out.iterdir()
    assert f"patterns: {run / 'patterns'}" in result.stdout
    return run


@pytest.fixture(scope="module")
def run_dir(rerank_server, cross_encoder, tmp_path_factory, embedding_cache) -> Path:
    """The three search types in memory, each without a reranker, with rerank:<model> at
    the scripted endpoint and with the tiny cross-encoder: nine configurations, each a
    pattern."""
    out = tmp_path_factory.mktemp("patterns") / "runs"
    searches = ",".join(sorted(SEARCH_TYPES))
    rerankers = f"none,rerank:overlap,cross-encoder:{cross_encoder}"
    options = ["--search-types", searches, "--rerankers", rerankers, "--patterns", "9"]
    endpoint = {"RAGSWEEP_RERANK_BASE_URL": rerank_server.url}
    return sweep(out, embedding_cache, *options, env=endpoint)


def patterns_of(run: Path) -> list[Path]:
    return sorted((run / "patterns").iterdir(), key=lambda p: int(p.name.split("-")[0]))


def test_run_folder_holds_the_best_configurations_as_patterns(run_dir):
    board = read_table(run_dir / "leaderboard.arrow", "leaderboard").to_pylist()
    patterns = patterns_of(run_dir)
    assert len(board) == 9
    assert [p.name for p in patterns] == [f"{r['rank']}-{r['config_id']}" for r in board]
    results = read_table(run_dir / "results.arrow", "results").to_pylist()
    metric = "answer_correctness"  # no judge: auto ranks by it
    for folder, row in zip(patterns, board, strict=True):
        assert {p.name for p in folder.iterdir()} == {
            "pattern.json",
            "evaluation_results.json",
            "indexing.py",
            "inference.py",
            *SUPPORT,
        }
        for name, module in SUPPORT.items():  # ragsweep's own modules, not copies
            assert (folder / name).read_text() == Path(module.__file__).read_text(), name
        pattern = json.loads((folder / "pattern.json").read_text())
        assert pattern["name"] == folder.name
        assert pattern["settings"]["chunking"] == {
            "method": "sentence",
            "chunk_size": 128,
            "chunk_overlap": row["chunk_overlap"],
        }
        assert pattern["settings"]["retrieval"]["number_of_chunks"] == 3
        assert pattern["settings"]["embedding"]["model_id"] == "all-MiniLM-L6-v2"
        assert pattern["final_score"] == row[metric]
        score = pattern["scores"][metric]
        assert score["ci_low"] <= score["mean"] <= score["ci_high"]
        assert pattern["ragsweep"]["search_type"] == row["search_type"]
        assert pattern["ragsweep"]["reranker"] == row["reranker"]
        assert pattern["ragsweep"]["vector_store"] == "memory"

        evaluated = json.loads((folder / "evaluation_results.json").read_text())
        mine = {r["question_id"]: r for r in results if r["config_id"] == row["config_id"]}
        assert len(evaluated) == len(mine) == len(questions())
        for item in evaluated:
            swept = mine[item["question_id"]]
            assert item["answer"] == swept["answer"]
            assert item["scores"][metric] == swept[metric]
            assert item["correct_answers"] and item["question"]
            documents = [c["document_id"] for c in item["answer_contexts"]]
            assert documents == swept["retrieved_doc_ids"]
            assert all(context["text"].strip() for context in item["answer_contexts"])
    searched = {
        json.loads((p / "pattern.json").read_text())["ragsweep"]["search_type"] for p in patterns
    }
    assert searched == SEARCH_TYPES


@pytest.fixture(scope="module")
def indexes(run_dir, tmp_path_factory, pattern_scripts) -> dict[str, Path]:
    """The patterns' index: pattern name -> index folder. The nine differ only in their
    search and reranker, so the index the first one's indexing.py builds serves each."""
    index = tmp_path_factory.mktemp("indexes") / "index"
    return shared_index(pattern_scripts, patterns_of(run_dir), index)


def shared_index(
    scripts: PatternScripts,
    folders: list[Path],
    index: Path | str,
    env: dict[str, str] | None = None,
) -> dict[str, Path | str]:
    """One index for ``folders``, patterns of one chunk set and one store index, built by
    the first one's indexing.py: pattern name -> ``index``."""
    built = {
        json.dumps({k: v for k, v in pattern_settings(f).items() if k in INDEXED}, sort_keys=True)
        for f in folders
    }
    assert len(built) == 1, built  # what indexing.py builds is the same for each
    build(scripts, folders[0], index, env)
    return dict.fromkeys([f.name for f in folders], index)


# the settings indexing.py builds an index from (the others choose how inference.py searches)
INDEXED = {"chunker", "chunker_factory", "chunk_size", "chunk_overlap", "embedding_model"}
INDEXED |= {"passage_prefix", "vector_store", "distance", "milvus_index", "pgvector_index"}
INDEXED |= {"oracle_index"}


def pattern_settings(folder: Path) -> dict:
    return json.loads((folder / "pattern.json").read_text())["ragsweep"]


def build(
    scripts: PatternScripts, folder: Path, index: Path | str, env: dict[str, str] | None = None
) -> Path | str:
    """Run the pattern's indexing.py on the examples into ``index``; ``index``."""
    docs = ["--docs", str(EXAMPLES / "docs")]
    built = scripts.run(folder / "indexing.py", *docs, "--index", str(index), env=env)
    assert built.returncode == 0, built.stderr[-3000:]
    assert "indexed 221 chunks of 21 documents" in built.stdout
    return index


def test_pattern_scripts_retrieve_what_the_sweep_retrieved(run_dir, indexes, pattern_scripts):
    """Every pattern without a reranker (similarity, MMR, hybrid), every question of the
    test set: the chunks inference.py prints are the ones the sweep retrieved, in its order."""
    folders = reranked_by(run_dir, "none").values()
    assert_scripts_reproduce(pattern_scripts, run_dir, {f.name: indexes[f.name] for f in folders})


def test_inference_answers_with_the_patterns_model_and_prompt(
    run_dir, indexes, llm_server, tmp_path, pattern_scripts
):
    """A pattern that answers with ``llm:<model>``: one more line, the model's answer, asked
    with the pattern's system prompt and its template filled with the retrieved chunks."""
    folder = reranked_by(run_dir, "none")["similarity"]
    settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
    settings.update(answerer="llm:answerer", system_prompt="Answer from the context only.")
    asking = tmp_path / "asking"
    write_scripts(asking, settings, {})
    question = "How long are deleted files kept?"
    endpoint = {"RAGSWEEP_LLM_BASE_URL": llm_server.url, "RAGSWEEP_LLM_API_KEY": "sk-pattern"}
    asked = pattern_scripts.run(
        asking / "inference.py", "--index", str(indexes[folder.name]), question, env=endpoint
    )
    assert asked.returncode == 0, asked.stderr[-3000:]
    *hits, last = [json.loads(line) for line in asked.stdout.splitlines()]
    assert [h["rank"] for h in hits] == [1, 2, 3]
    assert set(last) == {"question", "answer"} and last["question"] == question
    [request] = llm_server.requests
    assert request["model"] == "answerer"
    system, user = request["messages"]
    assert system == {"role": "system", "content": "Answer from the context only."}
    context = "\n\n".join(h["text"] for h in hits)
    assert user["content"] == f"Context:\n{context}\n\nQuestion: {question}\n\nAnswer:"
    assert last["answer"] and last["answer"] in context
    assert llm_server.authorizations == ["Bearer sk-pattern"]


@pytest.fixture(scope="module")
def rerank_server():
    """The scripted /rerank endpoint (scripted_llm), for the module's sweep."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory) -> Path:
    """A tiny random cross-encoder knowing the words of the example documents and questions."""
    texts = [
        p.read_text(encoding="utf-8")
        for p in sorted((EXAMPLES / "docs").rglob("*"))
        if p.suffix in {".md", ".txt", ".html"}
    ]
    texts += [q["question"] for q in json.loads((EXAMPLES / "testset.json").read_text())]
    return tiny_cross_encoder(tmp_path_factory.mktemp("cross-encoder"), texts)


def reranked_by(run: Path, reranker: str) -> dict[str, Path]:
    """The patterns of ``run`` reranked by ``reranker``, by search type."""
    found = {}
    for folder in patterns_of(run):
        settings = json.loads((folder / "pattern.json").read_text())["ragsweep"]
        if settings["reranker"] == reranker:
            assert settings["rerank_fetch_k"] == (None if reranker == "none" else 20)
            found[settings["search_type"]] = folder
    assert set(found) == SEARCH_TYPES
    return found


def test_reranked_pattern_scripts_rerank_the_searchs_candidates_as_the_sweep_did(
    run_dir, indexes, rerank_server, pattern_scripts
):
    """Winners with a reranker (rerank:<model> at the scripted /rerank endpoint), similarity
    and MMR: the scripts hand the search's first rerank_fetch_k chunks to the endpoint and
    keep its order."""
    reranked = reranked_by(run_dir, "rerank:overlap")
    folders = [reranked["similarity"], reranked["mmr"]]
    endpoint = {"RAGSWEEP_RERANK_BASE_URL": rerank_server.url}
    asked_by_sweep = len(rerank_server.reranked)
    assert_scripts_reproduce(
        pattern_scripts, run_dir, {f.name: indexes[f.name] for f in folders}, endpoint
    )
    by_scripts = rerank_server.reranked[asked_by_sweep:]
    assert len(by_scripts) == 2 * len(questions())  # each pattern, each question
    assert {len(r["documents"]) for r in by_scripts} == {20}


def test_cross_encoder_pattern_scripts_reorder_the_candidates_exactly_as_the_sweep_did(
    run_dir, indexes, cross_encoder, pattern_scripts
):
    """Winners with a cross-encoder read from a folder (a tiny random BERT): the scripts
    score the search's first rerank_fetch_k chunks with it and print, for every question,
    the chunks the sweep retrieved in its order (similarity and MMR); the reranker did
    reorder them."""
    reranked = reranked_by(run_dir, f"cross-encoder:{cross_encoder}")
    folders = {s: reranked[s] for s in ("similarity", "mmr")}
    assert_scripts_reproduce(
        pattern_scripts,
        run_dir,
        {f.name: indexes[f.name] for f in folders.values()},
    )
    plain = reranked_by(run_dir, "none")
    for search_type, folder in folders.items():
        reranked = json.loads((folder / "evaluation_results.json").read_text())
        searched = json.loads((plain[search_type] / "evaluation_results.json").read_text())
        changed = [
            a["answer_contexts"] != b["answer_contexts"]
            for a, b in zip(reranked, searched, strict=True)
        ]
        assert sum(changed) >= len(changed) // 2, search_type  # not the search's own order


def assert_scripts_reproduce(
    scripts: PatternScripts,
    run: Path,
    indexes: dict[str, Path],
    env: dict[str, str] | None = None,
) -> None:
    """inference.py of each pattern of ``run`` given an index (``indexes``), on it, asked
    every question of the test set, prints the chunks the sweep retrieved for it, best first."""
    for folder in [f for f in patterns_of(run) if f.name in indexes]:
        evaluated = json.loads((folder / "evaluation_results.json").read_text())
        index = indexes[folder.name]
        asked = scripts.run(
            folder / "inference.py",
            "--index",
            str(index),
            *[e["question"] for e in evaluated],
            env=env,
        )
        assert asked.returncode == 0, asked.stderr[-3000:]
        found: list[list[dict]] = []
        for line in asked.stdout.splitlines():
            hit = json.loads(line)
            assert set(hit) == {"question", "rank", "document_id", "text", "score"}
            if hit["rank"] == 1:
                found.append([])
            found[-1].append({"text": hit["text"], "document_id": hit["document_id"]})
        assert len(found) == len(evaluated)
        for item, retrieved in zip(evaluated, found, strict=True):
            assert retrieved == item["answer_contexts"], (folder.name, item["question"])


def test_indexing_without_its_docs_folder_is_a_clear_error(run_dir, tmp_path, pattern_scripts):
    folder = patterns_of(run_dir)[0]
    nowhere = str(tmp_path / "nowhere")
    result = pattern_scripts.run(folder / "indexing.py", "--docs", nowhere, "--index", "x")
    assert result.returncode == 2
    assert "error: --docs" in result.stderr and "no such folder" in result.stderr
    assert "Traceback" not in result.stderr
    result = pattern_scripts.run(folder / "inference.py", "--index", str(tmp_path / "none"), "q?")
    assert result.returncode == 2
    assert "no index there" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("bad", [-1, True, "3"])
def test_a_count_of_patterns_is_zero_or_more(bad):
    with pytest.raises(RagsweepError, match="--patterns"):
        check_count(bad)
    assert check_count(0) == 0


def test_run_refuses_a_negative_count_of_patterns(tmp_path):
    result = subprocess.run(
        [RAGSWEEP, "run", "--docs", str(tmp_path), "--testset", "t.json", "--patterns", "-1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "error: patterns (--patterns): must be 0 (none) or more, not -1" in result.stderr
    assert "Traceback" not in result.stderr


class Names(dict):
    """A namespace in which every unknown name is its own text (``extract_plain``)."""

    def __missing__(self, name: str) -> str:
        return name


def template_constants(name: str) -> dict[str, object]:
    """The upper-case constants of the script template ``name`` made of literals, set() and
    frozenset() (a function named in one stands for itself, as its name)."""
    tree = ast.parse((Path(patterns.__file__).parent / name).read_text())
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id.isupper() and node.value is not None:
                known = Names(set=set, frozenset=frozenset)
                try:
                    found[target.id] = eval(ast.unparse(node.value), {}, known)
                except (AttributeError, TypeError):
                    continue  # e.g. re.compile(...): not a copied constant
    return found


def test_the_scripts_copy_ragsweeps_constants():
    """What the scripts copy from ragsweep (depths, batch size, the hybrid's rrf_k) is what
    ragsweep uses; extraction, tokenizer and prompts are ragsweep's modules, copied."""
    indexing, inference = template_constants("indexing.py"), template_constants("inference.py")
    assert indexing["BATCH"] == embedding.BATCH
    assert indexing["LOCAL_BATCH"] == embedding.LOCAL_BATCH
    assert indexing["RUNTIMES"] == embedding.BACKENDS
    assert indexing["STORES"] == patterns.SCRIPT_STORES
    assert inference["FUSION_DEPTH"] == search.FUSION_DEPTH
    assert inference["CROSS_ENCODER_BATCH"] == reranking.CROSS_ENCODER_BATCH
    rrf_k = inspect.signature(search.hybrid).parameters["rrf_k"].default
    assert rrf_k == patterns.RRF_K
