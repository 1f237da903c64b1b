"""The LLM judge: reading its verdict from every kind of reply, the corrective retry, errors
recorded per answer, the cache, and its place in the scores."""

import json

import pyarrow as pa
import pytest
from scripted_llm import Step

from ragsweep.core.errors import RagsweepError
from ragsweep.evaluation.judge import VERDICT_SCHEMA, Judge, Judged, parse_verdict
from ragsweep.evaluation.scoring import score_answers
from ragsweep.models.llm import LLMSettings
from ragsweep.models.prompts import JUDGE_OUT_OF_SCOPE, JUDGE_SYSTEM_PROMPT

JUDGE = LLMSettings(judge="judge", backoff_s=0.01, concurrency=1)
RIGHT = Judged("Which port?", ["Port 9000."], "It uses port 9000.")
WRONG = Judged("Which port?", ["Port 9000."], "It listens on 8443.")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"correctness": true, "correctness_reason": "Same port."}', (True, "Same port.")),
        ('```json\n{"correctness": false, "correctness_reason": "Wrong."}\n```', (False, "Wrong.")),
        (
            'Sure! Here is my verdict: {"correctness": true, "correctness_reason": "ok"} Hope '
            "this helps {not json}.",
            (True, "ok"),
        ),
        ('{"result": {"correctness": "no", "reason": "Contradicts."}}', (False, "Contradicts.")),
        ('[{"verdict": {"Correctness": "Yes"}}]', (True, "")),
        (
            "{'correctness': True, 'correctness_reason': 'python literals'}",
            (True, "python literals"),
        ),
        ('{"eval_passed": false, "reason": "Giskard style"}', (False, "Giskard style")),
        ('{"correctness": 1, "correctness_reason": null}', (True, "")),
        ('{"note": {"a": 1}} then {"correctness": "Incorrect.", "reason": "x"}', (False, "x")),
    ],
)
def test_a_verdict_is_read_from_bare_fenced_chatty_or_wrapped_replies(reply, expected):
    assert parse_verdict(reply) == expected


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("The answer is correct.", "holds no JSON object"),
        ('{"correctness": "maybe", "reason": "unsure"}', 'no "correctness" true or false'),
        ('{"correctness": true, "reason": "cut off', "holds no JSON object"),
    ],
)
def test_a_reply_without_a_verdict_says_what_is_missing(reply, problem):
    with pytest.raises(ValueError, match=problem):
        parse_verdict(reply)


def test_the_judge_asks_for_json_and_gives_verdicts_in_order(llm_server):
    verdicts = Judge("judge", JUDGE).judge([RIGHT, WRONG])
    assert [v.correct for v in verdicts] == [True, False]
    assert all(v.reason and v.error is None and v.llm_calls == 1 for v in verdicts)
    first = llm_server.requests[0]
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"] == VERDICT_SCHEMA
    assert first["temperature"] == 0 and first["model"] == "judge"
    assert first["messages"][0]["content"] == JUDGE_SYSTEM_PROMPT
    assert "Port 9000." in first["messages"][1]["content"]


def test_a_server_without_json_mode_is_asked_again_without_it(llm_server):
    llm_server.refuse_json_mode = True
    [verdict] = Judge("judge", JUDGE).judge([RIGHT])
    assert verdict.correct is True
    assert ["response_format" in r for r in llm_server.requests] == [True, True, False]


def test_a_server_without_json_schemas_is_asked_for_a_json_object(llm_server):
    llm_server.refuse_json_schema = True
    verdicts = Judge("judge", JUDGE).judge([RIGHT, WRONG])
    assert [v.correct for v in verdicts] == [True, False]
    kinds = [r["response_format"]["type"] for r in llm_server.requests]
    # each answer asked once more as a JSON object, after the schema was refused
    assert kinds.count("json_object") == 2 and set(kinds) == {"json_schema", "json_object"}


