"""Contracts whose methods a transport runs: a method is declared once, with its signature, and
every transport of the contract (an actor handle, a Serve handle, a worker thread, a fake) gets
it by defining one ``run(method, *args)``.

``Remote(f)`` is the method ``f`` of a contract as a descriptor: on a transport it is
``functools.partial(transport.run, <the Remote>)``, typed as ``f`` is (its result awaited when
the transport is ``Awaited``), so a type checker sees every method of every transport and no
transport writes one out by hand. The graph's shard operations (core.graph.contract) and the
vector store's methods (storage.vectors) are declared this way.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from typing_extensions import Self

P = ParamSpec("P")
R = TypeVar("R")


class Awaited:
    """Marks a transport whose ``run`` is a coroutine: its methods return awaitables."""


class Remote(Generic[P, R]):
    """A contract method run by the transport it is read from (see the module doc)."""

    def __init__(self, name: str, doc: str = "") -> None:
        self.name = name
        self.doc = doc

    @classmethod
    def of(cls, method: Callable[Concatenate[Any, P], R]) -> Remote[P, R]:
        """The contract method declared by ``method`` (its name, signature and docstring)."""
        return cls(method.__name__, (method.__doc__ or "").strip())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @overload
    def __get__(self, transport: None, owner: type) -> Self: ...
    @overload
    def __get__(self, transport: Awaited, owner: type) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __get__(self, transport: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, transport: Any, owner: type | None = None) -> Any:
        if transport is None:
            return self
        return functools.partial(transport.run, self)
