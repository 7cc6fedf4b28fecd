"""Operational metrics: what the package exports to Prometheus through Ray's metrics system
(``catalog``: every series, declared once; ``recorder``: the long-lived actor that holds them;
``client``: the per-process buffer every other layer records into)."""
