"""Q&A generation sends each Giskard question generator's reply shape as a JSON schema
(``response_format``), where the endpoint accepts one: SmolLM2-135M writes JSON Giskard can
read only so (tests/test_qagen.py). Prose requests (topic names) carry none."""

import pytest

from ragsweep.documents.qagen import LINKED_PAIR, _client, _Giskard
from ragsweep.models.llm import Chat, Endpoint, LLMSettings


@pytest.fixture
def client():
    giskard = _Giskard()
    chat = Chat(Endpoint.from_env("writer"), LLMSettings(max_tokens=96))

    def complete(system: str, caller_id: str | None = None) -> None:
        messages = [giskard.llm_client.ChatMessage(role="system", content=system)]
        messages.append(giskard.llm_client.ChatMessage(role="user", content="The docs."))
        _client(giskard, chat).complete(messages, caller_id=caller_id)

    return complete


def schema_of(request: dict) -> dict | None:
    asked = request.get("response_format")
    return asked and asked["json_schema"]["schema"]


def test_each_question_generator_is_asked_for_the_keys_its_prompt_names(llm_server, client):
    client("Write a question.", "SimpleQuestionsGenerator")
    client("Reformulate.", "ComplexQuestionsGenerator")
    client("Invent a fact.", "OutOfScopeGenerator")
    client(f"You must output a {LINKED_PAIR} with keys 'question' and 'answer'.",
           "DoubleQuestionsGenerator")  # fmt: skip
    client("Name the topic of these texts.")  # Giskard's topic naming: prose, no caller
    simple, complex_, out_of_scope, linked, topic = llm_server.requests
    assert simple["response_format"]["type"] == "json_schema"
    assert schema_of(simple)["required"] == ["question", "answer"]
    assert schema_of(simple)["additionalProperties"] is False
    assert schema_of(complex_)["required"] == ["question"]
    assert schema_of(out_of_scope)["required"] == ["selected_fact", "fake_fact", "question"]
    pair = schema_of(linked)
    assert (pair["type"], pair["minItems"], pair["maxItems"]) == ("array", 2, 2)
    assert pair["items"]["required"] == ["question", "answer"]
    assert "response_format" not in topic


def test_an_endpoint_refusing_json_schemas_is_asked_without_one(llm_server, client):
    llm_server.refuse_json_schema = True
    client("Write a question.", "SimpleQuestionsGenerator")
    client("Write another.", "SimpleQuestionsGenerator")
    refused, retried, second = llm_server.requests
    assert refused["response_format"]["type"] == "json_schema"
    assert retried["response_format"] == {"type": "json_object"}
    assert second["response_format"] == {"type": "json_object"}  # remembered
