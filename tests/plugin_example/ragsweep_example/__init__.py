"""ragsweep plugins, as a third party writes them: a store, a metric, a chunker, a reranker."""
