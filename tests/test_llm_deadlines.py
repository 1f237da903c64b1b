"""Deadlines that measure progress and a concurrency that adapts, against the scripted
OpenAI-compatible server (``llm_server``) streaming, queueing at its slots, refusing: a slow
stream or a queue is waited for, a silent stream is not; 429s and queues lower the requests
in flight, the server's slot count caps them; only an error naming structured output turns
it off."""

import logging

from scripted_llm import Step

from ragsweep.models.concurrency import Limit
from ragsweep.models.llm import Chat, Endpoint, LLMSettings

SCHEMA = {"title": "verdict", "type": "object", "properties": {"ok": {"type": "boolean"}}}


def ask_all(chat: Chat, n: int, **options) -> list:
    """``n`` questions through ``chat``, as a step asks them."""
    questions = [[("user", f"Which port does service {i} use?")] for i in range(n)]
    return chat.run(questions, lambda m: chat.ask(m, **options))


def chat_at(settings: LLMSettings) -> Chat:
    return Chat(Endpoint.from_env("answerer"), settings)


def test_a_slow_stream_lasting_beyond_the_deadline_is_not_abandoned(llm_server):
    llm_server.then(Step(content="Port 7000 it is.", token_interval_s=1.0))
    chat = chat_at(LLMSettings(timeout_s=2.5, backoff_s=0.01))
    [reply] = ask_all(chat, 1)
    assert reply.error is None and reply.text == "Port 7000 it is."
    assert reply.calls == 1 == llm_server.chat_calls
    assert reply.latency_s > 3.5  # four words a second apart: longer than 2.5 s in all
    assert reply.completion_tokens == 4 and reply.prompt_tokens > 0  # the stream's usage


def test_a_stream_that_falls_silent_times_out(llm_server):
    """The other request is answered within the deadline (2 s: on a busy machine 0.5 s was
    not always enough for it, and with no other answer the endpoint counts as down); the
    two are sent at once, so either may be the one the server leaves silent."""
    llm_server.then(Step(content="Port 7000.", token_interval_s=6.0))
    chat = chat_at(LLMSettings(timeout_s=2.0, max_retries=0, concurrency=2))
    replies = ask_all(chat, 2)  # whichever reaches the server first gets the silent stream
    [silent] = [r for r in replies if r.error is not None]
    assert silent.error.startswith("timed out after 1 call(s)")
    assert "between two chunks of its stream" in silent.error
    assert sum(r.error is None for r in replies) == 1


def test_requests_queued_at_a_one_slot_server_wait_and_lower_the_concurrency(llm_server, caplog):
    """Four sent at once to a server that answers one at a time, each answer five words 0.2 s
    apart: the last waits three seconds for its first token, past its 0.8 s deadline, while
    the server streams the others' answers. None is sent twice; the client sees the queue."""
    llm_server.slots = 1
    llm_server.then(*[Step(content="It uses port 7000 today.", token_interval_s=0.2)] * 8)
    chat = chat_at(LLMSettings(timeout_s=0.8, concurrency=4, backoff_s=0.01))
    with caplog.at_level(logging.INFO, logger="ragsweep"):
        replies = ask_all(chat, 8)
    assert [r.error for r in replies] == [None] * 8
    assert [r.calls for r in replies] == [1] * 8 and llm_server.chat_calls == 8
    assert chat.limit.lowered["queue"] >= 1 and chat.limit.value < 4
    [said] = [r.getMessage() for r in caplog.records if "in flight (asked 4" in r.getMessage()]
    assert "lowered on queue" in said and "no slot count" in said


def test_a_server_that_does_not_stream_is_waited_for_while_it_answers_others(llm_server):
    """The whole-request deadline of a server that answers in one piece, queueing: a
    request past it is not abandoned (and sent again) while others are being answered."""
    llm_server.slots, llm_server.streams = 1, False
    llm_server.then(*[Step(stall_s=0.5)] * 6)
    chat = chat_at(LLMSettings(timeout_s=1.0, concurrency=3, backoff_s=0.01))
    replies = ask_all(chat, 6)
    assert [r.error for r in replies] == [None] * 6
    assert llm_server.chat_calls == 6  # the third waited 1.5 s, and was not sent again


