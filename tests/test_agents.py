"""A deployed assistant as a leaderboard row (``ragsweep run --agent NAME=URL``): two nights
of one named sweep through `ragsweep run` (kfp.local) with two assistants on a scripted
OpenAI-compatible server, ``mybot`` (its replies carry their contexts) and ``plainbot`` (no
contexts), a scripted judge, and the embeddings from the same server. On the second night
``mybot`` answers every question wrongly. One pair of runs serves every test here."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_chromium, own_cache, ragsweep_here
from scripted_llm import ScriptedLLM, default_responder

from ragsweep.answering import agents
from ragsweep.core.errors import RagsweepError
from ragsweep.core.schemas import read_table, settings_of
from ragsweep.store import database

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
RAGSWEEP = str(Path(sys.executable).parent / "ragsweep")
AGENT_KEY = "sk-agent-do-not-leak-51c7"
HISTORY = [
    {"role": "user", "content": "I am installing Tidewater Server."},
    {"role": "assistant", "content": "Happy to help with the installation."},
]
WRONG = "I do not know."


def ragsweep(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([RAGSWEEP, *args], capture_output=True, text=True, env=env, timeout=900)


def example_rows() -> list[dict]:
    """The examples' first 6 questions; the first with a conversation history."""
    rows = [json.loads(line) for line in (EXAMPLES / "testset.jsonl").read_text().splitlines()]
    rows = rows[:6]
    rows[0]["conversation_history"] = HISTORY
    return rows


