"""The base of the route mixins (OpenAI, Ollama): what they use of the Serve ingress."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightrag_ray.config import Settings
from lightrag_ray.models.llm import LLMClient

if TYPE_CHECKING:
    from lightrag_ray.query.engine import QueryEngine


class IngressPart:
    """Routes written as methods of the Serve ingress class that inherits them."""

    settings: Settings
    llm: LLMClient | None

    if TYPE_CHECKING:  # provided by the ingress
        async def _engine(self) -> QueryEngine: ...

        def _need_llm(self) -> None: ...