@pytest.mark.parametrize(
    ("unreadable", "instruction"),
    [
        pytest.param(
            ["I think the answer is right."],
            "could not be read: it holds no JSON object",
            id="one corrective retry",
        ),
        pytest.param(
            ["Correct!", '{"verdict": "fine"}'],
            "exactly one line of JSON and nothing else",
            id="asked again with stricter instructions",
        ),
    ],
)
def test_an_unreadable_reply_is_asked_again(llm_server, unreadable, instruction):
    llm_server.then(*(Step(content=text) for text in unreadable))
    [verdict] = Judge("judge", JUDGE).judge([RIGHT])
    assert verdict.correct is True and verdict.llm_calls == len(unreadable) + 1
    retry = llm_server.requests[len(unreadable)]["messages"]
    assert retry[-2] == {"role": "assistant", "content": unreadable[-1]}
    assert instruction in retry[-1]["content"]


def test_a_reply_unreadable_after_every_retry_is_a_judge_error_not_a_crash(llm_server):
    llm_server.then(
        Step(content="Correct!"), Step(content='{"verdict": "fine"}'), Step(content="fine!")
    )
    verdict, other = Judge("judge", JUDGE).judge([RIGHT, WRONG])
    assert verdict.correct is None and verdict.llm_calls == 3
    assert verdict.error.startswith("judge reply unreadable after 2 corrective retries")
    assert "'fine!'" in verdict.error
    assert other.correct is False


def test_a_failed_judge_request_is_a_judge_error(llm_server):
    llm_server.then(Step(status=500), Step(status=500))
    [verdict] = Judge("judge", LLMSettings(judge="judge", judge_max_retries=1, backoff_s=0)).judge(
        [RIGHT]
    )
    assert verdict.error.startswith("judge request failed: HTTP 500 after 2 call(s)")


def test_verdicts_are_cached_and_identical_answers_judged_once(llm_server):
    first = Judge("judge", JUDGE).judge([RIGHT, RIGHT, WRONG])
    assert llm_server.chat_calls == 2
    again = Judge("judge", JUDGE).judge([WRONG, RIGHT])
    assert llm_server.chat_calls == 2
    assert [v.correct for v in again] == [False, True] and all(v.cached for v in again)
    assert again[1].reason == first[0].reason


ANSWERS = pa.table(
    {
        "config_id": ["c1", "c1", "c2"],
        "question_id": ["q1", "q2", "q1"],
        "retrieved_doc_ids": [["a.md"], ["b.md"], ["b.md"]],
        "context": ["The console uses port 9000.", "Backups: 90 days.", "Backups: 90 days."],
        "answer": ["It uses port 9000.", "", "It listens on 8443."],
        "answer_error": [None, "HTTP 500 after 5 call(s): boom", None],
    }
)
TESTSET = pa.table(
    {
        "question_id": ["q1", "q2"],
        "question": ["Which port does the console use?", "How long are backups kept?"],
        "reference_answers": [["Port 9000."], ["90 days"]],
        "reference_doc_ids": [["a.md"], ["b.md"]],
    }
)


def test_scores_carry_the_judges_verdicts_next_to_the_other_metrics(llm_server):
    scores = score_answers(ANSWERS, TESTSET, JUDGE)
    assert scores["correctness"].to_pylist() == [1.0, 0.0, 0.0]
    assert scores["judge_error"].to_pylist() == [None, "not judged: the answer failed", None]
    reasons = scores["correctness_reason"].to_pylist()
    assert reasons[0] and reasons[2] and "%" in reasons[2]  # the judge's reasons
    assert reasons[1] == "answer failed: HTTP 500 after 5 call(s): boom"
    assert scores["answer_correctness"].to_pylist()[0] > 0
    assert llm_server.chat_calls == 2  # the failed answer is not sent
    record = json.loads(scores.schema.metadata[b"ragsweep.judge"])
    assert record["model"] == "judge" and record["system_prompt"] == JUDGE_SYSTEM_PROMPT
    assert record["endpoint"] == llm_server.url


