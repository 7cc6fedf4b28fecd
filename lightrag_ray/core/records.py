"""Plain records that flow through the pipeline (no Ray imports here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class EntityRecord:
    """One mention of an entity in one chunk, as the extractor returned it."""

    name: str
    type: str
    description: str
    chunk_id: str
    file_path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RelationRecord:
    """One mention of a relation between two entities in one chunk."""

    source: str
    target: str
    keywords: str
    description: str
    chunk_id: str
    weight: float = 1.0
    file_path: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Extraction:
    """What one chunk yielded: records plus how many malformed lines were dropped."""

    entities: list[EntityRecord] = field(default_factory=list)
    relations: list[RelationRecord] = field(default_factory=list)
    dropped: int = 0

    def extend(self, other: "Extraction") -> None:
        """Append another round's records (gleaning)."""
        self.entities.extend(other.entities)
        self.relations.extend(other.relations)
        self.dropped += other.dropped