class Assistants:
    """The scripted assistants' behaviour: ``mybot`` answers each question with its
    reference answer and cites its reference context (until ``wrong``), ``plainbot``
    answers with the reference answer and cites nothing; other requests (the judge's, the
    embeddings) get the scripted server's replies."""

    def __init__(self, rows: list[dict]) -> None:
        self.by_question = {r["question"]: r for r in rows}
        self.wrong = False

    def responder(self, request: dict) -> str:
        if request.get("model") not in ("mybot", "plainbot"):
            return default_responder(request)
        row = self.by_question[request["messages"][-1]["content"]]
        mine = request["model"] == "mybot"
        return WRONG if mine and self.wrong else row["reference_answer"]

    def message_fields(self, request: dict) -> dict:
        if request.get("model") != "mybot":
            return {}
        row = self.by_question[request["messages"][-1]["content"]]
        doc_id = row["metadata"]["seed_document_id"]
        return {"context": [{"doc_id": doc_id, "text": row["reference_context"]}]}


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """Night 1 and night 2 of sweep ``kb-agents`` (one configuration of the sweep, the two
    assistants, a judge); before night 2, ``mybot`` starts answering wrongly (and the
    reply cache is emptied: its URL and questions are the same)."""
    tmp = tmp_path_factory.mktemp("agents")
    docs = tmp / "docs"
    shutil.copytree(EXAMPLES / "docs", docs)
    rows = example_rows()
    testset = tmp / "testset.jsonl"
    testset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    url = f"sqlite:///{tmp / 'results.db'}"
    assistants = Assistants(rows)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGSWEEP_", "MLFLOW_"))}
    with ScriptedLLM() as server:
        server.models.append("embedder")
        server.responder = assistants.responder
        server.message_fields = assistants.message_fields
        env |= {
            "RAGSWEEP_EMBEDDING_BASE_URL": server.url,
            "RAGSWEEP_LLM_BASE_URL": server.url,
            "RAGSWEEP_AGENT_API_KEY": AGENT_KEY,
            "RAGSWEEP_CACHE_DIR": str(tmp / "cache-1"),
        }
        night = ["run", "--docs", str(docs), "--testset", str(testset), "--sweep", "kb-agents"]
        night += ["--baseline", "latest", "--store", url, "--output", str(tmp / "runs")]
        night += ["--chunk-sizes", "64", "--top-k", "3", "--search-types", "similarity"]
        night += ["--embedding-models", "openai:embedder", "--cache", str(tmp / "embeddings")]
        night += ["--judge", "judge", "--agent", f"mybot={server.url}"]
        night += ["--agent", f"plainbot={server.url}"]
        first = ragsweep(*night, env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        asked_first = [r for r in server.requests if r.get("model") in ("mybot", "plainbot")]
        keys = [a for a, r in zip(server.authorizations, server.requests, strict=True)
                if r.get("model") in ("mybot", "plainbot")]  # fmt: skip
        assistants.wrong = True
        env["RAGSWEEP_CACHE_DIR"] = str(tmp / "cache-2")
        second = ragsweep(*night, env=env)
        assert second.returncode in (0, 1), second.stderr[-3000:]
    runs = sorted(p for p in (tmp / "runs").iterdir() if p.name != "testsets")
    return {
        "first": first,
        "second": second,
        "runs": runs,
        "url": url,
        "asked": asked_first,
        "keys": keys,
        "rows": rows,
    }


def row(board, label: str) -> dict:
    found = [r for r in board.to_pylist() if r["label"] == label]
    assert found, f"no row {label} in {board['label'].to_pylist()}"
    return found[0]


def test_an_agent_is_ranked_on_the_leaderboard_with_the_judges_correctness_and_intervals(nights):
    board = read_table(nights["runs"][0] / "leaderboard.arrow", "leaderboard")
    mine = row(board, "agent:mybot")
    assert mine["questions"] == 6
    # it answers every question with its reference answer: all correct, the judge agrees
    assert mine["answer_correctness"] == pytest.approx(1.0)
    assert mine["correctness"] == pytest.approx(1.0)
    for metric in ("answer_correctness", "correctness"):
        assert mine[f"{metric}_low"] <= mine[metric] <= mine[f"{metric}_high"]
    assert mine["rank"] == 1 and mine["tied_with_best"]
    assert mine["config_id"] == agents.row_id("mybot")
    swept = [r for r in board.to_pylist() if not r["label"].startswith("agent:")]
    assert len(swept) == 1 and swept[0]["p_value"] is not None  # tested against the leader
    assert "agent:mybot" in nights["first"].stdout  # the printed leaderboard
    assert "agent:mybot" in (nights["runs"][0] / "report.html").read_text()


def test_an_agent_without_contexts_has_its_retrieval_metrics_not_measured(nights):
    board = read_table(nights["runs"][0] / "leaderboard.arrow", "leaderboard")
    plain = row(board, "agent:plainbot")
    for metric in ("context_correctness", "document_recall", "span_recall", "faithfulness"):
        assert plain[metric] is None, metric
    assert plain["correctness"] == pytest.approx(1.0)


def test_an_agents_contexts_give_it_retrieval_and_span_metrics(nights):
    board = read_table(nights["runs"][0] / "leaderboard.arrow", "leaderboard")
    mine = row(board, "agent:mybot")
    # it cites its reference context, in the reference document: first hit, every document
    assert mine["context_correctness"] == pytest.approx(1.0)
    assert mine["document_recall"] == pytest.approx(1.0)
    assert mine["span_recall"] == pytest.approx(1.0)
    results = read_table(nights["runs"][0] / "results.arrow", "results")
    cited = [r for r in results.to_pylist() if r["config_id"] == mine["config_id"]]
    assert all(r["retrieved_spans"] for r in cited)


def test_each_question_goes_to_the_agent_once_with_its_conversation_history(nights):
    asked = nights["asked"]
    assert sorted(r["model"] for r in asked) == ["mybot"] * 6 + ["plainbot"] * 6
    first = nights["rows"][0]["question"]
    conversational = [r for r in asked if r["messages"][-1]["content"] == first]
    assert len(conversational) == 2
    for request in conversational:
        assert request["messages"][:-1] == HISTORY
    assert set(nights["keys"]) == {f"Bearer {AGENT_KEY}"}


def test_the_agent_appears_in_the_breakdown_and_failures_of_the_run(nights):
    breakdown = read_table(nights["runs"][0] / "breakdown.arrow", "breakdown")
    assert "agent:mybot" in breakdown["label"].to_pylist()
    # night 2: mybot answers wrongly; its failures are listed if it is still the best
    failures = read_table(nights["runs"][1] / "failures.arrow", "failures")
    board = read_table(nights["runs"][1] / "leaderboard.arrow", "leaderboard")
    assert row(board, "agent:mybot")["correctness"] == pytest.approx(0.0)
    assert "agent:mybot" not in failures["label"].to_pylist()  # no longer the best


def test_compare_of_two_nights_reports_the_agents_regression(nights):
    second = nights["second"].stdout
    line = next(ln for ln in second.splitlines() if "agent:mybot" in ln and "regressed" in ln)
    assert "-1.000" in line
    compared = ragsweep_here(
        "compare", nights["runs"][0].name, nights["runs"][1].name, "--store", nights["url"],
        "--deployed", "agent:mybot",
    )  # fmt: skip
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "REGRESSED" in compared.stdout and "deployed: agent:mybot" in compared.stdout


def test_the_agents_key_is_in_no_settings_log_or_compiled_pipeline(nights):
    for run in nights["runs"]:
        for name in ("settings.json", "pipeline.log", "report.html", "leaderboard.json"):
            assert AGENT_KEY not in (run / name).read_text(), name
        settings = json.loads((run / "settings.json").read_text())
        assert any(a.startswith("mybot=http://127.0.0.1:") for a in json.dumps(settings).split('"'))
    compiled = (ROOT / "pipelines" / "sweep_pipeline.yaml").read_text()
    assert "RAGSWEEP_AGENT_API_KEY" in compiled  # mounted from the LLM endpoint's Secret
    assert AGENT_KEY not in compiled


def test_a_rerun_of_an_agent_makes_no_call(tmp_path, monkeypatch, ragsweep_cache):
    monkeypatch.setenv("RAGSWEEP_CACHE_DIR", own_cache(tmp_path / "replies", ragsweep_cache))
    with ScriptedLLM() as server:
        server.responder = lambda request: "Port 7420."
        agent = agents.parse_agent(f"mybot={server.url}")
        items = [("Which port?", ()), ("Which port?", (("user", "Hi."),))]
        first = agents.ask_agent(agent, items, {})
        second = agents.ask_agent(agent, items, {})
        assert server.chat_calls == 2  # the history makes the second question another one
    assert [r.answer.text for r in second] == ["Port 7420."] * 2
    assert all(r.answer.cached for r in second) and not any(r.answer.cached for r in first)
    assert not second[0].retrieved.given


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("mybot", "expected NAME=URL"),
        ("my bot=http://h/v1", "a name is a letter or digit"),
        ("mybot=ftp://h/v1", r"ftp://h/v1 is no http\(s\) URL"),
        ("mybot=http://user:pw@h/v1", "may hold no credentials"),
        ("mybot=http://h/v1?key=abc", "may hold no credentials"),
    ],
)
def test_a_malformed_agent_is_refused_in_one_line(spec, problem):
    with pytest.raises(RagsweepError, match=problem) as caught:
        agents.parse_agent(spec)
    assert "\n" not in str(caught.value) and "pw" not in str(caught.value)


