"""ragsweep: find the RAG configuration that works on your documents."""

import os

# Nothing may download at run time: models come from installed packages or local folders.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

__version__ = "0.1.0"
