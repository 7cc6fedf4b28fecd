"""The Ray Serve application: FastAPI ingress, back-end deployments, the workspace owner,
request models, the HTTP guard and the vLLM serving app."""
