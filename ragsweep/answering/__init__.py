"""Answering: answerers (extractive, LLM), the answer prompts and the contexts they read.
Imports the layers below it (up to ``retrieval``)."""
