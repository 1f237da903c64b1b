"""Retrieval: search types (similarity, MMR, hybrid), vector stores, rerankers. Imports the
layers below it (``core``, ``models``, ``documents``, ``embeddings``)."""
