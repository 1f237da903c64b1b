"""Curating what the database holds: stored test sets and their versions, people's labels of
judged answers, and the judges compared on them. Imports ``store`` and the layers below it."""
