"""The pipeline on Kubeflow: how each step runs (Secrets, CPU and memory, retries), the
context every step runs in, submit and schedules on OpenShift AI, Red Hat AutoRAG's
parameters, the pipeline's parameters as settings, cron."""
