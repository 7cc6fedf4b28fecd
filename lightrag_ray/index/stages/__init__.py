"""The stages of an indexing run, one module each, in the order a run takes them:

    read -> chunk -> (embed chunks) -> extract -> merge -> summarise -> embed graph -> aliases -> commit

Each batch stage is a callable over a list of rows (plain dicts) that returns rows, so one
class runs in the indexing process for a small run, in a Ray Data pool, or around a
``ray.data.llm`` processor (index.executors). Rows travel between workers and through the
run's scratch tables (storage.run_files); what reaches the driver is one count row per batch.
"""
