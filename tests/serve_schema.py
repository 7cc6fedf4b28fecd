"""Validate a Serve config against Ray's own schema, rejecting keys Ray would ignore.

Ray's pydantic models accept unknown keys silently, so a typo in serve_config.yaml
(``max_replica:``) would deploy with defaults; this walks the config beside the
validated model and reports every key the schema does not define.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from ray.serve.config import AutoscalingConfig
from ray.serve.schema import ServeDeploySchema

# Fields Ray types as plain dicts although they have a model of their own.
DICT_FIELDS: dict[str, type[BaseModel]] = {"autoscaling_config": AutoscalingConfig}
FREE_FORM = {"args", "runtime_env", "user_config", "resources"}  # user-defined content


def unknown_keys(data: dict[str, Any], model: BaseModel, where: str = "") -> list[str]:
    """Dotted paths of keys in ``data`` that ``model``'s schema does not define."""
    found: list[str] = []
    fields = type(model).model_fields
    for key, value in data.items():
        path = f"{where}{key}"
        if key not in fields:
            found.append(path)
            continue
        if key in FREE_FORM:
            continue
        attr = getattr(model, key)
        if key in DICT_FIELDS and isinstance(value, dict):
            found += unknown_keys(value, DICT_FIELDS[key].model_validate(value), f"{path}.")
        elif isinstance(attr, BaseModel) and isinstance(value, dict):
            found += unknown_keys(value, attr, f"{path}.")
        elif isinstance(attr, list) and isinstance(value, list):
            for i, (item, parsed) in enumerate(zip(value, attr)):
                if isinstance(parsed, BaseModel) and isinstance(item, dict):
                    found += unknown_keys(item, parsed, f"{path}[{i}].")
    return found


def validate_serve_config(config: dict[str, Any]) -> ServeDeploySchema:
    """The parsed schema; raises ValueError naming any key Ray does not know."""
    schema = ServeDeploySchema.model_validate(config)
    unknown = unknown_keys(config, schema)
    if unknown:
        raise ValueError(f"keys not in Ray's Serve schema: {', '.join(unknown)}")
    return schema
