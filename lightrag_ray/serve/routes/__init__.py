"""The HTTP routes, one module per resource: query, documents, graph, the OpenAI and Ollama
APIs, the WebUI. Each is an APIRouter of plain functions that reach the Serve ingress replica
answering the request through ``routes.replica``; serve.app assembles them into the app."""
