"""lightrag-ray: LightRAG (graph-based retrieval-augmented generation) on Ray."""
