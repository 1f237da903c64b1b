"""The ragsweep pipeline: ingest, fan out over chunk configurations, answer and judge, rank.

Reads top to bottom like the data flow in docs/architecture.md. Compile with ``make compile``; the
compiled YAML is committed beside this file. Parameters take Red Hat AutoRAG's names where
the concept is the same; ``ragsweep.kubeflow.tasks`` says how each step runs on OpenShift AI.
"""

import inspect
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any, NamedTuple

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
from ragsweep.kubeflow import tasks
from ragsweep.kubeflow.parameters import configure_parameters
from ragsweep.models.llm import LLMSettings
from ragsweep.store.database import DEFAULT_STORE_CONNECTION
from ragsweep.sweep.options import SHAPERS, pipeline_options
from ragsweep.sweep.space import SearchSpace

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


def steps(
    input_data_key: str = "",
    test_data_key: str = "",
    input_data_bucket_name: str = "",
    test_data_bucket_name: str = "",
    input_data_secret_name: str = tasks.DEFAULT_CONNECTION,
    test_data_secret_name: str = tasks.DEFAULT_CONNECTION,
    input_data_keys: list = [],  # noqa: B006 (a pipeline parameter's default)
    search_space: dict = DEFAULT["search_space"],
    llm: dict = DEFAULT_LLM,
    llm_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    qa_generation: dict = DEFAULT_QA,
    results_store_secret_name: str = DEFAULT_STORE_CONNECTION,
    vector_store_secret_name: str = tasks.DEFAULT_VECTOR_STORE_CONNECTION,
    deployed_config: str = "",
    mlflow_tracking_uri: str = "",
    mlflow_secret_name: str = tasks.DEFAULT_MLFLOW_CONNECTION,
    ogx_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    maas_secret_name: str = tasks.DEFAULT_LLM_CONNECTION,
    vector_db_secret_name: str = tasks.DEFAULT_VECTOR_STORE_CONNECTION,
    **options: Any,
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
        search_space: The search space's lists and fields (docs/search.md): chunkers,
            chunk_sizes (in the embedding model's tokens), chunk_overlaps, top_ks,
            search_types (similarity, mmr, hybrid), mmr_lambdas, query_prefix /
            passage_prefix (text before each question / chunk; default: the model
            family's), vector_stores (memory, milvus, pgvector, oracle) with their indexes
            and distance, rerankers with their fetch depth, query_transforms.
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
        deployed_config: The configuration in production, whose regression against the
            baseline is the alarm: its config id, or the YAML `ragsweep best` prints; empty:
            the alarm is whether the sweep's best got worse.
        mlflow_tracking_uri: Log the sweep to this MLflow tracking server (a parent run, a
            child run per configuration); empty: MLFLOW_TRACKING_URI of mlflow_secret_name,
            else no MLflow. Credentials belong in the Secret, never here.
        mlflow_secret_name: The Secret with MLflow's variables (MLFLOW_TRACKING_URI,
            MLFLOW_TRACKING_TOKEN or _USERNAME and _PASSWORD, MLFLOW_EXPERIMENT_NAME), read
            by the track step (optional).
        ogx_secret_name: Red Hat AutoRAG's OGX Secret (its OGX_CLIENT_* keys; the URL is the
            server's root): the model endpoint when llm_secret_name gives none.
        maas_secret_name: Red Hat AutoRAG upstream's MaaS Secret (its MAAS_* keys): the model
            endpoint when llm_secret_name gives none (one of the two, not both).
        vector_db_secret_name: Red Hat AutoRAG upstream's vector database Secret (MILVUS_URI,
            MILVUS_TOKEN; PGVECTOR_HOST, _PORT, _DB, _USER, _PASSWORD): the connections
            vector_store_secret_name does not give.
    """
    given = {**{k: v for k, v in locals().items() if k != "options"}, **options}
    # the model endpoint's Secrets: ragsweep's, and Red Hat AutoRAG's two kinds
    llm_secrets = {
        "llm_connection": llm_secret_name,
        "ogx_connection": ogx_secret_name,
        "maas_connection": maas_secret_name,
    }
    # the run's settings, built and validated once; every later step reads them from here
    configured = tasks.step(
        configure(**{name: given[name] for name in configure_parameters()}),
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
            documents=inputs.outputs["documents"],  # sized against the steps' memory limits
            groups=tasks.loop_parallelism(),  # one group per branch that runs at once
        ),
        **llm_secrets,  # a space with query transformations checks the endpoint here
    )

    # Beyond one pod: documents larger than embedding_shard_bytes are embedded in shards,
    # one step each, and gathered by one merge that every chunk_embed reads before it embeds.
    # The loop is flat and never empty (kfp.local 2.17 collects from neither a nested nor
    # an empty loop, and no Collected can feed a task inside the next loop: hence the merge).
    # It starts once plan has checked the budget and the memory: nothing embeds before.
    shards = tasks.step(plan_shards(settings=settings, documents=inputs.outputs["documents"]))
    shards.after(chunk_groups)
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
    # configurations, so each process loads its model once. With retrieval_question_blocks
    # above 1, a branch is a (group, block of questions) pair: retrieval's rows, which grow
    # with the questions, are split across steps within this one flat loop (the only shape
    # kfp.local collects from: a loop of blocks nested in the groups', or a second loop
    # reading this one's chunks, is not). Each branch's chunk_embed rebuilds its group's
    # chunk sets from the vectors the shard loop embedded (plan_shards then lists every
    # chunk set), embedding only its block's questions: nothing is embedded twice.
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
    with dsl.If(given["baseline"] != "", name="baseline-given"):
        tasks.step(
            compare(
                leaderboard=ranked.outputs["leaderboard"],
                results=ranked.outputs["results"],
                run_report=ranked.outputs["report"],
                baseline=given["baseline"],
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


def _signature() -> inspect.Signature:
    """The pipeline's parameters: ``steps``' own, then each run option's (under AutoRAG's
    name where it has one) and AutoRAG's preset and store, from their declarations."""
    own = [p for p in inspect.signature(steps).parameters.values() if p.kind != p.VAR_KEYWORD]
    declared = [(o.parameter, o.kind, o.pipeline_default()) for o in pipeline_options()] + [
        (shaper.name, str, "") for shaper in SHAPERS
    ]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return inspect.Signature(
        own + [inspect.Parameter(n, kind, default=d, annotation=t) for n, t, d in declared],
        return_annotation=Results,
    )


def _docstring() -> str:
    """``steps``' docstring with each run option's help among its Args (declared with
    their settings: ``ragsweep.sweep.options``)."""
    declared = [(o.parameter, o.declared.help) for o in pipeline_options()]
    declared += [(shaper.name, shaper.help) for shaper in SHAPERS]
    lines = "\n".join(f"        {name}: {text}" for name, text in declared)
    return f"{steps.__doc__.rstrip()}\n{lines}\n    "


SIGNATURE = _signature()


def sweep(*arguments: Any) -> Results:
    # KFP calls a pipeline's function with its parameters in order (``SIGNATURE``)
    return steps(**dict(zip(SIGNATURE.parameters, arguments, strict=True)))


sweep.__signature__ = SIGNATURE  # type: ignore[attr-defined]
sweep.__doc__ = _docstring()


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
