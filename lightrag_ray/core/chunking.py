"""Cut documents into overlapping token windows."""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.ids import chunk_id
from lightrag_ray.core.tokenizer import get_encoding


def chunk_text(
    doc: str,
    text: str,
    *,
    chunk_tokens: int = 1200,
    overlap_tokens: int = 100,
    encoding: str = "cl100k_base",
    file_path: str = "",
) -> list[dict[str, Any]]:
    """Chunk rows (chunk_id, doc_id, order, tokens, text_tokens, text, file_path) of one
    document: ``tokens`` is the window's length, ``text_tokens`` the (stripped) text's count.

    Windows of ``chunk_tokens`` tokens start every ``chunk_tokens - overlap_tokens``
    tokens; the last window may be shorter. Empty text gives no chunks.
    """
    if overlap_tokens >= chunk_tokens:
        raise ValueError(f"overlap_tokens ({overlap_tokens}) must be below chunk_tokens ({chunk_tokens})")
    enc = get_encoding(encoding)
    tokens = enc.encode(text, disallowed_special=())
    step = chunk_tokens - overlap_tokens
    rows: list[dict[str, Any]] = []
    for order, start in enumerate(range(0, len(tokens), step)):
        window = tokens[start : start + chunk_tokens]
        piece = enc.decode(window).strip()
        if piece:
            rows.append(
                {
                    "chunk_id": chunk_id(doc, order, piece),
                    "doc_id": doc,
                    "order": order,
                    "tokens": len(window),
                    "text_tokens": len(enc.encode(piece, disallowed_special=())),
                    "text": piece,
                    "file_path": file_path,
                }
            )
        if start + chunk_tokens >= len(tokens):
            break
    return rows
