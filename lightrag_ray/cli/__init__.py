"""The command line: index, query, status, serve, demo, and the HTML graph page."""
