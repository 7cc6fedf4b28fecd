"""What a workspace holds and who owns it: Parquet tables, the manifest, document status, the
extraction cache, Milvus vectors, graph shard actors, their router and files."""