def test_a_429_lowers_the_requests_in_flight_and_the_run_says_so(llm_server, caplog):
    llm_server.then(Step(status=429, headers={"Retry-After": "0"}))
    chat = chat_at(LLMSettings(concurrency=8, backoff_s=0.01))
    with caplog.at_level(logging.INFO, logger="ragsweep"):
        replies = ask_all(chat, 8)
    assert [r.error for r in replies] == [None] * 8
    assert chat.limit.lowered == {"HTTP 429": 1}
    assert any("lowered on HTTP 429 x1" in r.getMessage() for r in caplog.records)


def test_the_servers_slot_count_caps_the_requests_in_flight(llm_server, caplog):
    llm_server.slots, llm_server.publish_slots = 2, True
    llm_server.then(*[Step(stall_s=0.3)] * 6)  # long enough for two to overlap
    chat = chat_at(LLMSettings(concurrency=8))
    with caplog.at_level(logging.INFO, logger="ragsweep"):
        replies = ask_all(chat, 6)
    assert [r.error for r in replies] == [None] * 6
    assert llm_server.max_in_flight == 2 and chat.limit.value == 2
    assert any("2 in flight (asked 8; the server has 2 slot(s)" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_a_context_length_400_keeps_json_replies_for_the_following_calls(llm_server, caplog):
    llm_server.context_window = 20
    chat = chat_at(LLMSettings(concurrency=1))
    long, short = [("user", "word " * 50)], [("user", "Is it correct?")]
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        first, second = chat.run([long, short], lambda m: chat.ask(m, schema=SCHEMA))
    assert first.error.startswith("HTTP 400") and "maximum context length" in first.error
    assert second.error is None
    assert [r["response_format"]["type"] for r in llm_server.requests] == ["json_schema"] * 2
    assert chat.refused == set() and not caplog.records


def test_a_refusal_naming_response_format_turns_it_off_with_one_warning(llm_server, caplog):
    llm_server.refuse_json_schema = True
    chat = chat_at(LLMSettings(concurrency=1))
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        replies = ask_all(chat, 3, schema=SCHEMA)
    assert [r.error for r in replies] == [None] * 3
    asked = [(r.get("response_format") or {}).get("type") for r in llm_server.requests]
    assert asked == ["json_schema", "json_object", "json_object", "json_object"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "refused response_format json_schema" in warning and llm_server.url in warning


def test_a_server_refusing_to_stream_is_asked_for_whole_answers(llm_server, caplog):
    llm_server.refuse_streaming = True
    chat = chat_at(LLMSettings(concurrency=1))
    with caplog.at_level(logging.WARNING, logger="ragsweep"):
        replies = ask_all(chat, 2)
    assert [r.error for r in replies] == [None] * 2
    assert [bool(r.get("stream")) for r in llm_server.requests] == [True, False, False]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "refused streaming" in warning


def test_the_limit_halves_once_per_round_and_grows_back_by_one_to_its_ceiling():
    limit = Limit(8)
    limit.cap(6)  # the server's slots
    assert limit.value == 6
    limit.lower(0, "timeout")
    limit.lower(0, "timeout")  # sent in the same round, at the same limit: no news
    assert (limit.value, limit.round, limit.lowered) == (3, 1, {"timeout": 1})
    for _ in range(3):
        limit.answered(1, None, None)
    assert limit.value == 4  # after as many answers as were allowed in flight
    for _ in range(4 + 5 + 6):
        limit.answered(1, None, None)
    assert (limit.value, limit.raised) == (6, 3)  # never above the ceiling
    limit.answered(1, 0.1, 1.0)  # the fastest first token; answers take a second
    limit.answered(1, 2.5, 1.0)  # waited behind two answers: a queue
    assert (limit.value, limit.lowered["queue"]) == (3, 1)


def test_requests_asked_one_at_a_time_say_where_they_settled_once(llm_server, caplog):
    """As Giskard's question generation asks (``ask_now``): one line, not one per request."""
    chat = chat_at(LLMSettings())
    with caplog.at_level(logging.INFO, logger="ragsweep"):
        replies = [chat.ask_now([("user", f"Question {i}?")]) for i in range(3)]
    assert [r.error for r in replies] == [None] * 3
    said = [r.getMessage() for r in caplog.records if "in flight (asked 8" in r.getMessage()]
    assert said == [
        f"answerer at {llm_server.url}: 8 in flight (asked 8; no slot count; never lowered)"
    ]
