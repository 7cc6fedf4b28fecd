"""`lightrag-ray` command line: index, query, demo, serve, status."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from pydantic.fields import FieldInfo

from lightrag_ray.cli import top
from lightrag_ray.cli.failures import report_failure
from lightrag_ray.config import ENV_PREFIX, Settings, load_settings
from lightrag_ray.query.params import QueryParam

if TYPE_CHECKING:
    from lightrag_ray.serve.app import AppArgs

SHORT_FLAGS = {"mode": "-m"}  # QueryParam fields whose flag has a short form too
LOOPBACK = ("127.0.0.1", "localhost", "::1")

_INDEX_EPILOG = f"""\
Settings come from (lowest to highest): built-in defaults, --config YAML, environment
variables {ENV_PREFIX}SECTION__FIELD (e.g. {ENV_PREFIX}LLM__BASE_URL), then these flags.

Examples:
  lightrag-ray index book.txt --workspace ws --llm-base-url http://127.0.0.1:8000/v1
  lightrag-ray index docs/ more.jsonl --workspace ws --config lightrag.yaml

Running the same command again syncs the workspace with the paths: unchanged files (same
size and modification time) are not read, an edited file replaces its old version (its
unchanged chunks cost no LLM call), a moved or renamed file is re-pointed, failed chunks are
retried; with --prune, documents whose file under the paths is gone are removed.
  lightrag-ray index docs/ --workspace ws --prune --dry-run   # what a sync would change
"""


def _add_common(parser: argparse.ArgumentParser, json_output: bool = True, uses_ray: bool = True) -> None:
    parser.add_argument("--workspace", "-w", help="workspace directory or URI (default ./lightrag_workspace)")
    parser.add_argument("--config", "-c", help="YAML settings file (see docs/configuration.md)")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print the result as JSON")
    if uses_ray:
        parser.add_argument("--verbose", "-v", action="store_true", help="also show Ray's own logs and progress bars")


def _add_llm(parser: argparse.ArgumentParser) -> None:
    llm = parser.add_argument_group("LLM")
    llm.add_argument("--llm-backend", choices=["openai", "openai-batch", "transformers", "vllm", "none"],
                     help="openai = an OpenAI-compatible server (vLLM, Ollama, a hosted API) called over HTTP "
                     "by the extraction actors (CPU, any node); openai-batch = the same server called by "
                     "ray.data.llm's HTTP request processor while indexing (a Ray Data stage on CPU workers; "
                     "queries use the HTTP client); transformers = a local HF or GGUF model loaded in each "
                     "extraction actor (CPU, or GPU with extraction.num_gpus); vllm = vLLM engines of a "
                     "ray.data.llm processor on GPU workers, indexing only (needs pip install 'ray[llm]'); "
                     "none = no LLM (fast extraction, context-only queries)")
    llm.add_argument("--llm-base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1 "
                     "(implies --llm-backend openai)")
    llm.add_argument("--llm-model", help="model name (server) or HF id / local path / .gguf file")
    llm.add_argument("--llm-concurrency", type=int, help="LLM requests in flight per actor (16)")
    llm.add_argument("--llm-timeout", type=float, help="seconds per LLM request before retrying (120)")


def _choices(field: FieldInfo) -> list[str]:
    """The values of a Literal field, its default first (as `--help` lists them)."""
    return [field.default, *(value for value in get_args(field.annotation) if value != field.default)]


MODES = _choices(QueryParam.model_fields["mode"])  # --mode's choices, the default first


def _flag_options(field: FieldInfo) -> dict[str, Any] | None:
    """argparse options of a QueryParam field's flag (type, choices, list, a --no- form for a
    switch), or None for a field no flag can give (chat history)."""
    annotation = field.annotation
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if get_origin(annotation) is Literal:
        return {"choices": _choices(field)}
    if annotation in (int, float, str):
        return {"type": annotation}
    optional = [arg for arg in get_args(annotation) if arg is not type(None)]
    if len(optional) == 1 and optional[0] in (int, float) and type(None) in get_args(annotation):
        return {"type": optional[0]}
    if list[str] in get_args(annotation):
        return {"nargs": "+", "metavar": "WORD"}
    return None


def _add_query_params(parser: argparse.ArgumentParser) -> None:
    """A flag per QueryParam field (``--top-k``, ...), its help the field's description and default;
    a flag not given leaves the field's default."""
    group = parser.add_argument_group("query parameters")
    for name, field in QueryParam.model_fields.items():
        options = _flag_options(field)
        if options is None:
            continue
        described = (field.description or name).rstrip(".")
        shown = f" ({field.default})" if field.default not in (None, "") else ""
        flags = [f"--{name.replace('_', '-')}", *([SHORT_FLAGS[name]] if name in SHORT_FLAGS else [])]
        group.add_argument(*flags, **options, help=f"{described[0].lower()}{described[1:]}{shown}")


