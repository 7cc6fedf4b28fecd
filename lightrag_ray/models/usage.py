"""Token usage of LLM calls and their metrics.

A caller names what a call is for with an ``LLMCall`` (kind, workspace, the model's price) and
passes it to ``LLMClient.complete``/``stream``; the client measures the call with ``metered``,
which records the ``llm_*`` metrics and adds the call's ``TokenUsage`` to the ``LLMCall``. Each
caller holds its own ``LLMCall``, so usage stays apart however many calls run at once on one
client. A server that reports no usage makes the call *unmetered*: its tokens are unknown, never 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from lightrag_ray.config import Settings, TokenPrice
from lightrag_ray.metrics.client import metrics, workspace_label

CallKind = Literal["extract", "glean", "summary", "keywords", "answer"]
Outcome = Literal["ok", "retried", "429", "timeout", "error"]
Cause = Literal["429", "timeout", "error"]
# The columns (and index report fields) that carry usage through rows: TokenUsage.counts()
USAGE_COLUMNS = ("llm_prompt_tokens", "llm_completion_tokens", "llm_unmetered_requests")


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of some LLM calls as their server reported them; ``unmetered``: calls it reported
    none for (their tokens are unknown)."""

    prompt: int = 0
    completion: int = 0
    calls: int = 0
    unmetered: int = 0

    @property
    def known(self) -> bool:
        """Whether every call's tokens are known."""
        return self.unmetered == 0

    @property
    def total(self) -> int:
        return self.prompt + self.completion

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(self.prompt + other.prompt, self.completion + other.completion,
                          self.calls + other.calls, self.unmetered + other.unmetered)

    @classmethod
    def reported(cls, usage: Any) -> TokenUsage:
        """One call's usage from an OpenAI ``usage`` object; unmetered when it is absent or incomplete."""
        if isinstance(usage, dict):
            prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
            if isinstance(prompt, int) and isinstance(completion, int):
                return cls(prompt, completion, calls=1)
        return cls(calls=1, unmetered=1)

    def cost(self, price: TokenPrice | None) -> float | None:
        """The estimated cost at ``price`` (per million tokens); None without a price or when unknown."""
        if price is None or not self.known:
            return None
        return (self.prompt * price.prompt + self.completion * price.completion) / 1e6

    def counts(self) -> dict[str, int]:
        """The usage as row columns / index report fields (``USAGE_COLUMNS``)."""
        return dict(zip(USAGE_COLUMNS, (self.prompt, self.completion, self.unmetered)))

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> TokenUsage:
        """The usage a row carries in ``USAGE_COLUMNS`` (0 where a column is missing)."""
        prompt, completion, unmetered = (int(row.get(column) or 0) for column in USAGE_COLUMNS)
        return cls(prompt, completion, unmetered=unmetered)


def model_price(settings: Settings) -> TokenPrice | None:
    """The configured price of the settings' LLM model, if any."""
    return settings.metrics.prices.get(settings.llm.model)


@dataclass
class LLMCall:
    """What LLM calls are for (``kind``, ``workspace``, the model's ``price``) and the usage they
    added up (``usage``, filled by the client). One per caller: never shared between tasks whose
    usage must stay apart."""

    kind: CallKind
    workspace: str = ""
    price: TokenPrice | None = None
    usage: TokenUsage = field(default_factory=TokenUsage)

    @classmethod
    def of(cls, settings: Settings, kind: CallKind) -> LLMCall:
        """A call of ``kind`` for the settings' workspace and model."""
        return cls(kind, workspace_label(settings.workspace), model_price(settings))

    def fresh(self) -> LLMCall:
        """The same call with no usage yet (to send to another process, which returns its usage)."""
        return LLMCall(self.kind, self.workspace, self.price)

    def record(self, outcome: Outcome, seconds: float | None, usage: TokenUsage) -> None:
        """One call ended: its metrics (``seconds``: its wall time, None when unknown), and its
        usage added to ``usage``."""
        self.usage += usage
        tags = {"workspace": self.workspace, "kind": self.kind}
        client = metrics()
        client.count("llm_requests", 1, outcome=outcome, **tags)
        if seconds is not None:
            client.observe("llm_latency_seconds", seconds, kind=self.kind)
        client.count("llm_unmetered_requests", usage.unmetered, **tags)
        if usage.known:
            client.count("llm_tokens", usage.prompt, type="prompt", **tags)
            client.count("llm_tokens", usage.completion, type="completion", **tags)
            client.count("llm_cost", usage.cost(self.price) or 0.0, **tags)


@dataclass
class Metering:
    """One call being measured: retries and the cause of a final failure (set by the retrying
    sender), its usage once answered (set by the client; None: the call is unmetered)."""

    retries: int = 0
    cause: Cause = "error"
    usage: TokenUsage | None = None


@contextmanager
def metered(call: LLMCall | None) -> Iterator[Metering]:
    """Measure the call run inside the block: when it ends, answered or failed (LLMError, or any
    error), ``call`` records it (nothing without a call; a cancelled or abandoned call is not recorded)."""
    meter = Metering()
    started = time.perf_counter()
    try:
        yield meter
    except Exception:
        if call is not None:
            call.record(meter.cause, time.perf_counter() - started, TokenUsage())
        raise
    if call is not None:
        usage = meter.usage if meter.usage is not None else TokenUsage.reported(None)
        call.record("retried" if meter.retries else "ok", time.perf_counter() - started, usage)
