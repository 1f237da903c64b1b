"""Documents and test sets: reading documents (folder or S3), the test-set formats (AutoRAG
JSON, Giskard JSONL) and gold spans, sampling, chunking, and Q&A generation. Imports
``core`` and ``models``."""
