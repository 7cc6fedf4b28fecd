"""`lightrag-ray` command line: index, query, demo, serve, status."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from lightrag_ray.config import ENV_PREFIX, load_settings

MODES = ["mix", "local", "global", "hybrid", "naive", "bypass"]

_INDEX_EPILOG = f"""\
Settings come from (lowest to highest): built-in defaults, --config YAML, environment
variables {ENV_PREFIX}SECTION__FIELD (e.g. {ENV_PREFIX}LLM__BASE_URL), then these flags.

Examples:
  lightrag-ray index book.txt --workspace ws --llm-base-url http://127.0.0.1:8000/v1
  lightrag-ray index docs/ more.jsonl --workspace ws --config lightrag.yaml

Running the same command again is safe: processed documents are skipped, extracted
chunks come from the workspace cache, and failed chunks are retried.
"""


def _add_common(parser: argparse.ArgumentParser, json_output: bool = True) -> None:
    parser.add_argument("--workspace", "-w", help="workspace directory or URI (default ./lightrag_workspace)")
    parser.add_argument("--config", "-c", help="YAML settings file (see docs/configuration.md)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _add_llm(parser: argparse.ArgumentParser) -> None:
    llm = parser.add_argument_group("LLM")
    llm.add_argument("--llm-backend", choices=["openai", "transformers", "vllm", "none"],
                     help="openai = any OpenAI-compatible server (vLLM, Ollama, ...); transformers = local "
                     "model in Ray actors; vllm = ray.data.llm on GPUs; none = no LLM")
    llm.add_argument("--llm-base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 "
                     "(implies --llm-backend openai)")
    llm.add_argument("--llm-model", help="model name (server) or HF id / local path / .gguf file")
    llm.add_argument("--llm-concurrency", type=int, help="LLM requests in flight per actor (16)")
    llm.add_argument("--llm-timeout", type=float, help="seconds per LLM request before retrying (120)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightrag-ray",
        description="LightRAG (graph-based RAG) on Ray: build a knowledge graph from documents and query it.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    index = sub.add_parser(
        "index", help="index files or folders into a workspace",
        description="Chunk, extract entities and relations with the LLM, merge them into the "
        "sharded graph and store vectors in Milvus.",
        epilog=_INDEX_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    index.add_argument("paths", nargs="+", metavar="PATH",
                       help="files or folders (.txt .md .json .jsonl .parquet), local or s3://...")
    _add_common(index)
    _add_llm(index)
    pipe = index.add_argument_group("pipeline")
    pipe.add_argument("--extraction-mode", choices=["llm", "fast"],
                      help="llm = prompt the LLM (default); fast = no-LLM heuristics (names, co-occurrence)")
    pipe.add_argument("--extraction-actors", type=int, help="extraction actors (2)")
    pipe.add_argument("--gleaning", type=int, help="extra 'anything missed?' rounds per chunk (1)")
    pipe.add_argument("--chunk-tokens", type=int, help="tokens per chunk (1200)")
    pipe.add_argument("--overlap-tokens", type=int, help="tokens of overlap between chunks (100)")
    pipe.add_argument("--shards", type=int, help="graph shard actors; fixed per workspace (2)")
    pipe.add_argument("--milvus-uri", help="Milvus server URI; default a Milvus Lite file in the workspace")
    pipe.add_argument("--ray-address", help="Ray cluster address (default: start or join a local one)")
    pipe.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    query = sub.add_parser(
        "query", help="answer a question from a workspace",
        description="Dual-level retrieval (keywords -> entities/relations -> one-hop graph + passages), "
        "then an answer that cites numbered passages. Without an LLM use --context-only.",
        epilog=f"Modes: {', '.join(MODES)} (default mix). Settings as for `index` "
        f"(--config, {ENV_PREFIX}* variables).", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("question", help="the question, in any language the workspace holds")
    _add_common(query)
    query.add_argument("--mode", "-m", choices=MODES, default="mix", help="retrieval mode (mix)")
    query.add_argument("--top-k", type=int, help="entities/relations retrieved (40)")
    query.add_argument("--chunk-top-k", type=int, help="source passages kept (20)")
    query.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    query.add_argument("--context-only", action="store_true",
                       help="no generation: print the retrieved entities, relations and passages")
    _add_llm(query)

    demo = sub.add_parser(
        "demo", help="index a bundled sample and answer questions (no LLM needed)",
        description="Index A Christmas Carol in fast mode (no LLM), show what was built, answer two "
        "questions with numbered references and write an HTML view of the graph. With "
        f"{ENV_PREFIX}LLM__BASE_URL set, answers are generated by that OpenAI-compatible server.",
    )
    demo.add_argument("--workspace", "-w", default="lightrag_demo", help="where to build it (./lightrag_demo)")
    demo.add_argument("--config", "-c", help="YAML settings file")
    demo.add_argument("--html", help="graph page path (default <workspace>/graph.html)")

    serve = sub.add_parser(
        "serve", help="serve a workspace over HTTP (Ray Serve: REST + OpenAI-compatible chat)",
        description="Start the Ray Serve application on this machine and block until Ctrl-C. "
        "For clusters use `serve run serve_config.yaml` or the KubeRay RayService (cluster/).",
        epilog="Routes: /query, /query/stream, /query/data, /documents/..., /graphs, /v1/chat/completions, "
        "/health (see docs/api.md).",
    )
    _add_common(serve, json_output=False)
    _add_llm(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port (8000)")
    serve.add_argument("--api-key", help="require this key (X-API-Key or Bearer) on every route but /health; "
                       "default $LIGHTRAG_RAY_API_KEY")

    status = sub.add_parser("status", help="show what a workspace holds",
                            description="Documents by status, chunk/entity/relation counts, graph version.")
    _add_common(status)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Nested settings from the flags that were given."""
    pairs = {
        ("workspace",): args.workspace,
        ("llm", "backend"): getattr(args, "llm_backend", None),
        ("llm", "base_url"): getattr(args, "llm_base_url", None),
        ("llm", "model"): getattr(args, "llm_model", None),
        ("llm", "max_concurrency"): getattr(args, "llm_concurrency", None),
        ("llm", "timeout_s"): getattr(args, "llm_timeout", None),
        ("extraction", "actors"): getattr(args, "extraction_actors", None),
        ("extraction", "mode"): getattr(args, "extraction_mode", None),
        ("extraction", "gleaning_rounds"): getattr(args, "gleaning", None),
        ("chunking", "chunk_tokens"): getattr(args, "chunk_tokens", None),
        ("chunking", "overlap_tokens"): getattr(args, "overlap_tokens", None),
        ("graph", "num_shards"): getattr(args, "shards", None),
        ("vectors", "uri"): getattr(args, "milvus_uri", None),
        ("ray", "address"): getattr(args, "ray_address", None),
    }
    if getattr(args, "llm_base_url", None) and not getattr(args, "llm_backend", None):
        pairs[("llm", "backend")] = "openai"
    tree: dict[str, Any] = {}
    for path, value in pairs.items():
        if value is None:
            continue
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return tree


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return
    for key, value in result.items():
        if key == "errors":
            for error in value:
                print(f"error: {error['file_path']}: {error['error']}")
        elif key == "hints":
            for hint in value:
                print(f"hint: {hint}")
        else:
            print(f"{key}: {value}")


