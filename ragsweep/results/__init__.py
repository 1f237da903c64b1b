"""Results: the results database, test-set curation, exports, the HTML report, MLflow
tracking, regression comparison, deployable patterns. Imports the layers below it (up to
``sweep``)."""
