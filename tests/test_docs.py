"""docs/ stays current with the code."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from lightrag_ray.config import Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _setting_names(model: type[BaseModel], prefix: str = "") -> list[str]:
    names = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            names += _setting_names(field.annotation, f"{prefix}{name}.")
        else:
            names.append(prefix + name)
    return names


def test_every_setting_is_documented():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    missing = [name for name in _setting_names(Settings) if f"`{name}`" not in text]
    assert not missing, f"add these settings to docs/configuration.md: {missing}"


def test_architecture_table_names_every_module():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    package = DOCS.parent / "lightrag_ray"
    modules = [p for p in package.rglob("*.py") if p.name != "__init__.py"]
    missing = [str(p.relative_to(package)) for p in modules if f"`{p.name}`" not in text]
    assert not missing, f"add these modules to the table in docs/architecture.md: {missing}"


def test_deployment_lists_every_metric_as_the_catalog_declares_it():
    from lightrag_ray.metrics.catalog import markdown_table

    text = (DOCS / "deployment.md").read_text(encoding="utf-8")
    assert markdown_table() in text, ("paste lightrag_ray.metrics.catalog.markdown_table() into docs/deployment.md "
                                      "(Monitoring, Metrics)")