def _add_pipeline(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The indexing flags (`index`, and `serve` for its insert jobs); returns the group."""
    pipe = parser.add_argument_group("pipeline")
    pipe.add_argument("--extraction-mode", choices=["llm", "fast"],
                      help="llm = prompt the LLM (default); fast = no-LLM heuristics (names, co-occurrence)")
    pipe.add_argument("--extraction-actors", type=int, help="extraction actors (2)")
    pipe.add_argument("--gleaning", type=int, help="extra 'anything missed?' rounds per chunk (1)")
    pipe.add_argument("--chunk-tokens", type=int, help="tokens per chunk (1200)")
    pipe.add_argument("--overlap-tokens", type=int, help="tokens of overlap between chunks (100)")
    pipe.add_argument("--shards", type=_shard_count, help="graph shard actors of a new workspace: a number, or auto "
                      "(from the first run's size; the default); `lightrag-ray reshard` changes an existing one's")
    pipe.add_argument("--milvus-uri", help="Milvus server URI; default a Milvus Lite file in the workspace")
    pipe.add_argument("--ray-address", help="Ray cluster address (default: start or join a local one)")
    return pipe


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
    _add_pipeline(index).add_argument("--quiet", "-q", action="store_true", help="no progress output")
    index.add_argument("--prune", action="store_true",
                       help="remove the documents whose file lies under the given paths and no longer exists "
                       "(never documents from elsewhere)")
    index.add_argument("--dry-run", action="store_true",
                       help="list what the run would add, replace, move and remove, and change nothing")

    query = sub.add_parser(
        "query", help="answer a question from a workspace",
        description="Dual-level retrieval (keywords -> entities/relations -> one-hop graph + passages), "
        "then an answer that cites numbered passages. Without an LLM use --context-only.",
        epilog=f"Modes: {', '.join(MODES)} (default {MODES[0]}). Settings as for `index` "
        f"(--config, {ENV_PREFIX}* variables).", formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("question", help="the question, in any language the workspace holds")
    _add_common(query)
    query.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    query.add_argument("--context-only", action="store_true",
                       help="no generation: print the retrieved entities, relations and passages")
    _add_query_params(query)
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
    _add_pipeline(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="HTTP port (8000)")
    serve.add_argument("--api-key", help="require this key (X-API-Key or Bearer) on every route but /health; "
                       "default $LIGHTRAG_RAY_API_KEY")
    serve.add_argument("--cors-origins", default="*",
                       help="comma-separated origins browsers may call the API from (LightRAG's CORS_ORIGINS; default *)")
    serve.add_argument("--input-dir", metavar="PATH",
                       help="folder POST /documents/scan indexes (LightRAG's INPUT_DIR; default <workspace>/inputs)")
    serve.add_argument("--workspaces-root", metavar="DIR",
                       help="serve every workspace under DIR (one folder each, made by its first insert); requests "
                       "name theirs with the LIGHTRAG-WORKSPACE header or a /w/NAME/ path prefix, else 'default'")
    serve.add_argument("--max-open-workspaces", type=_positive, default=8, metavar="N",
                       help="with --workspaces-root: workspaces kept open; the least recently used idle one is closed "
                       "past N and reopened on its next request (8)")
    serve.add_argument("--max-open-memory-mb", type=float, metavar="MB",
                       help="with --workspaces-root: also close idle workspaces while the open ones' actors (graph "
                       "shards, Milvus Lite owners) hold more than MB of memory (default: no memory cap)")
    serve.add_argument("--webui", nargs="?", const="", metavar="PATH",
                       help="serve LightRAG's WebUI at /webui (/ redirects there), from PATH (its built folder or a "
                       "lightrag_hku-*.whl), else the installed lightrag package, else a download of lightrag-hku, cached")

    status = sub.add_parser("status", help="show what a workspace holds",
                            description="Documents by status, chunk/entity/relation counts, graph version; with "
                            "--workspaces-root, every workspace under it with its counts.")
    _add_common(status, uses_ray=False)
    status.add_argument("--workspaces-root", metavar="DIR", help="list every workspace under DIR (lightrag-ray serve "
                        "--workspaces-root) with its counts")

    reshard = sub.add_parser(
        "reshard", help="move a workspace's graph to another number of shards",
        description="Repartition the graph of a workspace over --shards shards, from its files (no Ray needed; "
        "nothing may use the workspace meanwhile). Crash-safe: until the new layout is committed the old one stays "
        "valid, and the command can simply be run again. Queries answer the same after it.")
    _add_common(reshard, uses_ray=False)
    reshard.add_argument("--shards", type=_positive, required=True, help="the new number of shards")

    upgrade = sub.add_parser(
        "upgrade", help="bring a workspace indexed by an earlier version up to this one",
        description="Give the workspace's vector collections BM25 text search (a workspace indexed before it "
        "answers with vectors only, and says so). Copies the stored vectors with their texts: no document is read "
        "again, no LLM is called. The next `index` run does the same; nothing else may write to the workspace meanwhile.")
    _add_common(upgrade)
    top.add_parser(sub)
    return parser


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return int(value)


def _shard_count(value: str) -> int | str:
    """A --shards value: a positive number, or auto."""
    return value if value == "auto" else _positive(value)


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
        ("ray", "verbose"): getattr(args, "verbose", None) or None,
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
        elif key == "last_sync" and value:
            counts = ", ".join(f"{value[k]} {k}" for k in ("added", "replaced", "moved", "removed", "unchanged"))
            print(f"last sync: {counts} sources; {value['documents_removed']} documents removed ({value['finished']})")
            if "llm" in value:  # recorded since token usage was (issue 43)
                print(f"LLM tokens: last run {_tokens(value['llm'])}; all runs {_tokens(value['llm_total'])}")
        else:
            print(f"{key}: {value}")


def _index(args: argparse.Namespace) -> int:
    from lightrag_ray.cli.preflight import check_index
    from lightrag_ray.index.progress import print_progress
    from lightrag_ray.service.indexing import index_paths, preview_paths

    settings = load_settings(args.config, _overrides(args))
    if args.dry_run:
        changes = preview_paths(args.paths, settings, prune=args.prune)
        if args.json:
            _print(changes, True)
        else:
            print("\n".join(_sync_preview(changes, args.prune)))
        return 0
    check_index(settings, args.paths)
    report = index_paths(args.paths, settings, progress=None if args.quiet else print_progress, prune=args.prune)
    if args.json:
        _print(report.to_dict(), as_json=True)
    else:
        print("\n".join(_index_summary(report.to_dict())))
    return 1 if report.errors else 0


def _sync_preview(changes: dict[str, Any], prune: bool) -> list[str]:
    """`index --dry-run`: one line per source that would change, then the counts."""
    lines = [f"{verb} {name}" for verb, key in (("add", "added"), ("replace", "replaced"), ("move", "moved"),
                                                ("remove", "removed")) for name in changes["sources"][key]]
    lines.append(f"would add {changes['added']}, replace {changes['replaced']}, move {changes['moved']}, remove "
                 f"{changes['removed']} sources ({changes['documents_removed']} documents leave); "
                 f"{changes['unchanged']} unchanged" + ("" if prune else "; without --prune nothing is removed"))
    return lines


def _index_summary(r: dict[str, Any]) -> list[str]:
    """An index report in a few lines (``--json`` gives every field), then one line per error."""
    synced = [f"{r[f'sources_{k}']} {k}" for k in ("replaced", "moved", "removed") if r[f"sources_{k}"]]
    return [
        f"documents: {r['docs_new']} new, {r['docs_skipped']} already indexed, {r['docs_failed']} failed "
        f"({r['files']} files read)",
        *([f"sync: {', '.join(synced)} sources; {r['docs_removed']} documents removed"] if synced else []),
        f"chunks: {r['chunks']} ({r['chunks_cached']} from cache, {r['chunks_extracted']} extracted, "
        f"{r['chunks_failed']} failed; {r['llm_requests']} LLM requests, {r['summaries']} summaries)",
        f"graph: {r['entities']} entities, {r['relations']} relations, version {r['graph_version']}; "
        f"{r['vectors_upserted']} vectors stored in {r['seconds']} s",
        *([_tokens_line(r)] if r["llm_prompt_tokens"] or r["llm_completion_tokens"] or r["llm_unmetered_requests"]
          else []),
        *(f"error: {e['file_path']}: {e['error']}" for e in r["errors"]),
    ]


def _tokens_line(r: dict[str, Any]) -> str:
    """The LLM tokens of an index report."""
    return f"LLM tokens: {_tokens(r)}"


def _tokens(r: dict[str, Any]) -> str:
    """The LLM tokens of a report's usage fields: "unknown" when the server reported none for some call."""
    if r["llm_unmetered_requests"]:
        return f"unknown ({r['llm_unmetered_requests']} calls without usage from the server)"
    cost = f", estimated cost {r['llm_cost']:.4g}" if r["llm_cost"] is not None else ""
    return f"{r['llm_prompt_tokens']} prompt, {r['llm_completion_tokens']} completion{cost}"


def _query(args: argparse.Namespace) -> int:
    from lightrag_ray.cli.preflight import check_workspace_free
    from lightrag_ray.service.session import LocalSession

    settings = load_settings(args.config, _overrides(args))
    given = {name: getattr(args, name, None) for name in QueryParam.model_fields}
    param = QueryParam(**{name: value for name, value in given.items() if value is not None})
    if not args.context_only and settings.llm.backend == "none":
        print("error: no LLM configured to write an answer. Pass --llm-base-url http://HOST:PORT/v1, or "
              "--context-only to print what retrieval found.", file=sys.stderr)
        return 2
    check_workspace_free(settings)
    with LocalSession(settings) as session:
        engine = session.engine
        if args.context_only:
            context, keywords, _ = session.run(engine.retrieve(args.question, param))
            if args.json:
                print(json.dumps({**context.to_dict(), "keywords": vars(keywords)}, indent=2, ensure_ascii=False))
            else:
                print(context.text or "(nothing found)")
        elif args.stream:
            session.run(_print_stream(engine.stream(args.question, param)))
        else:
            result = session.run(engine.query(args.question, param))
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
    from lightrag_ray.cli.preflight import (
        check_backend,
        check_workspace_free,
        no_llm_message,
    )
    from lightrag_ray.serve.app import API_KEY_ENV, AppArgs, app_settings
    from lightrag_ray.serve.webui_source import find_webui

    origins = [origin.strip() for origin in args.cors_origins.split(",") if origin.strip()]
    webui = None if args.webui is None else str(find_webui(args.webui))
    app_args = AppArgs(config=args.config, settings=_overrides(args), api_key=args.api_key, cors_origins=origins,
                       webui=webui, input_dir=args.input_dir, workspaces_root=args.workspaces_root,
                       max_open_workspaces=args.max_open_workspaces, max_open_memory_mb=args.max_open_memory_mb)
    settings = app_settings(app_args)
    check_backend(settings)
    if args.workspaces_root is None:
        check_workspace_free(settings)
    if args.host not in LOOPBACK and not (args.api_key or os.environ.get(API_KEY_ENV)):
        print(f"warning: listening on {args.host} without an API key: anyone who can reach port {args.port} can "
              f"read and change this workspace. Pass --api-key or set {API_KEY_ENV}.", file=sys.stderr)
    if no_llm_message(settings):
        print("note: no LLM configured, so inserts are refused (HTTP 409). Pass --llm-base-url "
              "http://HOST:PORT/v1, or --extraction-mode fast to index without an LLM.", file=sys.stderr)
    return _run_server(app_args, settings, args.host, args.port)


def _run_server(app_args: AppArgs, settings: Settings, host: str, port: int) -> int:
    """Start the app and block until Ctrl-C or SIGTERM, then shut it down."""
    from ray import serve

    from lightrag_ray.ray_runtime import ensure_ray
    from lightrag_ray.serve.app import APP_NAME, build_app

    ensure_ray(settings)
    if not settings.ray.verbose:  # "Started Serve", "Application ... is ready": we say it in one line
        logging.getLogger("ray.serve").setLevel(logging.WARNING)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(build_app(app_args), name=APP_NAME, route_prefix="/", blocking=False)
        webui = f", WebUI at http://{host}:{port}/webui/" if app_args.webui else ""
        print(f"serving on http://{host}:{port} (docs at /docs{webui}); Ctrl-C stops", file=sys.stderr)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # also while starting
        print("stopping the server", file=sys.stderr)
        # The app only: on a shared cluster Serve (and other apps) stay up; a local cluster this
        # command started ends with it. (serve.shutdown's controller kills itself under the
        # call, which Ray reports as a failed task line.)
        serve.delete(APP_NAME)
    return 0


def _status(args: argparse.Namespace) -> int:
    from lightrag_ray.service.status import workspace_status
    from lightrag_ray.service.workspaces import WorkspaceCatalog

    settings = load_settings(args.config, _overrides(args))
    if args.workspaces_root is None:
        _print(workspace_status(settings.workspace, settings.milvus_uri()), args.json)
        return 0
    catalog = WorkspaceCatalog(settings, args.workspaces_root)
    if catalog.root is None or not catalog.root.is_dir():
        raise FileNotFoundError(f"{args.workspaces_root} is not a folder of workspaces")
    rows = [catalog.summary(name) for name in catalog.names()]
    if args.json:
        _print({"workspaces": rows}, True)
        return 0
    for row in rows:
        docs = ", ".join(f"{n} {s}" for s, n in sorted(row["documents"].items())) or "no documents"
        print(f"{row['name']}: {docs}; {row['entities']} entities, {row['relations']} relations ({row['workspace']})")
    return 0


def _reshard(args: argparse.Namespace) -> int:
    from lightrag_ray.service.reshard import reshard_workspace

    settings = load_settings(args.config, {"workspace": args.workspace} if args.workspace else {})
    _print(reshard_workspace(settings, args.shards), args.json)
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    from lightrag_ray.service.upgrade import upgrade_workspace

    result = upgrade_workspace(load_settings(args.config, _overrides(args)))
    if args.json:
        _print(result, True)
    else:
        copied = ", ".join(f"{kind} {n} rows" for kind, n in result["rows_copied"].items()) or "nothing to do"
        print(f"{result['workspace']}: BM25 text search on {', '.join(result['text_search'])} ({copied})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `lightrag-ray` console script."""
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    commands = {"index": _index, "query": _query, "demo": _demo, "serve": _serve, "status": _status,
                "reshard": _reshard, "upgrade": _upgrade, "top": top.run}
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("interrupted: stopped; run the same command again to continue where it stopped", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line (traceback in the log)
        return report_failure(exc, argv)


def _interrupt(_signum: int, _frame: Any) -> None:
    """SIGTERM stops a command the way Ctrl-C does: through the SIGINT handler in force (an
    event loop's cancels its tasks first), or at once when SIGINT is ignored."""
    if callable(signal.getsignal(signal.SIGINT)):
        signal.raise_signal(signal.SIGINT)
    else:
        raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
