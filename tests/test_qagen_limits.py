"""Q&A generation bounds Giskard's requests: Giskard asks with no token limit, and a small
model in JSON mode may then write until its context is full (SmolLM2-135M wrote 1,346
tokens of one reply before the request timed out)."""

from ragsweep.documents.qagen import _client, _Giskard
from ragsweep.models.llm import Chat, Endpoint, LLMSettings


def test_a_giskard_request_without_a_limit_is_capped_at_max_tokens(llm_server):
    giskard = _Giskard()
    chat = Chat(Endpoint.from_env("writer"), LLMSettings(max_tokens=96))
    client = _client(giskard, chat)
    message = giskard.llm_client.ChatMessage(role="user", content="Name the topic.")
    client.complete([message], format="json")
    client.complete([message], max_tokens=20)
    first, second = llm_server.requests
    assert first["max_tokens"] == 96 and first["response_format"] == {"type": "json_object"}
    assert second["max_tokens"] == 20 and "response_format" not in second
