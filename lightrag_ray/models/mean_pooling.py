"""Sentence-transformers models of the plain kind (a transformer, mean pooling, optional
normalisation) run straight through transformers.

Importing sentence-transformers costs 3-5 s of CPU (it pulls in scikit-learn and its
training stack), more than loading MiniLM itself; an indexing run that starts on a busy
2-core machine waits for it before its first vector. A model directory whose
``modules.json`` is exactly Transformer -> Pooling (mean) [-> Normalize] is loaded here
instead and gives the same vectors; any other layout goes to sentence-transformers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
POOLING_MODES = ("cls_token", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")


def _json(path: Path) -> Any:
    """A JSON file's content ({} when the file is absent)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def is_mean_pooling_model(path: str) -> bool:
    """Whether ``path`` is a local sentence-transformers directory of the plain kind: its own
    transformer (path ""), mean pooling only, optional Normalize, no prompts."""
    folder = Path(path)
    modules = _json(folder / "modules.json") if folder.is_dir() else {}
    kinds = [module.get("type") for module in modules] if isinstance(modules, list) else []
    if kinds not in ([TRANSFORMER, POOLING], [TRANSFORMER, POOLING, NORMALIZE]) or modules[0].get("path") != "":
        return False
    pooling = _json(folder / modules[1]["path"] / "config.json")
    mean_only = pooling.get("pooling_mode_mean_tokens") is True and not any(
        pooling.get(f"pooling_mode_{mode}") for mode in POOLING_MODES)
    prompts = _json(folder / "config_sentence_transformers.json").get("prompts")
    return mean_only and not prompts


class MeanPoolingEncoder:
    """A plain sentence-transformers model (see ``is_mean_pooling_model``) on transformers:
    texts stripped (and lower-cased if configured), truncated to ``max_seq_length``, token
    vectors averaged over the attention mask, L2-normalised."""

    def __init__(self, path: str, device: str = "cpu") -> None:
        from transformers import AutoModel, AutoTokenizer

        folder = Path(path)
        config = _json(folder / "sentence_bert_config.json")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).to(device).eval()
        self.device = device
        self.max_length = int(config.get("max_seq_length") or self.tokenizer.model_max_length)
        self.lower_case = bool(config.get("do_lower_case", False))
        self.dim = int(self.model.config.hidden_size)

    def _cleaned(self, texts: list[str]) -> list[str]:
        cleaned = [str(text).strip() for text in texts]
        return [text.lower() for text in cleaned] if self.lower_case else cleaned

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model reads of ``texts`` (special tokens included, after truncation). The
        tokenizer is called as ``encode`` calls it: a fast tokenizer that changes its padding or
        truncation while another thread encodes fails ("Already borrowed")."""
        batch = self.tokenizer(self._cleaned(texts), padding=True, truncation="longest_first", max_length=self.max_length)
        return int(sum(sum(mask) for mask in batch["attention_mask"]))

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors, one row per text, in input order (batches of similar length)."""
        import torch  # loaded with the model already
        cleaned = self._cleaned(texts)
        order = sorted(range(len(cleaned)), key=lambda i: -len(cleaned[i]))
        vectors = np.empty((len(cleaned), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                part = order[start : start + batch_size]
                batch = self.tokenizer([cleaned[i] for i in part], padding=True, truncation="longest_first",
                                       max_length=self.max_length, return_tensors="pt").to(self.device)
                tokens = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                vectors[part] = torch.nn.functional.normalize(mean, p=2, dim=1).float().cpu().numpy()
        return vectors
