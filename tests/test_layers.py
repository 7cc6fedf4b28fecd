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
    "metrics": 1.5,  # below models: every layer above it records figures
    "models": 2,
    "ray_runtime": 2,
    "storage": 3,
    "index": 4,
    "query": 4,
    "service": 5,
    "serve": 6,
    "cli": 7,
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


def _import_cycles(root: Path) -> list[list[str]]:
    """Circles of imports between the package's modules (at module level or in functions; the
    package's ``__init__``, which re-exports lazily, left out), each as a list of modules."""
    modules = {m for m in _modules(root) if m != "__init__"}
    edges = {m: sorted({name.removeprefix("lightrag_ray.") for _, name in _imports(path)
                        if name.removeprefix("lightrag_ray.") in modules - {m}})
             for m, path in _modules(root).items() if m in modules}
    cycles, done = [], set()

    def visit(module: str, path: list[str]) -> None:
        for target in edges[module]:
            if target in path:
                cycles.append(path[path.index(target):] + [target])
            elif target not in done:
                visit(target, path + [target])
        done.add(module)

    for module in sorted(modules):
        if module not in done:
            visit(module, [module])
    return cycles


def test_no_modules_import_each_other():
    cycles = _import_cycles(PACKAGE)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_circle_rule_catches_one(tmp_path):
    root = tmp_path / "lightrag_ray"
    (root / "models").mkdir(parents=True)
    (root / "models" / "a.py").write_text("from lightrag_ray.models.b import x\n")
    (root / "models" / "b.py").write_text("def f():\n    from lightrag_ray.models.a import y\n")
    (root / "models" / "c.py").write_text("from lightrag_ray.models.a import z\n")
    assert _import_cycles(root) == [["models.a", "models.b", "models.a"]]


def test_public_api_resolves():
    import lightrag_ray

    for name in lightrag_ray.__all__:
        assert getattr(lightrag_ray, name) is not None


def _methods(path: Path) -> list[str]:
    """Names of the methods defined in the classes of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [item.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for item in node.body
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_graph_operations_are_declared_only_in_the_contract():
    """The shard actor, the writer's router, the readers and the tests' fake take every operation
    from core.graph.contract; none writes one out as a method of its own."""
    from lightrag_ray.core.graph.contract import OPERATIONS

    transports = [PACKAGE / "storage" / "graph" / name for name in ("actor.py", "writer.py", "reader.py", "handles.py")]
    transports.append(PACKAGE.parent / "tests" / "memory_stores.py")
    forwarders = {f"{path.name}: {name}" for path in transports for name in _methods(path) if name in OPERATIONS}
    assert not forwarders, f"hand-written graph operations outside the contract: {sorted(forwarders)}"


TRANSPORTS = [
    "storage/graph/actor.py", "storage/graph/writer.py", "storage/graph/reader.py", "storage/graph/handles.py",
    "core/graph/shard_graph.py", "storage/vectors.py", "storage/vector_owner.py", "query/stores.py", "serve/owner.py",
]


def _calls_itself_elsewhere(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the method's body (its docstring aside) is one plain statement (a return, an
    expression, an assignment) that calls the method of the same name on another object
    (``x.name(...)``, ``x.name.remote(...)``): a forwarder."""
    body = method.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], (ast.Return, ast.Expr, ast.Assign)):
        return False
    for node in ast.walk(body[0]):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        called = node.func.value if node.func.attr == "remote" else node.func
        if (isinstance(called, ast.Attribute) and called.attr == method.name
                and not (isinstance(called.value, ast.Name) and called.value.id in ("self", "cls"))):
            return True
    return False


def _forwarders(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{item.lineno} {cls.name}.{item.name}" for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
            for item in cls.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not item.name.startswith("__") and _calls_itself_elsewhere(item)]


def test_no_transport_forwards_a_method_by_hand():
    """The graph and vector transports get their methods from the contracts (core.transport);
    ShardGraph's reads go to its views by the operation's access. A method whose body only calls
    the same-named method of another object is a forwarder written out by hand."""
    paths = [PACKAGE / name for name in TRANSPORTS] + [PACKAGE.parent / "tests" / "memory_stores.py"]
    found = [f for path in paths for f in _forwarders(path)]
    assert not found, f"hand-written forwarders: {found}"


def test_the_forwarder_rule_catches_one(tmp_path):
    (tmp_path / "bad.py").write_text(
        "class A:\n"
        "    def fetch(self, keys):\n        \"\"\"Doc.\"\"\"\n        return self.view.fetch(keys)\n"
        "    def get(self, k):\n        return ray.get(self.actor.get.remote(k))\n"
        "    def own(self):\n        return self.own_helper()\n"
        "    def put(self, x):\n        self.log.append(x)\n        return self.store.put(x)\n"
        "    def close(self):\n        self.store.close()\n"
        "    def search(self, q):\n        return self.run(SEARCH, q)\n")
    assert [f.split(" ")[1] for f in _forwarders(tmp_path / "bad.py")] == ["A.fetch", "A.get", "A.close"]


def _mode_lists(path: Path, modes: frozenset[str]) -> list[int]:
    """Lines of the file that write out every query mode: a tuple, list or set of exactly these
    names (a ``Literal[...]`` of them too: its subscript is a tuple)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = {item.value for item in node.elts if isinstance(item, ast.Constant) and isinstance(item.value, str)}
            if names == modes:
                found.append(node.lineno)
    return found


def test_the_query_modes_are_written_out_once():
    """One definition of the modes (query.params): the API's models, the OpenAI and Ollama
    model names and the CLI's choices derive from it."""
    from lightrag_ray.query.params import MODES

    places = {f"{module}:{line}" for module, path in _modules().items() for line in _mode_lists(path, frozenset(MODES))}
    assert len(places) == 1 and next(iter(places)).startswith("query.params:"), sorted(places)


def test_the_mode_rule_catches_a_second_list(tmp_path):
    modes = frozenset({"local", "global"})
    (tmp_path / "bad.py").write_text('from typing import Literal\nA = Literal["global", "local"]\nB = ["local", "global"]\n'
                                     'C = ("local",)\nD = {"local": 1, "global": 2}\n')
    assert sorted(_mode_lists(tmp_path / "bad.py", modes)) == [2, 3]


def test_open_workspace_is_defined_once():
    """Readers, writers and one-process sessions all open a workspace through service.opening."""
    defined = [module for module, path in _modules().items() for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "open_workspace"]
    assert defined == ["service.opening"]


def test_the_scripts_start_ray_only_through_the_bench_kit():
    """scripts/bench_kit.py is where a benchmark or the soak starts its Ray cluster."""
    scripts = PACKAGE.parent / "scripts"
    calls = [f"{path.name}:{node.lineno}" for path in sorted(scripts.glob("*.py")) if path.name != "bench_kit.py"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "init"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "ray"]
    assert not calls, calls
