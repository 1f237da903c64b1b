"""Model answers against a scripted OpenAI-compatible server: requests in flight, retries,
timeouts, the reply cache, failures recorded per item, and keys kept out of messages."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import TEST_API_KEY
from scripted_llm import Step, free_port

from ragsweep.answering.generation import llm_answerer, prompt_messages
from ragsweep.core.errors import RagsweepError
from ragsweep.models.llm import MAX_WAIT_S, Endpoint, LLMSettings, check_reachable, retry_delay

FAST = LLMSettings(backoff_s=0.01, timeout_s=5)


def batch(n: int) -> list[tuple[str, list[str]]]:
    return [
        (f"Which port does service {i} use?", [f"Service {i} uses port {7000 + i}."])
        for i in range(n)
    ]


@pytest.fixture
def no_tiktoken(monkeypatch):
    """tiktoken fetches its encodings from the internet: any use of it fails the test."""
    import tiktoken

    def refuse(*args, **kwargs):
        raise AssertionError("tiktoken was used")

    monkeypatch.setattr(tiktoken, "get_encoding", refuse)
    monkeypatch.setattr(tiktoken, "encoding_for_model", refuse)


def test_answers_keep_their_order_with_several_requests_in_flight(llm_server, no_tiktoken):
    llm_server.hold_until = 4  # the first four wait for each other: only concurrency frees them
    settings = LLMSettings(concurrency=4, backoff_s=0.01)
    answers = llm_answerer("answerer", settings)(batch(10))
    assert llm_server.max_in_flight == 4  # several in flight, never more than asked
    assert [a.text for a in answers] == [f"Service {i} uses port {7000 + i}." for i in range(10)]
    assert all(
        a.llm_calls == 1 and a.prompt_tokens > 0 and a.completion_tokens == 5 for a in answers
    )
    assert all(a.latency_s is not None and a.error is None for a in answers)


def test_requests_are_made_where_an_event_loop_already_runs(llm_server):
    """As from a notebook's cell (or after Playwright's sync API started one). The cell's
    loop runs in a thread of its own: this worker's main thread may already hold the
    session browser's loop, where asyncio.run itself is refused."""

    async def cell() -> list:
        return llm_answerer("answerer", FAST)(batch(3))

    with ThreadPoolExecutor(1) as thread:
        answers = thread.submit(asyncio.run, cell()).result()
    assert [a.text for a in answers] == [f"Service {i} uses port {7000 + i}." for i in range(3)]


def test_the_prompt_is_the_settings_system_prompt_and_filled_template(llm_server):
    settings = LLMSettings(
        system_prompt="Be terse.", prompt_template="Q: {question}\nC: {context}", temperature=0.3
    )
    llm_answerer("answerer", settings)([("Why {braces}?", ["one", "two"])])
    [request] = llm_server.requests
    assert request["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Q: Why {braces}?\nC: one\n\ntwo"},
    ]
    assert request["temperature"] == 0.3 and request["max_tokens"] == 512
    assert request["model"] == "answerer"
    assert prompt_messages("Why {braces}?", ["one", "two"], settings)[1][1].startswith("Q: Why")


def test_a_conversational_question_sends_its_history_as_chat_messages(llm_server):
    settings = LLMSettings(system_prompt="Be terse.", prompt_template="Q: {question}\nC: {context}")
    history = (("user", "I run the admin console."), ("assistant", "How can I help?"))
    answerer = llm_answerer("answerer", settings)
    answerer([("Which port?", ["Port 9000."], history)])
    assert llm_server.requests[0]["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "I run the admin console."},
        {"role": "assistant", "content": "How can I help?"},
        {"role": "user", "content": "Q: Which port?\nC: Port 9000."},
    ]
    answerer([("Which port?", ["Port 9000."], history), ("Which port?", ["Port 9000."])])
    assert llm_server.chat_calls == 2  # the history is part of the cache key: one new call


def test_429_with_retry_after_and_500_are_retried(llm_server):
    llm_server.then(Step(status=429, headers={"Retry-After": "0"}), Step(status=503))
    [answer] = llm_answerer("answerer", FAST)(batch(1))
    assert answer.error is None and answer.text == "Service 0 uses port 7000."
    assert answer.llm_calls == 3 == llm_server.chat_calls


def test_a_stalled_request_times_out_and_is_retried(llm_server):
    llm_server.then(Step(stall_s=5))
    settings = LLMSettings(timeout_s=0.5, backoff_s=0.01)
    [answer] = llm_answerer("answerer", settings)(batch(1))
    assert answer.error is None and answer.llm_calls == 2


def test_a_request_failing_after_its_retries_is_recorded_and_the_rest_answered(llm_server):
    llm_server.then(Step(status=500), Step(status=500))
    settings = LLMSettings(max_retries=1, concurrency=1, backoff_s=0.01)
    first, second = llm_answerer("answerer", settings)(batch(2))
    assert first.text == "" and first.llm_calls == 2
    assert first.error.startswith("HTTP 500 after 2 call(s)")
    assert second.error is None and second.text == "Service 1 uses port 7001."


def test_a_client_error_is_not_retried(llm_server):
    llm_server.then(Step(status=400))
    first, second = llm_answerer("answerer", LLMSettings(concurrency=1))(batch(2))
    assert first.llm_calls == 1 and first.error.startswith("HTTP 400")
    assert second.error is None


def test_a_reply_that_is_no_chat_completion_is_recorded_not_raised(llm_server):
    llm_server.then(Step(body="<html>proxy error</html>"), Step(body='{"choices": []}'))
    first, second, third = llm_answerer("answerer", LLMSettings(concurrency=1))(batch(3))
    assert first.error.startswith("malformed response after 1 call(s)")
    assert second.error.startswith("malformed response after 1 call(s)")
    assert third.error is None


