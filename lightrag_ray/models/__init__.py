"""Model backends behind one small protocol each: LLM clients (OpenAI-compatible HTTP, local
transformers, the vLLM processor config) and embedders."""
