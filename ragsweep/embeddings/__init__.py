"""The embedding cache: (model, text hash) -> vector, kept in verified shards in a folder or
on S3. Imports ``core``, ``models`` and ``documents``."""