def test_the_same_agent_name_twice_is_refused():
    with pytest.raises(RagsweepError, match="'a' is given twice"):
        agents.parse_agents(["a=http://h/v1", "a=http://k/v1"])


def test_an_agent_context_field_of_another_shape_is_ignored():
    agent = agents.Agent("mybot", "http://h/v1")
    assert not agents.retrieved(agent, "not a list", {"a.md": "text"}).given
    found = agents.retrieved(
        agent, [{"doc_id": "a.md", "text": "brown fox"}], {"d/a.md": "a brown fox"}
    )
    assert found.doc_ids == ("d/a.md",) and found.spans == (("d/a.md", 2, 11),)
    lost = agents.retrieved(
        agent, [{"doc_id": "a.md", "text": "red hen"}], {"d/a.md": "a brown fox"}
    )
    assert lost.given and lost.spans is None


@needs_chromium
def test_the_ui_shows_the_agent_on_the_run_page(nights, page, tmp_path):
    import ui_demo

    engine = database.connect(nights["url"])
    run_id = nights["runs"][0].name
    with ui_demo.serving_store(engine, tmp_path / "runs") as url:
        page.goto(f"{url}/runs/{run_id}")
        page.get_by_text("agent:mybot").first.wait_for()
        assert page.get_by_text("agent:plainbot").count() >= 1
        # its drill-down: every question with its answer, and what it cited
        config = agents.row_id("mybot")
        shown = page.goto(f"{url}/runs/{run_id}/configs/{config}")
        assert shown.status == 200 and "agent:mybot" in page.content()
        question = nights["rows"][2]["id"]
        shown = page.goto(f"{url}/runs/{run_id}/configs/{config}/questions/{question}")
        assert shown.status == 200
        assert nights["rows"][2]["reference_answer"] in page.content()


