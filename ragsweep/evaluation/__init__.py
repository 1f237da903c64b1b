"""Evaluation: metrics, the LLM judge, scoring, statistics, the leaderboard, successive
halving. Imports the layers below it (up to ``answering``)."""
