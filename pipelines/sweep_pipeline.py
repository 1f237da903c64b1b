"""The ragsweep pipeline: ingest, fan out over chunk configurations, answer and judge, rank.

Reads top to bottom like the data flow in docs/architecture.md. Compile with ``make compile``; the
compiled YAML is committed beside this file. Parameters take Red Hat AutoRAG's names where
the concept is the same; ``ragsweep.kubeflow.tasks`` says how each step runs on OpenShift AI.
"""

from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import NamedTuple

from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset
from kfp.dsl.graph_component import GraphComponent

from ragsweep.components.chunk_embed import chunk_embed
from ragsweep.components.compare import compare
from ragsweep.components.configure import configure
from ragsweep.components.embed_shard import embed_shard
from ragsweep.components.evaluate import evaluate
from ragsweep.components.generate_qa import generate_qa
from ragsweep.components.ingest import ingest
from ragsweep.components.load_testset import load_testset
from ragsweep.components.merge_shards import merge_shards
from ragsweep.components.plan import plan
from ragsweep.components.plan_shards import plan_shards
from ragsweep.components.publish import publish
from ragsweep.components.rank import rank
from ragsweep.components.retrieve import retrieve
from ragsweep.components.track import track
from ragsweep.documents.qagen import QASettings
from ragsweep.evaluation.leaderboard import AUTO_METRIC
from ragsweep.kubeflow import tasks
from ragsweep.models.llm import LLMSettings
from ragsweep.store.database import DEFAULT_STORE_CONNECTION
from ragsweep.sweep.fanout import DEFAULT_SHARD_BYTES
from ragsweep.sweep.settings import DEFAULT_PATTERNS
from ragsweep.sweep.space import DEFAULT_MAX_CONFIGS, SearchSpace

DEFAULT = SearchSpace().to_parameters()
DEFAULT_LLM = LLMSettings().to_dict()
DEFAULT_QA = QASettings().to_dict()


class Results(NamedTuple):
    leaderboard: Dataset
    results: Dataset
    breakdown: Dataset
    failures: Dataset
    report: HTML
    testset: Dataset
    rag_patterns: Artifact
    run_id: str


DESCRIPTION = "Evaluate a grid of RAG configurations on a document collection and rank them."