@needs_chromium
def test_one_question_side_by_side_shows_the_agents_as_columns_with_what_they_cited(
    nights, page, tmp_path
):
    import ui_demo

    engine = database.connect(nights["url"])
    run_id, question = nights["runs"][0].name, nights["rows"][2]["id"]
    with ui_demo.serving_store(engine, tmp_path / "runs") as url:
        page.goto(f"{url}/runs/{run_id}/side-by-side?question={question}")
        heads = page.locator("#side-by-side th.side-config a").all_inner_texts()
        assert {"agent:mybot", "agent:plainbot"} <= set(heads) and len(heads) == 3
        column = heads.index("agent:mybot")
        assert nights["rows"][2]["reference_answer"] in page.content()
        cited = page.locator("#side-by-side td.side-chunks").nth(column)
        assert cited.locator("code.doc").count() == 1  # mybot cites its reference document
        plain = page.locator("#side-by-side td.side-chunks").nth(heads.index("agent:plainbot"))
        assert plain.inner_text().strip() == "nothing retrieved"
        # the run page's charts are drawn with the assistants' rows (no swept parameter)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/runs/{run_id}")
        page.wait_for_selector("#run-charts[data-ready=true]")
        rows = page.evaluate(
            "async () => (await (await fetch(document.getElementById('run-charts')"
            ".dataset.src)).json()).rows.map(r => r.label)"
        )
        assert {"agent:mybot", "agent:plainbot"} <= set(rows) and not errors


def test_settings_json_names_the_agents_of_the_run(nights):
    settings = settings_of(read_table(nights["runs"][0] / "leaderboard.arrow", "leaderboard"))
    assert settings["agents"] == ["mybot", "plainbot"]


def test_submit_and_schedule_pass_the_agent_as_a_parameter_and_its_key_through_a_secret(tmp_path):
    from scripted_servers import Pipelines

    package = ROOT / "pipelines" / "sweep_pipeline.yaml"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAGSWEEP_", "KF_", "AWS_"))}
    with Pipelines(token="sha256~token") as server:
        env = clean | {"HOME": str(tmp_path), "RAGSWEEP_KFP_HOST": server.url}
        env |= {"RAGSWEEP_KFP_TOKEN": server.token, "RAGSWEEP_AGENT_API_KEY": AGENT_KEY}
        s3 = ["--docs", "s3://docs/kb/", "--testset", "s3://eval/testset.json"]
        agent = ["--agent", "mybot=https://bot.example/v1", "--package", str(package)]
        submitted = ragsweep_here("submit", *s3, *agent, env=env)
        scheduled = ragsweep_here("schedule", "create", "--cron", "@daily", *s3, *agent, env=env)
        bad = ragsweep_here("submit", *s3, "--agent", "mybot=https://u:pw@bot/v1", env=env)
        sent = [*server.runs.values(), *server.recurring.values()]
    assert submitted.returncode == 0 and scheduled.returncode == 0, submitted.stderr
    assert [r["runtime_config"]["parameters"]["agents"] for r in sent] == [
        ["mybot=https://bot.example/v1"]
    ] * 2
    executors = sent[0]["pipeline_spec"]["platform_spec"]["platforms"]["kubernetes"]
    evaluate = executors["deploymentSpec"]["executors"]["exec-evaluate"]["secretAsEnv"]
    [llm] = [s for s in evaluate if s["secretNameParameter"]["componentInputParameter"]
             == "llm_secret_name"]  # fmt: skip
    assert {"envVar": "RAGSWEEP_AGENT_API_KEY", "secretKey": "RAGSWEEP_AGENT_API_KEY"} in llm[
        "keyToEnv"
    ]
    assert AGENT_KEY not in json.dumps(sent)
    assert (
        bad.returncode == 2 and "may hold no credentials" in bad.stderr and "pw" not in bad.stderr
    )


def test_an_agents_calls_come_out_of_the_budget_first_and_it_is_no_configuration():
    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.steps import plan_evaluation

    configs = [{"config_id": str(i), "answerer": "llm:m"} for i in range(4)]
    judged = LLMSettings(judge="judge")
    # 4 configurations x 10 questions x (answer + verdict) = 80; the assistant's 20 first
    rounds, planned = plan_evaluation(configs, 10, judged, 100, agents=1)
    assert [(r.configs, r.questions) for r in rounds] == [(4, 10)] and planned == 100
    halved, _ = plan_evaluation(configs, 10, judged, 99, agents=1)
    assert len(halved) > 1  # what is left no longer affords the grid
    with pytest.raises(RagsweepError, match="the deployed assistants .* take 20 LLM calls"):
        plan_evaluation(configs, 10, judged, 20, agents=1)
    model, _ = plan_evaluation(configs, 10, judged, 0, strategy="model", max_configs=2, agents=3)
    assert model[0].configs == 2  # max_configs counts the sweep's configurations only


