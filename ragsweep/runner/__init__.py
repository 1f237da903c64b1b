"""A run on this machine: the pipeline run with kfp.local and its live terminal display,
the run folder, what each step reads (a resume reuses a step only if that is unchanged),
what follows the export (compare, track, publish) and SIGINT/SIGTERM. The caller brings
the pipeline function: the library imports no pipeline."""
