"""Shared set-up of the benchmark-script tests: a tiny corpus and the children's environment."""

from __future__ import annotations

import os
from pathlib import Path

PARAGRAPHS = (
    "Ebenezer Scrooge kept his counting-house in London. Bob Cratchit copied letters for Ebenezer Scrooge "
    "in a dismal little cell. Fred invited Ebenezer Scrooge to Christmas dinner.",
    "Jacob Marley had been dead for seven years. The ghost of Jacob Marley visited Ebenezer Scrooge on "
    "Christmas Eve and warned him of three spirits.",
    "Tiny Tim is the son of Bob Cratchit. The Ghost of Christmas Present showed Ebenezer Scrooge the "
    "Cratchit family at dinner in Camden Town.",
)


def tiny_corpus(folder: Path) -> Path:
    """The three paragraphs as one text file in ``folder``."""
    corpus = folder / "three_paragraphs.txt"
    corpus.write_text("\n\n".join(PARAGRAPHS), encoding="utf-8")
    return corpus


def script_env() -> dict[str, str]:
    """This environment for a benchmark child: no auth, offline, its own local Ray cluster."""
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local"}