def test_what_an_agent_without_contexts_did_not_measure_is_null_and_left_out_of_overall_score():
    import pyarrow as pa

    from ragsweep.core.schemas import ANSWERS, SCORES
    from ragsweep.sweep.steps import _AgentAnswers

    values = {name: [0.0, 0.0] for name in SCORES.names if SCORES.field(name).type == pa.float64()}
    values |= {"answer_correctness": [1.0, 1.0], "answer_relevance": [0.5, 0.5]}
    values |= {"faithfulness": [0.25, 0.25], "context_correctness": [0.0, 1.0]}
    scores = pa.table(
        {
            name: values.get(name, [None, None])
            if SCORES.field(name).type == pa.float64()
            else pa.nulls(2, SCORES.field(name).type)
            for name in SCORES.names
        },
        schema=SCORES,
    )
    # row 0: no context field; row 1: contexts, their texts not found in the documents
    measured = _AgentAnswers(ANSWERS.empty_table(), 0, [False, True], [False, False])
    out = measured.measured(scores).to_pydict()
    assert out["context_correctness"] == [None, 1.0]
    assert out["faithfulness"] == [None, 0.25]
    assert out["span_recall"] == [None, None] and out["document_recall"] == [None, 0.0]
    assert out["answer_correctness"] == [1.0, 1.0]
    # overall_score: the mean of faithfulness, answer_correctness, context_correctness and
    # answer_relevance that remain
    assert out["overall_score"] == [pytest.approx(0.75), pytest.approx((0.25 + 1 + 1 + 0.5) / 4)]


def test_the_plan_step_refuses_a_budget_the_agents_alone_would_spend(tmp_path, capsys):
    from builders import configured, make_testset
    from kfp import dsl

    from ragsweep.components.plan import plan
    from ragsweep.core.schemas import write_table

    questions = dsl.Dataset(uri=str(tmp_path / "questions"))
    write_table(make_testset([f"q{i}" for i in range(10)]), questions.path, "testset")
    settings = configured(
        tmp_path / "settings",
        input_data_key="docs",
        llm={"judge": "judge"},
        max_llm_calls=40,
        agents=["mybot=http://bot.example/v1", "other=http://bot.example/v2"],
    )
    with pytest.raises(SystemExit) as exit_info:
        plan.python_func(
            settings=settings,
            questions=questions,
            documents=dsl.Dataset(uri=str(tmp_path / "docs")),
        )
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "the deployed assistants (--agent) take 40 LLM calls" in message


def test_a_comparison_says_when_the_agents_of_a_sweep_changed():
    from ragsweep.reporting.changes import changes

    found = changes({"seed": 42}, {"seed": 42, "agents": ["mybot"]})
    assert found.settings == ['agents: - -> ["mybot"]']


def test_successive_halving_answers_the_agent_on_every_question_in_its_last_round(llm_server):
    import evaluation_case as case
    import pyarrow as pa

    from ragsweep.models.llm import LLMSettings
    from ragsweep.sweep.steps import evaluate

    llm_server.responder = lambda r: "Port 8443." if r["model"] == "bot" else default_responder(r)
    documents = pa.table({"doc_id": list(case.TEXTS), "text": list(case.TEXTS.values())})
    settings = LLMSettings(judge="judge", backoff_s=0.01, concurrency=4)
    bot = agents.Agent("bot", llm_server.url)
    answers, scores = evaluate(
        case.retrievals(), case.testset(), case.SPACE.all_configs(), "auto", settings,
        strategy="halving", agents=[bot], documents=documents,
    )  # fmt: skip
    record = json.loads(scores.schema.metadata[b"ragsweep.evaluation"])
    configs = len(case.SPACE.all_configs())
    assert record["rounds"][0]["configs"] == configs and len(record["rounds"]) > 1
    mine = [r for r in answers.to_pylist() if r["config_id"] == bot.config()["config_id"]]
    assert len(mine) == case.testset().num_rows
    assert {r["answer"] for r in mine} == {"Port 8443."}
    assert {r["round"] for r in mine} == {len(record["rounds"]) - 1}
    dropped = [r for r in answers.to_pylist() if r["answer"] is None]
    assert dropped  # halving left some configurations unanswered, never the assistant
