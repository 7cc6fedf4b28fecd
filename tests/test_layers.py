"""The package's layers: every module sits in the subpackage of its layer and imports only
from lower layers (or its own package); pure logic never imports Ray."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lightrag_ray"

# Lower number = lower layer. Packages on one level (index, query) may not import each other.
LAYERS = {
    "config": 0,
    "core": 1,
    "models": 2,
    "ray_runtime": 2,
    "storage": 3,
    "index": 4,
    "query": 4,
    "serve": 5,
    "cli": 6,
}
HEAVY = ("ray", "pymilvus", "torch", "sentence_transformers", "transformers", "fastapi")


def _modules(root: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        found[".".join(parts)] = path
    return found


def _unit(module: str) -> str:
    """The layer unit of a module path relative to the package ('core.ids' -> 'core')."""
    return module.split(".")[0]


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every import of the file (module level and inside functions) as (line, dotted name)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = node.module
            if base == "lightrag_ray":  # from lightrag_ray import core  -> lightrag_ray.core
                names += [(node.lineno, f"lightrag_ray.{alias.name}") for alias in node.names]
            else:
                names.append((node.lineno, base))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: use absolute imports (lightrag_ray....)")
    return names


def test_every_module_lives_in_a_layer():
    stray = [m for m in _modules() if m != "__init__" and _unit(m) not in LAYERS]
    assert not stray, f"modules outside the layer packages: {stray}"


def _violations(root: Path) -> list[str]:
    """Imports of lightrag_ray modules that point to a higher layer or a sibling package."""
    found = []
    for module, path in _modules(root).items():
        if module == "__init__":
            continue  # the public API re-exports from every layer, lazily
        unit = _unit(module)
        for line, name in _imports(path):
            if not name.startswith("lightrag_ray."):
                continue
            target = _unit(name.removeprefix("lightrag_ray."))
            if target != unit and (target not in LAYERS or LAYERS[target] >= LAYERS[unit]):
                found.append(f"{path.relative_to(root.parent)}:{line} ({unit}) imports {name}")
    return found


def test_imports_only_point_down():
    violations = _violations(PACKAGE)
    assert not violations, "imports that point up or sideways:\n" + "\n".join(violations)


def test_pure_logic_imports_no_ray_or_models():
    heavy = []
    for module, path in _modules().items():
        if _unit(module) in ("core", "config"):
            heavy += [f"{module}:{line} imports {name}" for line, name in _imports(path)
                      if name.split(".")[0] in HEAVY]
    assert not heavy, heavy


def test_the_layer_rule_catches_upward_and_sideways_imports(tmp_path):
    root = tmp_path / "lightrag_ray"
    for folder in ("core", "index", "query"):
        (root / folder).mkdir(parents=True)
    (root / "core" / "ok.py").write_text("import json\nfrom lightrag_ray.config import Settings\n")
    (root / "core" / "bad.py").write_text("def f():\n    from lightrag_ray.serve.app import build_app\n")
    (root / "query" / "engine.py").write_text("from lightrag_ray.index import pipeline\n")
    (root / "index" / "pipeline.py").write_text("from lightrag_ray.core import ok\n")
    assert sorted(_violations(root)) == [
        "lightrag_ray/core/bad.py:2 (core) imports lightrag_ray.serve.app",
        "lightrag_ray/query/engine.py:1 (query) imports lightrag_ray.index",
    ]


def test_public_api_resolves():
    import lightrag_ray

    for name in lightrag_ray.__all__:
        assert getattr(lightrag_ray, name) is not None