def test_a_failed_answer_scores_zero_on_answer_metrics_and_keeps_its_retrieval_metrics():
    scores = score_answers(ANSWERS, TESTSET, LLMSettings()).to_pylist()
    failed = scores[1]  # c1's answer to q2; it retrieved q2's reference document
    assert failed["answer_correctness"] == failed["faithfulness"] == 0.0
    assert failed["context_correctness"] == failed["document_recall"] == 1.0
    assert failed["correctness"] is None  # no judge, no verdict


def test_a_verdict_that_cannot_be_read_is_missing_not_wrong_and_says_why(llm_server):
    def responder(request: dict) -> str:
        wrong = "8443" in request["messages"][1]["content"]  # c2's answer, and its retries
        return "no idea" if wrong else '{"correctness": 1}'

    llm_server.responder = responder
    scores = score_answers(ANSWERS, TESTSET, JUDGE).to_pylist()
    unread = scores[2]
    assert unread["correctness"] is None  # the judge's failure, not the configuration's
    assert unread["judge_error"].startswith("judge reply unreadable after 2 corrective retries")
    assert unread["correctness_reason"] == f"verdict unreadable: {unread['judge_error']}"
    assert "'no idea'" in unread["correctness_reason"]
    assert scores[0]["correctness"] == 1.0 and scores[0]["judge_error"] is None


def test_when_every_answer_failed_the_judge_is_not_asked_and_every_answer_scores_zero(
    llm_server,
):
    failed = ANSWERS.set_column(
        ANSWERS.schema.get_field_index("answer_error"),
        "answer_error",
        pa.array(["HTTP 400 after 1 call(s): context too long"] * 3),
    ).set_column(ANSWERS.schema.get_field_index("answer"), "answer", pa.array([""] * 3))
    scores = score_answers(failed, TESTSET, JUDGE)
    assert scores["correctness"].to_pylist() == [0.0, 0.0, 0.0]
    assert set(scores["correctness_reason"].to_pylist()) == {
        "answer failed: HTTP 400 after 1 call(s): context too long"
    }
    assert llm_server.chat_calls == 0


def test_without_a_judge_there_are_no_verdicts_and_no_calls(llm_server):
    scores = score_answers(ANSWERS, TESTSET, LLMSettings())
    assert scores["correctness"].null_count == 3 and llm_server.chat_calls == 0


def test_a_judge_that_gives_no_verdict_at_all_stops_with_one_message(llm_server):
    llm_server.responder = lambda request: "no idea"
    with pytest.raises(RagsweepError, match="the judge judge gave no verdict on any of 2 answers"):
        score_answers(ANSWERS, TESTSET, JUDGE)


def test_an_out_of_scope_question_tells_the_judge_a_refusal_is_correct(llm_server):
    refusal = Judged("Is there a student discount?", ["No information."], "I cannot answer.")
    out_of_scope = Judged(refusal.question, refusal.references, refusal.answer, "out of scope")
    Judge("judge", JUDGE).judge([refusal, out_of_scope, out_of_scope])
    assert llm_server.chat_calls == 2  # judged apart from the same in-scope item, once
    plain, scoped = (r["messages"][-1]["content"] for r in llm_server.requests)
    assert "out of scope" not in plain
    assert scoped == plain + JUDGE_OUT_OF_SCOPE
    assert "only if it declines to answer" in llm_server.requests[0]["messages"][0]["content"]


def test_scores_pass_the_question_type_to_the_judge(llm_server):
    typed = TESTSET.append_column("question_type", pa.array(["out of scope", "simple"]))
    score_answers(ANSWERS, typed, JUDGE)
    notes = [JUDGE_OUT_OF_SCOPE in r["messages"][-1]["content"] for r in llm_server.requests]
    assert notes == [True, True]  # the two answers to q1; q2's answer failed: not judged
