"""Answering questions: the query engine (dual-level retrieval, context, generation) and
the in-process session that opens a workspace for it."""
