"""Running the pipeline: locally with kfp.local (and its terminal display), on OpenShift AI
(submit, schedule, per-step Secrets and resources), Red Hat AutoRAG's parameters, cron.
Imports the layers below it; the local runner imports the pipeline definition."""