def test_a_model_that_answers_nothing_is_one_clear_error(llm_server):
    llm_server.then(*[Step(status=404)] * 3)
    with pytest.raises(RagsweepError, match="'answerer' at .* answered none of 3 questions"):
        llm_answerer("answerer", FAST)(batch(3))


def test_a_rerun_makes_no_call_and_failures_are_not_cached(llm_server):
    llm_server.then(Step(status=500), Step(status=500))
    settings = LLMSettings(max_retries=1, concurrency=1, backoff_s=0.01)
    first = llm_answerer("answerer", settings)(batch(3))
    assert llm_server.chat_calls == 4 and first[0].error
    again = llm_answerer("answerer", settings)(batch(3))
    assert llm_server.chat_calls == 5  # only the failed one is asked again
    assert [a.cached for a in again] == [False, True, True]
    assert [a.text for a in again[1:]] == [a.text for a in first[1:]]
    assert again[1].llm_calls == 1 and again[1].prompt_tokens == first[1].prompt_tokens
    third = llm_answerer("answerer", settings)(batch(3))
    assert llm_server.chat_calls == 5 and all(a.cached for a in third)


def test_other_settings_or_another_context_are_not_served_from_the_cache(llm_server):
    llm_answerer("answerer", FAST)(batch(2))
    llm_answerer("answerer", LLMSettings(temperature=0.5))(batch(2))
    changed = [(q, [p[0] + " "]) for q, p in batch(2)]
    llm_answerer("answerer", FAST)(changed)
    assert llm_server.chat_calls == 6


def test_server_error_text_never_carries_the_api_key(llm_server):
    body = f'{{"error": {{"message": "bad key Bearer {TEST_API_KEY}"}}}}'
    llm_server.then(Step(status=400, body=body))
    first, _ = llm_answerer("answerer", LLMSettings(concurrency=1))(batch(2))
    assert llm_server.authorizations[0] == f"Bearer {TEST_API_KEY}"  # it was sent
    assert TEST_API_KEY not in first.error and "Bearer ***" in first.error


def test_a_dead_endpoint_fails_fast_with_one_clear_message(monkeypatch):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", TEST_API_KEY)
    with pytest.raises(RagsweepError) as error:
        llm_answerer("answerer", LLMSettings())
    message = str(error.value)
    assert "llm endpoint http://127.0.0.1:" in message and "is unreachable" in message
    assert "check RAGSWEEP_LLM_BASE_URL" in message and "\n" not in message
    assert TEST_API_KEY not in message


def test_a_refused_key_fails_fast(llm_server):
    llm_server.models_status = 401
    with pytest.raises(RagsweepError, match="refused the API key .*RAGSWEEP_LLM_API_KEY"):
        check_reachable(Endpoint.from_env("answerer"))


def test_an_unlisted_model_is_a_warning_not_a_failure(llm_server, caplog):
    check_reachable(Endpoint.from_env("no-such-model"))
    assert "lists no model 'no-such-model'" in caplog.text


def test_endpoint_without_a_base_url_names_the_variable(monkeypatch):
    monkeypatch.delenv("RAGSWEEP_LLM_BASE_URL", raising=False)
    with pytest.raises(RagsweepError, match="set RAGSWEEP_LLM_BASE_URL"):
        Endpoint.from_env("m")


def test_the_judge_defaults_to_the_generators_endpoint_and_key(monkeypatch):
    monkeypatch.setenv("RAGSWEEP_LLM_BASE_URL", "http://gen:8000/v1/")
    monkeypatch.setenv("RAGSWEEP_LLM_API_KEY", "gen-key")
    monkeypatch.delenv("RAGSWEEP_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("RAGSWEEP_JUDGE_API_KEY", raising=False)
    judge = Endpoint.from_env("j", role="JUDGE")
    assert (judge.base_url, judge.api_key) == ("http://gen:8000/v1", "gen-key")
    monkeypatch.setenv("RAGSWEEP_JUDGE_BASE_URL", "http://judge:9000/v1")
    elsewhere = Endpoint.from_env("j", role="JUDGE")
    assert (elsewhere.base_url, elsewhere.api_key) == ("http://judge:9000/v1", "")
    assert "gen-key" not in repr(judge)


def test_credentials_in_a_base_url_stay_out_of_messages():
    endpoint = Endpoint("m", "http://user:pw@host:1/v1", api_key="k-123")
    assert endpoint.where == "http://host:1/v1"
    assert (
        endpoint.redact("at http://user:pw@host:1/v1 with k-123") == "at http://host:1/v1 with ***"
    )


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "3600"}, MAX_WAIT_S),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # in the past: no wait
    ],
)
def test_retry_delay_honours_retry_after(headers, expected):
    assert retry_delay(headers, attempt=3, backoff_s=100) == expected


def test_retry_delay_backs_off_exponentially_with_jitter():
    for attempt in range(4):
        assert 0.5 * 2**attempt <= retry_delay(None, attempt, backoff_s=1.0) <= 2**attempt


def test_settings_come_from_plain_data_and_are_checked():
    settings = LLMSettings.from_dict({"max_tokens": 64.0, "temperature": 1, "judge": "j"})
    assert (settings.max_tokens, settings.temperature, settings.judge) == (64, 1.0, "j")
    assert LLMSettings.from_dict(settings.to_dict()) == settings
    for bad, message in [
        ({"temprature": 0}, "unknown field"),
        ({"max_tokens": "many"}, "field 'max_tokens': expected int"),
        ({"prompt_template": "{question} only"}, "must contain {context}"),
        ({"concurrency": 0}, "field 'concurrency': must be positive"),
    ]:
        with pytest.raises(RagsweepError, match=message):
            LLMSettings.from_dict(bad)
