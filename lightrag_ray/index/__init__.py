"""The indexing run on Ray Data: input documents, extraction and summary stages, the
embedding pool, the pipeline itself, and deletion."""