def _index(args: argparse.Namespace) -> int:
    from lightrag_ray.index.pipeline import index_paths, print_progress

    settings = load_settings(args.config, _overrides(args))
    if settings.llm.backend == "none" and settings.extraction.mode == "llm":
        print("error: no LLM configured. Pass --llm-base-url http://HOST:PORT/v1 (any OpenAI-compatible "
              f"server) or set {ENV_PREFIX}LLM__BASE_URL, or --extraction-mode fast (no LLM).", file=sys.stderr)
        return 2
    report = index_paths(args.paths, settings, progress=None if args.quiet else print_progress)
    _print(report.to_dict(), args.json)
    return 1 if report.errors else 0


def _query(args: argparse.Namespace) -> int:
    from lightrag_ray.query.engine import QueryParam
    from lightrag_ray.query.session import LocalSession

    settings = load_settings(args.config, _overrides(args))
    given = {"top_k": args.top_k, "chunk_top_k": args.chunk_top_k}
    param = QueryParam(mode=args.mode, **{k: v for k, v in given.items() if v is not None})
    if not args.context_only and settings.llm.backend == "none":
        print("error: no LLM configured to write an answer. Pass --llm-base-url http://HOST:PORT/v1, or "
              "--context-only to print what retrieval found.", file=sys.stderr)
        return 2
    with LocalSession(settings) as session:
        engine = session.engine
        if args.context_only:
            context, keywords, _ = asyncio.run(engine.retrieve(args.question, param))
            if args.json:
                print(json.dumps({**context.to_dict(), "keywords": vars(keywords)}, indent=2, ensure_ascii=False))
            else:
                print(context.text or "(nothing found)")
        elif args.stream:
            asyncio.run(_print_stream(engine.stream(args.question, param)))
        else:
            result = asyncio.run(engine.query(args.question, param))
            print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) if args.json else result.answer)
    return 0


async def _print_stream(pieces) -> None:
    async for piece in pieces:
        print(piece, end="", flush=True)
    print()


def _demo(args: argparse.Namespace) -> int:
    from lightrag_ray.cli.demo import run_demo

    run_demo(load_settings(args.config, {"workspace": args.workspace}), html=args.html)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from ray import serve

    from lightrag_ray.ray_runtime import ensure_ray
    from lightrag_ray.serve.app import AppArgs, app_settings, build_app

    app_args = AppArgs(config=args.config, settings=_overrides(args), api_key=args.api_key)
    ensure_ray(app_settings(app_args))
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(build_app(app_args), name="lightrag", route_prefix="/", blocking=False)
    print(f"serving on http://{args.host}:{args.port} (docs at /docs); Ctrl-C stops", file=sys.stderr)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        serve.shutdown()
    return 0


def _status(args: argparse.Namespace) -> int:
    from lightrag_ray.cli.status import workspace_status

    settings = load_settings(args.config, _overrides(args))
    _print(workspace_status(settings.workspace, settings.milvus_uri()), args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `lightrag-ray` console script."""
    args = _parser().parse_args(argv)
    try:
        commands = {"index": _index, "query": _query, "demo": _demo, "serve": _serve, "status": _status}
        return commands[args.command](args)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
