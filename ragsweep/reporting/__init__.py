"""What a run says: exports, the HTML report, regression verdicts between runs, MLflow
tracking and publishing to the database. Imports ``curation``, ``store`` and the layers
below them."""