def sweep(
    input_data_key: str = "",
    test_data_key: str = "",
    input_data_bucket_name: str = "",
    test_data_bucket_name: str = "",
    input_data_secret_name: str = tasks.DEFAULT_CONNECTION,
    test_data_secret_name: str = tasks.DEFAULT_CONNECTION,
    input_data_keys: list = [],  # noqa: B006 (a pipeline parameter's default)
    embedding_models: list = DEFAULT["embedding_models"],
    generation_models: list = [],  # noqa: B006 (a pipeline parameter's default)
    search_space: dict = DEFAULT["search_space"],
    optimization_metric: str = AUTO_METRIC,
    optimization_max_rag_patterns: int = DEFAULT_MAX_CONFIGS,
    max_document_bytes: int = 0,
    max_questions: int = 0,
    max_llm_calls: int = 0,
    strategy: str = "grid",
    trials_at_once: int = 1,
    seed: int = 42,
    skip_unresolved: bool = False,
    embedding_cache: str = "",
    cache_max_gb: float = 0.0,
    embedding_shard_bytes: int = DEFAULT_SHARD_BYTES,
    llm: dict = DEFAULT_LLM,
    llm_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    qa_generation: dict = DEFAULT_QA,
    results_store_secret_name: str = DEFAULT_STORE_CONNECTION,
    vector_store_secret_name: str = tasks.DEFAULT_VECTOR_STORE_CONNECTION,
    keep_collections: bool = False,
    baseline: str = "",
    sweep_name: str = "",
    deployed_config: str = "",
    mlflow_tracking_uri: str = "",
    mlflow_secret_name: str = tasks.DEFAULT_MLFLOW_CONNECTION,
    patterns: int = DEFAULT_PATTERNS,
    preset: str = "",
    vector_io_provider_id: str = "",
    ogx_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    maas_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    vector_db_secret_name: str = tasks.DEFAULT_VECTOR_STORE_CONNECTION,
    agents: list = [],  # noqa: B006 (a pipeline parameter's default)
) -> Results:
    """Sweep RAG configurations over a document collection and rank them.

    Args:
        input_data_key: The documents: a folder or prefix in input_data_bucket_name; without
            a bucket, a local path (inside the image on a cluster) or an s3:// URI.
        test_data_key: The test data (.json Red Hat AutoRAG, .jsonl Giskard): an object in
            test_data_bucket_name; without a bucket, a local path, an s3:// URI, or
            store:<name>, a test set in the results database (results_store_secret_name) as
            it is when the run starts; empty: generate a test set with Giskard (qa_generation).
        input_data_bucket_name: The documents' S3 bucket; empty: input_data_key is a location.
        test_data_bucket_name: The test data's S3 bucket; empty: test_data_key is a location.
        input_data_secret_name: The OpenShift AI S3 connection (Secret) to read documents with.
        test_data_secret_name: The OpenShift AI S3 connection (Secret) to read test data with.
        input_data_keys: More document folders or prefixes, read as input_data_key is (Red
            Hat AutoRAG upstream's list); a document's id is its path under its own.
        embedding_models: Embedding models: all-MiniLM-L6-v2 (in the image) or model folders.
        generation_models: Answer models, answered through the LLM endpoint
            (llm_secret_name), and extractive (the offline answerer, no LLM); empty: the
            answerers of search_space (the older spelling), else extractive.
        search_space: The other lists to sweep: chunkers, chunk_sizes (in the embedding
            model's tokens), chunk_overlaps, top_ks, search_types (similarity, mmr),
            query_prefix / passage_prefix (text before
            each question / chunk, for every embedding model; default: its family's), and
            vector_stores (memory, milvus, pgvector, oracle), indexes (store -> index kind
            -> parameter -> values) and distance (cosine, dot, euclidean), rerankers
            (none, cross-encoder:/folder, rerank:<model> at RAGSWEEP_RERANK_BASE_URL)
            and rerank_fetch_k (the search's candidates a reranker reorders).
        optimization_metric: The metric to rank by (Red Hat AutoRAG's faithfulness,
            answer_correctness and context_correctness mean the same here); auto: the LLM
            judge's correctness when a judge is set, else answer_correctness.
        optimization_max_rag_patterns: The most configurations to evaluate (0: no limit); a
            larger search space stops the run at planning, unless strategy is model: then
            the most configurations whose answers are evaluated.
        max_document_bytes: Document budget in bytes of text, the documents the test set
            cites first (0: every document).
        max_questions: Evaluate a random sample of this many questions (0: every question).
        max_llm_calls: The most LLM calls (answers and judge verdicts) the evaluation may
            make; when the full grid would take more, successive halving evaluates every
            configuration on a sample of the questions and promotes the best half to twice
            as many, until the survivors answer all (0: no limit, the full grid).
        strategy: grid (every configuration; successive halving above max_llm_calls),
            halving (successive halving even within the budget) or model (a model-based
            search answers at most optimization_max_rag_patterns configurations, chosen
            one at a time from every configuration's retrieval metrics).
        trials_at_once: With strategy model, the configurations proposed at once and
            answered together (their questions share the endpoint's concurrency); 1: one
            at a time. More finish sooner on an endpoint that serves many requests at once,
            each choice knowing less.
        seed: The seed of both samples and of the question order of successive halving.
        skip_unresolved: Leave out, with a warning, the questions whose reference documents
            (or reference context) are found in no document, instead of failing.
        embedding_cache: Where embeddings are kept between runs: an s3:// prefix (read with
            the input data connection) or a folder; empty: not kept.
        cache_max_gb: The embedding cache's size cap in GB (10^9 bytes): after a write, the
            least recently used shards are deleted until it fits (0: no cap).
        embedding_shard_bytes: When the documents hold more bytes of text than this, each
            chunk set is embedded in shards of about this size by parallel steps before
            its own step, which then embeds nothing they embedded (0: never shard).
        llm: Model settings: judge (a model name, or empty), temperature, max_tokens,
            system_prompt, prompt_template, concurrency, and the deadlines: timeout_s (a
            request's wait for its answer) and max_retries, judge_timeout_s and
            judge_max_retries (the judge's). The answer models are generation_models.
        llm_secret_name: The Secret with the URL and key of the OpenAI-compatible endpoint
            (and of the judge's, when elsewhere): manifests/examples/llm-endpoint.yaml.
        qa_generation: How to generate a test set when none is given: llm (model),
            num_questions, question_types, agent_description, language.
        results_store_secret_name: The Secret holding RAGSWEEP_STORE_URL, the results
            database the run is published to (optional: without it, nothing is stored).
        vector_store_secret_name: The Secret with the vector stores' connections
            (RAGSWEEP_MILVUS_URI, RAGSWEEP_PGVECTOR_URL, RAGSWEEP_ORACLE_DSN, ...), read by
            the retrieve step (optional: memory and Milvus Lite need none).
        keep_collections: Keep each store's collections after retrieval (their names are
            logged), e.g. to deploy the winner's; by default they are dropped.
        baseline: Compare with this stored run id, or "latest" (the latest successful run of
            the same sweep: of sweep_name); empty: no comparison.
        sweep_name: The sweep's name (1 to 100 letters, digits, '.', '_', '-'), which
            baseline "latest" follows whatever changes in the documents, test set or grid
            (the comparison says what changed); empty: the sweep key, a hash of the
            documents, test set, search space and metric, so any change starts a new sweep.
        deployed_config: The configuration in production, whose regression against the
            baseline is the alarm: its config id, or the YAML `ragsweep best` prints; empty:
            the alarm is whether the sweep's best got worse.
        mlflow_tracking_uri: Log the sweep to this MLflow tracking server (a parent run, a
            child run per configuration); empty: MLFLOW_TRACKING_URI of mlflow_secret_name,
            else no MLflow. Credentials belong in the Secret, never here.
        mlflow_secret_name: The Secret with MLflow's variables (MLFLOW_TRACKING_URI,
            MLFLOW_TRACKING_TOKEN or _USERNAME and _PASSWORD, MLFLOW_EXPERIMENT_NAME), read
            by the track step (optional).
        patterns: Write the best N configurations as runnable patterns (the rank step's
            rag_patterns artifact: pattern.json, evaluation_results.json, indexing.py and
            inference.py per pattern); 0: none.
        preset: Red Hat AutoRAG's preset, speed or balanced: its chunk sizes and overlaps
            (a quarter of its characters, in tokens) and the sentence chunker, instead of
            search_space's; empty: search_space's.
        vector_io_provider_id: Red Hat AutoRAG's vector store: sweep the one store it names
            (milvus, pgvector, oracle; faiss and sqlite-vec: memory) instead of
            search_space's vector_stores; empty: those.
        ogx_secret_name: Red Hat AutoRAG's OGX Secret (its OGX_CLIENT_* keys; the URL is the
            server's root): the model endpoint when llm_secret_name gives none.
        maas_secret_name: Red Hat AutoRAG upstream's MaaS Secret (its MAAS_* keys): the model
            endpoint when llm_secret_name gives none (one of the two, not both).
        vector_db_secret_name: Red Hat AutoRAG upstream's vector database Secret (MILVUS_URI,
            MILVUS_TOKEN; PGVECTOR_HOST, _PORT, _DB, _USER, _PASSWORD): the connections
            vector_store_secret_name does not give.
        agents: Deployed RAG applications to evaluate beside the sweep, each NAME=URL (an
            OpenAI-compatible chat endpoint that retrieves on its own; its key, if it takes
            one, is a key of llm_secret_name, docs/agents.md): each a leaderboard row
            agent:NAME.
    """
    # the model endpoint's Secrets: ragsweep's, and Red Hat AutoRAG's two kinds
    llm_secrets = {
        "llm_connection": llm_secret_name,
        "ogx_connection": ogx_secret_name,
        "maas_connection": maas_secret_name,
    }
    # the run's settings, built and validated once; every later step reads them from here
    configured = tasks.step(
        configure(
            input_data_bucket_name=input_data_bucket_name,
            input_data_key=input_data_key,
            input_data_keys=input_data_keys,
            test_data_bucket_name=test_data_bucket_name,
            test_data_key=test_data_key,
            embedding_models=embedding_models,
            generation_models=generation_models,
            search_space=search_space,
            preset=preset,
            vector_io_provider_id=vector_io_provider_id,
            optimization_metric=optimization_metric,
            optimization_max_rag_patterns=optimization_max_rag_patterns,
            max_document_bytes=max_document_bytes,
            max_questions=max_questions,
            max_llm_calls=max_llm_calls,
            strategy=strategy,
            trials_at_once=trials_at_once,
            seed=seed,
            skip_unresolved=skip_unresolved,
            embedding_cache=embedding_cache,
            cache_max_gb=cache_max_gb,
            embedding_shard_bytes=embedding_shard_bytes,
            baseline=baseline,
            keep_collections=keep_collections,
            llm=llm,
            qa_generation=qa_generation,
            patterns=patterns,
            sweep_name=sweep_name,
            agents=agents,
        ),
        **llm_secrets,  # an openai:<model> embedding model's identity is its endpoint's URL
    )
    settings = configured.outputs["settings"]
    testset = tasks.step(
        load_testset(settings=settings),
        s3_connection=test_data_secret_name,
        store_connection=results_store_secret_name,  # for test_data_key store:<name>
        retry=True,
        cache=False,
    )
    inputs = tasks.step(
        ingest(settings=settings, testset=testset.outputs["testset"]),
        s3_connection=input_data_secret_name,
        retry=True,
        cache=False,
    )
    # kfp.local runs no dsl.OneOf of artifacts, so this step always runs: it passes a given
    # test set through and generates one when none was given
    questions = tasks.step(
        generate_qa(
            settings=settings,
            documents=inputs.outputs["documents"],
            given=inputs.outputs["questions"],
        ),
        **llm_secrets,
        retry=True,
    )
    chunk_groups = tasks.step(
        plan(
            settings=settings,
            questions=questions.outputs["questions"],
            groups=tasks.loop_parallelism(),  # one group per branch that runs at once
        ),
        **llm_secrets,  # a space with query transformations checks the endpoint here
    )

    # Beyond one pod: documents larger than embedding_shard_bytes are embedded in shards,
    # one step each, and gathered by one merge that every chunk_embed reads before it embeds.
    # The loop is flat and never empty (kfp.local 2.17 collects from neither a nested nor
    # an empty loop, and no Collected can feed a task inside the next loop: hence the merge).
    shards = tasks.step(plan_shards(settings=settings, documents=inputs.outputs["documents"]))
    with dsl.ParallelFor(shards.output, parallelism=tasks.loop_parallelism()) as shard:
        embedded = tasks.step(
            embed_shard(settings=settings, documents=inputs.outputs["documents"], shard=shard),
            s3_connection=input_data_secret_name,
            **llm_secrets,
        )
    sharded = tasks.step(merge_shards(shards=dsl.Collected(embedded.outputs["embeddings"])))

    # Inside the loop kfp.local (2.17) resolves only pipeline parameters, the loop item and
    # artifacts: hence settings as an artifact. The fan-out's parallelism is fixed when the
    # pipeline is built (ragsweep.kubeflow.tasks); a branch takes a group of chunk
    # configurations, so each process loads its model once.
    with dsl.ParallelFor(chunk_groups.output, parallelism=tasks.loop_parallelism()) as chunk_group:
        chunks = tasks.step(
            chunk_embed(
                settings=settings,
                documents=inputs.outputs["documents"],
                chunk_group=chunk_group,
                sharded=sharded.outputs["embeddings"],
                questions=questions.outputs["questions"],  # embedded here, read by retrieve
            ),
            s3_connection=input_data_secret_name,  # for an s3:// embedding cache
            **llm_secrets,  # for embedding models openai:<model>
        )
        retrieved = tasks.step(
            retrieve(
                settings=settings,
                chunks=chunks.outputs["chunks"],
                questions=questions.outputs["questions"],
                chunk_group=chunk_group,
            ),
            s3_connection=input_data_secret_name,
            **llm_secrets,
            vector_store_connection=vector_store_secret_name,
            vector_db_connection=vector_db_secret_name,
        )

    # one step answers and judges every configuration: answers are shared across chunk
    # sets, and successive halving needs every configuration's scores to promote
    evaluated = tasks.step(
        evaluate(
            settings=settings,
            retrievals=dsl.Collected(retrieved.outputs["retrievals"]),
            questions=questions.outputs["questions"],
            documents=inputs.outputs["documents"],  # a warm start's match, agents' contexts
        ),
        **llm_secrets,  # and the deployed assistants' key
        store_connection=results_store_secret_name,  # the judges' labels, the warm start
        retry=True,
    )
    ranked = tasks.step(
        rank(
            settings=settings,
            scores=evaluated.outputs["scores"],
            answers=evaluated.outputs["answers"],
            questions=questions.outputs["questions"],
            documents=inputs.outputs["documents"],
        ),
        store_connection=results_store_secret_name,  # labels of answers the run reproduced
    )
    stored = tasks.step(
        publish(
            leaderboard=ranked.outputs["leaderboard"],
            results=ranked.outputs["results"],
            questions=questions.outputs["questions"],
            pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        ),
        store_connection=results_store_secret_name,
        retry=True,
    )
    tasks.step(
        track(
            leaderboard=ranked.outputs["leaderboard"],
            report=ranked.outputs["report"],
            mlflow_tracking_uri=mlflow_tracking_uri,
            pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        ),
        mlflow_connection=mlflow_secret_name,  # MLflow's client retries its requests
        cache=False,  # the tracking store lives outside the pipeline
    )
    with dsl.If(baseline != "", name="baseline-given"):
        tasks.step(
            compare(
                leaderboard=ranked.outputs["leaderboard"],
                results=ranked.outputs["results"],
                run_report=ranked.outputs["report"],
                baseline=baseline,
                pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                deployed_config=deployed_config,
            ),
            store_connection=results_store_secret_name,
            retry=True,
            cache=False,  # the baseline may change between runs
        )
    return Results(
        leaderboard=ranked.outputs["leaderboard"],
        results=ranked.outputs["results"],
        breakdown=ranked.outputs["breakdown"],
        failures=ranked.outputs["failures"],
        report=ranked.outputs["report"],
        testset=questions.outputs["questions"],
        rag_patterns=ranked.outputs["rag_patterns"],
        run_id=stored.output,
    )


@cache
def _cluster_pipeline() -> GraphComponent:
    """The pipeline for a cluster, with the steps' resources and retries.

    Built on a thread of its own: for each resource it sets, kfp reads the call stack
    (``inspect.stack``), and each frame of no module's file (an import's, ``runpy``'s)
    costs a scan of every loaded module. A new thread's stack holds a few frames, all of
    known modules: 0.3 CPU s instead of 1.4 at a 40-frame depth (8.5 s inside pytest's
    collection)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        built = pool.submit(dsl.pipeline, sweep, name=tasks.PIPELINE_NAME, description=DESCRIPTION)
        return built.result()


def __getattr__(name: str) -> GraphComponent:
    # ``sweep_pipeline`` is built on first use, not on import: kfp reads the call stack's
    # source for each resource it sets (~2 s of CPU), which a local run, built without
    # resources by ``tasks.for_local_run``, never needs
    if name == "sweep_pipeline":
        return _cluster_pipeline()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from kfp import compiler

    target = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).with_suffix(".yaml"))
    compiler.Compiler().compile(_cluster_pipeline(), target)
