"""TransformersClient: the packaged Gemma 3 270M GGUF generating inside a real Ray actor."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from lightrag_ray.config import LLMConfig  # noqa: E402
from lightrag_ray.models.llm import LLMClient, LLMError  # noqa: E402
from lightrag_ray.models.transformers_local import TransformersClient, packaged_gguf_model  # noqa: E402


def test_missing_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="GGUF file not found.*llm.model"):
        TransformersClient(LLMConfig(backend="transformers", model=str(tmp_path / "nope.gguf")))
    with pytest.raises(LLMError, match="model path not found.*llm.model"):
        TransformersClient(LLMConfig(backend="transformers", model=str(tmp_path / "no-such-dir")))
    with pytest.raises(LLMError, match="'x.gguf' not found"):
        TransformersClient(LLMConfig(backend="transformers", model=str(tmp_path), gguf_file="x.gguf"))


def test_unloadable_model_directory_is_a_clear_error(tmp_path: Path) -> None:
    client = TransformersClient(LLMConfig(backend="transformers", model=str(tmp_path)))
    assert isinstance(client, LLMClient)
    with pytest.raises(LLMError, match="cannot load transformers model"):
        asyncio.run(client.complete([{"role": "user", "content": "hi"}], max_tokens=2))


def _generate_in_actor(ray: Any, directory: str, file_name: str) -> dict[str, Any]:
    @ray.remote(num_cpus=0.5)
    class Generator:
        def __init__(self, model: str) -> None:
            self.client = TransformersClient(LLMConfig(backend="transformers", model=model, max_tokens=8))

        async def run(self) -> dict[str, Any]:
            started = time.perf_counter()
            text = await self.client.complete([{"role": "user", "content": "The capital of France is"}])
            return {"text": text, "wall_s": time.perf_counter() - started, **self.client.stats}

    actor = Generator.remote(str(Path(directory) / file_name))
    try:
        return ray.get(actor.run.remote(), timeout=600)
    finally:
        ray.kill(actor)


def test_packaged_gguf_generates_in_ray_actor(ray_cluster: Any) -> None:
    started = time.perf_counter()
    directory, file_name = packaged_gguf_model()
    assemble_s = time.perf_counter() - started
    assert (Path(directory) / file_name).is_file()
    result = _generate_in_actor(ray_cluster, directory, file_name)
    print(
        f"\nassemble {assemble_s:.1f}s, load {result['load_s']:.1f}s, generate {result['generate_s']:.1f}s "
        f"({result['generated_tokens']} tokens), actor call {result['wall_s']:.1f}s: {result['text']!r}"
    )
    assert isinstance(result["text"], str) and result["text"].strip()
    assert result["requests"] == 1
    assert 0 < result["generated_tokens"] <= 8
