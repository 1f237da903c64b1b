"""The models ragsweep calls: OpenAI-compatible LLM endpoints (client, prompts, the reply
cache) and embedding models. Imports only ``ragsweep.core``."""
