"""Soak test of the Serve app: mixed traffic with faults for ``--minutes`` (issue 29; method and
figures: docs/benchmarks.md, "Soak").

Starts Ray, a Milvus standalone server, the scripted LLM and ``lightrag-ray serve`` on a fresh
workspace; drives queries in every mode on the five query routes (``--rate``), the WebUI's
polling (``--poll-every``) and a writer cycle every ``--insert-every`` s (inserts, deletes,
graph edits); kills a graph shard at 1/3, the embedding worker four times from 1/2, the
workspace owner at 2/3. At the end it accounts for every accepted document, stops the server,
checks no process is left and compares the graph with a batch run of the surviving documents.
Prints a targets table and exits 1 when a target is not met.

    .venv/bin/python scripts/soak.py --minutes 60 --json-out /tmp/soak/soak.json --plot /tmp/soak/soak.png
    .venv/bin/python scripts/soak.py --minutes 3 --json-out /tmp/soak/soak3.json   # CI: tests/test_soak.py
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import ray  # noqa: E402
from bench_kit import (MIB, ActorTable, Poller, child_env, command_line, cpu_seconds, is_ray_worker,  # noqa: E402
                       logger, machine, markdown, percentiles_ms, pyplot, pythonpath, ray_worker_role, start_ray,
                       stop_ray, write_json)

from lightrag_ray.config import ENV_PREFIX, load_settings  # noqa: E402
from lightrag_ray.index.documents import parse_file  # noqa: E402
from lightrag_ray.query.params import MODES, RETRIEVAL_MODES  # noqa: E402
from lightrag_ray.ray_runtime import local_cluster_defaults  # noqa: E402
from lightrag_ray.storage.graph.actor import shard_actor_name  # noqa: E402
from tests.graph_helpers import graph_differences, load_stored  # noqa: E402
from tests.milvus_standalone import MilvusStandalone  # noqa: E402
from tests.net_helpers import answers, free_port, wait_until  # noqa: E402

MARKER_ENV = "LIGHTRAG_SOAK_RUN"  # every process of a run carries it (Ray's included): found by it at the end
NAMESPACE = "lightrag_ray"  # settings.ray.namespace: where the shard actors are named
CAROL = ROOT / "lightrag_ray" / "data" / "christmas_carol.txt"
SAMPLES = DATA / "lightrag_eval_sample" / "sample_documents"
PIECE_CHARS = 2500  # a Christmas Carol piece: paragraphs up to about this many characters
WINDOW_LIMIT_S = 30.0  # the service must answer again within this after a kill
RSS_LIMIT = 0.10  # RSS growth of every process over the last 40 minutes (runs of 60+ minutes)
RSS_WINDOW_S = 40 * 60
# Growth compares the median RSS of the window's first and last 5 minutes: a process that
# collects garbage in cycles (the Milvus server's Go heap swings by ~50 MiB) would otherwise
# show the phase of that cycle at two instants rather than growth.
RSS_SPAN_S = 5 * 60
QUESTIONS = [
    "Who is Jacob Marley?", "What does the Ghost of Christmas Past show Scrooge?",
    "How does Bob Cratchit celebrate Christmas?", "Who is Tiny Tim?", "What happens to Scrooge at the end?",
    "Who is Fezziwig?", "What is Scrooge's nephew Fred like?", "Where does Scrooge work?",
    "What is LightRAG?", "Which databases does LightRAG support?", "How is LightRAG evaluated?",
    "What problems of large language models does retrieval solve?",
]
QUERY_ROUTES = ("/query", "/query/data", "/query/stream", "/v1/chat/completions", "/api/chat")
# Writes an insert job holds off with 409 + Retry-After (LightRAG's busy pipeline); they are sent again.
BUSY_ROUTES = ("/documents/delete_document", "/graph/entity/create", "/graph/entity/edit", "/graph/relation/create",
               "/graph/relation/edit", "/graph/relation/delete", "/graph/entity/delete", "/documents/delete_entity")
# Process roles, from the actor class or the ``ray::`` title of a Ray worker (first match wins).
ACTOR_ROLES = (
    ("workspace owner", re.compile(r"WorkspaceDeployment")),
    ("ingress", re.compile(r"ServeReplica:[^:]+:Ingress")),
    ("query embedder", re.compile(r"EmbedderDeployment")),
    ("llm deployment", re.compile(r"LLMDeployment")),
    ("serve controller", re.compile(r"ServeController")),
    ("serve proxy", re.compile(r"ProxyActor")),
    ("graph shards", re.compile(r"GraphShard")),
    ("embed workers", re.compile(r"EmbedWorker")),
    # Ray Data's detached helpers serve the whole cluster (they end with it, not with the app)
    ("ray data helpers", re.compile(r"_StatsActor|ActorLocationTracker|AutoscalingRequester")),
    ("extraction", re.compile(r"MapWorker|Read|Map|Extract|Summar|Dataset|Split|Filter|Project")),
)
APP_ROLES = {"serve CLI", "workspace owner", "ingress", "query embedder", "llm deployment", "graph shards",
             "embed workers", "extraction"}
HARNESS_ROLES = {"soak script", "scripted LLM"}  # test equipment, not the product: outside the RSS target
log = logger("soak")


# ---- documents ---------------------------------------------------------------------------------
@dataclass
class Doc:
    """A document the soak sends: its name (the file_path the server shows), type and bytes."""

    name: str
    suffix: str  # how the server reads it: .txt for /documents/text, the file's suffix for uploads
    data: bytes
    route: str
    doc_id: str = ""
    state: str = "new"  # new -> attempted -> accepted -> delete_attempted -> deleted
    track_id: str = ""
    accepted_s: float | None = None

    def __post_init__(self) -> None:
        [row] = parse_file(f"doc{self.suffix}", self.data, self.name)  # the server's own parsing: same doc id
        self.doc_id = row["doc_id"]


def carol_pieces(chars: int = PIECE_CHARS) -> list[str]:
    """A Christmas Carol (its text, without the Gutenberg header and licence) as consecutive
    pieces of whole paragraphs, about ``chars`` characters each."""
    text = CAROL.read_text(encoding="utf-8-sig")
    start, end = text.find("*** START OF"), text.find("*** END OF")
    body = text[text.find("\n", start) + 1: end if end > 0 else None]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if len(p.strip()) > 40]
    pieces, current = [], ""
    for paragraph in paragraphs:
        if current and len(current) + len(paragraph) > chars:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        pieces.append(current)
    return pieces


class DocumentSource:
    """The documents to insert, in a fixed order: Christmas Carol pieces as texts and .txt
    uploads, LightRAG's sample documents as .md uploads; after a full pass, the same with a
    ``(soak copy N)`` line first (a new document: new id, new chunks, the same entities)."""

    def __init__(self, seed: int) -> None:
        self.pieces = carol_pieces()
        random.Random(seed).shuffle(self.pieces)
        self.samples = sorted(p for p in SAMPLES.glob("*.md") if p.name != "README.md")
        self.used: Counter[str] = Counter()
        self.next_piece = 0
        self.next_sample = 0

    def _copy(self, key: str, text: str) -> tuple[str, int]:
        """``text`` and its copy number: 0 the first time, then a ``(soak copy N)`` line first."""
        copy = self.used[key]
        self.used[key] += 1
        return (text if copy == 0 else f"(soak copy {copy})\n\n{text}"), copy

    def piece(self, route: str, suffix: str = ".txt") -> Doc:
        """The next Christmas Carol piece, sent by ``route`` (as a file of ``suffix`` for uploads)."""
        number = self.next_piece % len(self.pieces)
        self.next_piece += 1
        key = f"carol-{number:03d}"
        text, copy = self._copy(key, self.pieces[number])
        name = f"{key}{f'-copy{copy}' if copy else ''}.txt"
        return Doc(name, ".txt" if route == "/documents/text" else suffix, text.encode("utf-8"), route)

    def sample(self) -> Doc:
        """The next sample document, as a .md upload."""
        path = self.samples[self.next_sample % len(self.samples)]
        self.next_sample += 1
        text, copy = self._copy(path.name, path.read_text(encoding="utf-8"))
        name = path.name if not copy else f"{path.stem}-copy{copy}.md"
        return Doc(name, ".md", text.encode("utf-8"), "/documents/upload")


# ---- requests ------------------------------------------------------------------------------------
@dataclass
class Call:
    """One HTTP request: route, times (seconds since the traffic started), status (0: no answer)."""

    route: str
    start: float
    end: float
    status: int
    retry_after: bool = False
    error: str = ""  # why a request failed: its body, a stream's error line, the transport error
    mode: str = ""
    busy: bool = False  # 409 + Retry-After on a write an insert job holds off (documented, sent again)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300 and not self.error


def body_error(route: str, response: httpx.Response, stream: bool) -> str:
    """Why a 2xx answer is not a good one (an error line in a stream, an empty answer), or ""."""
    text = response.text
    try:
        if route == "/query":
            return "" if response.json().get("response") else "empty response"
        if route == "/query/stream" or (route == "/api/chat" and stream):
            lines = [json.loads(line) for line in text.splitlines() if line.strip()]
            bad = [line["error"] for line in lines if "error" in line]
            if bad:
                return f"stream error: {bad[0]}"
            if route == "/api/chat" and not (lines and lines[-1].get("done")):
                return "stream without its done line"
            return ""
        if route == "/v1/chat/completions" and stream:
            events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
            bad = [e for e in events if e != "[DONE]" and "error" in json.loads(e)]
            if bad:
                return f"stream error: {bad[0][:200]}"
            return "" if events and events[-1] == "[DONE]" else "stream without [DONE]"
        if route == "/v1/chat/completions":
            return "" if response.json()["choices"][0]["message"]["content"] else "empty answer"
        if route == "/api/chat":
            return "" if response.json()["message"]["content"] else "empty answer"
        if text:
            response.json()
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return f"malformed answer ({type(exc).__name__}): {text[:200]}"
    return ""


class Traffic:
    """The HTTP client of the run; every request is recorded as a Call."""

    def __init__(self, url: str, t0: float) -> None:
        self.client = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60.0, connect=10.0),
                                        limits=httpx.Limits(max_connections=64, max_keepalive_connections=32))
        self.t0 = t0
        self.calls: list[Call] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def send(self, method: str, path: str, *, route: str | None = None, mode: str = "", stream: bool = False,
                   **kwargs: Any) -> httpx.Response | None:
        """One request, recorded under ``route`` (default: the path); None when no answer came."""
        route = route or path
        start = self.now()
        try:
            response = await self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            self.calls.append(Call(route, start, self.now(), 0, error=f"{type(exc).__name__}: {exc}"[:300], mode=mode))
            return None
        end = self.now()
        retry_after = "retry-after" in response.headers
        call = Call(route, start, end, response.status_code, retry_after, mode=mode,
                    busy=response.status_code == 409 and retry_after and route in BUSY_ROUTES)
        if 200 <= response.status_code < 300:
            call.error = body_error(route, response, stream)
        elif not call.busy:
            call.error = response.text[:300]
        self.calls.append(call)
        return response

    async def close(self) -> None:
        await self.client.aclose()


def query_plan(seed: int) -> list[tuple[str, str, bool]]:
    """(route, mode, stream) of one cycle of the query mix: every mode on every query route,
    streamed and whole answers, in a seeded order."""
    plan = [("/query", mode, False) for mode in MODES]
    plan += [("/query/data", mode, False) for mode in RETRIEVAL_MODES]
    plan += [("/query/stream", mode, True) for mode in MODES]
    plan += [("/v1/chat/completions", mode, n % 2 == 0) for n, mode in enumerate(MODES)]
    plan += [("/api/chat", mode, n % 2 == 1) for n, mode in enumerate(MODES)]
    random.Random(seed).shuffle(plan)
    return plan


def query_request(route: str, mode: str, stream: bool, question: str) -> dict[str, Any]:
    """The request body of one query of the mix."""
    if route in ("/query", "/query/data"):
        return {"query": question, "mode": mode}
    if route == "/query/stream":
        return {"query": question, "mode": mode, "stream": True}
    if route == "/v1/chat/completions":
        return {"model": f"lightrag-{mode}", "stream": stream, "messages": [{"role": "user", "content": question}]}
    return {"model": "lightrag:latest", "stream": stream, "messages": [{"role": "user", "content": f"/{mode} {question}"}]}


async def run_queries(traffic: Traffic, rate: float, until: float, seed: int, max_in_flight: int = 16) -> int:
    """Queries at ``rate`` per second (open loop: a slow answer does not slow the rate) until
    ``until``; returns how many ticks were skipped because ``max_in_flight`` were still running."""
    plan, tasks, skipped = query_plan(seed), set(), 0
    tick = 0
    while traffic.now() < until:
        tasks = {t for t in tasks if not t.done()}
        if len(tasks) >= max_in_flight:
            skipped += 1
        else:
            route, mode, stream = plan[tick % len(plan)]
            body = query_request(route, mode, stream, QUESTIONS[tick % len(QUESTIONS)])
            tasks.add(asyncio.create_task(traffic.send("POST", route, mode=mode, stream=stream, json=body)))
        tick += 1
        await asyncio.sleep(max(0.0, tick / rate - traffic.now()))
    await asyncio.gather(*tasks)
    return skipped


async def poll_webui(traffic: Traffic, every: float, until: float) -> None:
    """The WebUI's polling: health and pipeline every round, the documents and graph tabs' reads
    in turn."""
    round_ = 0
    while traffic.now() < until:
        started = traffic.now()
        await traffic.send("GET", "/health")
        await traffic.send("GET", "/documents/pipeline_status")
        await traffic.send("POST", "/documents/paginated", json={"page": 1, "page_size": 10, "status_filter": None,
                                                                  "sort_field": "updated_at", "sort_direction": "desc"})
        if round_ % 2 == 0:
            await traffic.send("GET", "/documents/status_counts")
            await traffic.send("GET", "/graph/label/popular", params={"limit": 50})
        else:
            await traffic.send("GET", "/graphs", params={"label": "*", "max_depth": 2, "max_nodes": 100})
        if round_ % 4 == 3:
            await traffic.send("GET", "/graph/label/list")
        round_ += 1
        await asyncio.sleep(max(0.0, every - (traffic.now() - started)))


# ---- writes --------------------------------------------------------------------------------------
class Writer:
    """Inserts, deletes and graph edits, and the registry of every document sent."""

    def __init__(self, traffic: Traffic, source: DocumentSource, live_docs: int) -> None:
        self.traffic = traffic
        self.source = source
        self.live_docs = live_docs
        self.docs: dict[str, Doc] = {}
        self.tracks: dict[str, str] = {}  # track id -> last job_status seen
        self.probes: set[str] = set()  # probe entities that may exist
        self.lock = asyncio.Lock()  # one write sequence at a time (the writer cycle, a fault's insert)
        self.gave_up: list[str] = []  # writes still refused busy after their time

    async def insert(self, docs: list[Doc]) -> str | None:
        """Send ``docs`` as one insert (several: /documents/texts); returns the track id."""
        for doc in docs:
            doc.state = "attempted"
            self.docs[doc.doc_id] = doc
        route = docs[0].route if len(docs) == 1 else "/documents/texts"
        if route == "/documents/text":
            response = await self.traffic.send("POST", route, json={"text": docs[0].data.decode(), "file_source": docs[0].name})
        elif route == "/documents/texts":
            response = await self.traffic.send("POST", route, json={"texts": [d.data.decode() for d in docs],
                                                                   "file_sources": [d.name for d in docs]})
        else:
            mime = "text/markdown" if docs[0].suffix == ".md" else "text/plain"
            response = await self.traffic.send("POST", route, files={"file": (docs[0].name, docs[0].data, mime)})
        if response is None or response.status_code != 200:
            return None
        answer = response.json()
        if answer.get("status") != "success" or set(answer["doc_ids"]) != {d.doc_id for d in docs}:
            self.traffic.calls[-1].error = f"unexpected insert answer: {str(answer)[:200]}"
        for doc in docs:
            doc.state, doc.track_id, doc.accepted_s = "accepted", answer["track_id"], self.traffic.now()
        self.tracks[answer["track_id"]] = "pending"
        return answer["track_id"]

    async def follow_tracks(self) -> None:
        """Poll the track status of every job not yet ended."""
        for track_id, status in list(self.tracks.items()):
            if status in ("pending", "processing"):
                response = await self.traffic.send("GET", f"/documents/track_status/{track_id}",
                                                   route="/documents/track_status/{id}")
                if response is not None and response.status_code == 200:
                    self.tracks[track_id] = response.json()["job_status"]

    async def write(self, method: str, path: str, body: dict[str, Any], give_up_s: float = 90.0) -> httpx.Response | None:
        """A write that an insert job may hold off: sent again after Retry-After while it answers
        409, for at most ``give_up_s``."""
        deadline = self.traffic.now() + give_up_s
        while True:
            response = await self.traffic.send(method, path, json=body)
            if response is None or response.status_code != 409 or "retry-after" not in response.headers:
                return response
            if self.traffic.now() > deadline:
                self.gave_up.append(f"{method} {path} {json.dumps(body)[:120]}")
                return response
            await asyncio.sleep(min(float(response.headers["retry-after"]), 3.0))

    def live(self) -> list[Doc]:
        """Accepted documents not deleted, oldest first."""
        return sorted((d for d in self.docs.values() if d.state == "accepted"), key=lambda d: d.accepted_s or 0.0)

    async def delete_oldest(self) -> None:
        """Delete the oldest document whose job has ended processed."""
        done = [d for d in self.live() if self.tracks.get(d.track_id) == "processed"]
        if not done:
            return
        doc = done[0]
        doc.state = "delete_attempted"
        response = await self.write("DELETE", "/documents/delete_document", {"doc_ids": [doc.doc_id]})
        if response is not None and response.status_code == 200:
            if doc.doc_id in response.json().get("deleted", []):
                doc.state = "deleted"
            else:
                self.traffic.calls[-1].error = f"the delete did not delete {doc.doc_id}: {response.text[:200]}"
        elif response is not None and response.status_code == 409:
            doc.state = "accepted"  # still refused busy: it stays

    async def edit_round(self, number: int) -> None:
        """Graph edits on two probe entities, which end deleted: create, edit, relate, edit the
        relation, delete the relation and the entities (the second by LightRAG's older route)."""
        a, b = f"Soakprobe Qzx {number}", f"Soakprobe Vyk {number}"
        self.probes |= {a, b}
        steps: list[tuple[str, str, dict[str, Any]]] = [
            ("POST", "/graph/entity/create", {"entity_name": a, "entity_data": {
                "description": f"A probe entity of soak round {number}.", "entity_type": "concept"}}),
            ("POST", "/graph/entity/create", {"entity_name": b, "entity_data": {
                "description": f"Another probe entity of soak round {number}.", "entity_type": "concept"}}),
            ("POST", "/graph/entity/edit", {"entity_name": a, "updated_data": {
                "description": f"The edited probe entity of soak round {number}."}, "allow_rename": False}),
            ("POST", "/graph/relation/create", {"source_entity": a, "target_entity": b, "relation_data": {
                "description": f"Probes of round {number} are related.", "keywords": "probe", "weight": 1.0}}),
            ("POST", "/graph/relation/edit", {"source_id": a, "target_id": b, "updated_data": {
                "description": f"Probes of round {number} are related, edited."}}),
            ("DELETE", "/graph/relation/delete", {"source_entity": a, "target_entity": b}),
            ("DELETE", "/graph/entity/delete", {"entity_name": a}),
            ("DELETE", "/documents/delete_entity", {"entity_name": b}),
        ]
        for method, path, body in steps:
            response = await self.write(method, path, body)
            if response is None or response.status_code != 200:
                return  # a later clean-up removes what is left
        self.probes -= {a, b}

    async def remove_probes(self) -> None:
        """Delete the probe entities an interrupted edit round left."""
        for name in sorted(self.probes):
            response = await self.traffic.send("GET", "/graph/entity/exists", params={"name": name})
            if response is not None and response.status_code == 200 and response.json().get("exists"):
                await self.write("DELETE", "/graph/entity/delete", {"entity_name": name}, give_up_s=300)
            else:
                self.probes.discard(name)

    def next_insert(self, cycle: int) -> Doc:
        """The cycle's document: a text, a .md upload, a text, a .txt upload, in turn."""
        kind = cycle % 4
        if kind == 1:
            return self.source.sample()
        return self.source.piece("/documents/upload" if kind == 3 else "/documents/text")

    async def run(self, every: float, until: float) -> int:
        """Writer cycles every ``every`` s until ``until``; returns how many ran."""
        cycle = 0
        while self.traffic.now() < until:
            started = self.traffic.now()
            async with self.lock:
                await self.follow_tracks()
                if cycle % 3 == 2 or len(self.live()) > self.live_docs:
                    await self.delete_oldest()
                if cycle % 4 == 3:
                    await self.edit_round(cycle)
                await self.insert([self.next_insert(cycle)])
            cycle += 1
            await asyncio.sleep(max(0.0, min(every - (self.traffic.now() - started), until - self.traffic.now())))
        return cycle

    async def wait_for_jobs(self, timeout_s: float) -> bool:
        """Until no insert job is pending or processing (GET /documents); False on timeout."""
        deadline = self.traffic.now() + timeout_s
        while self.traffic.now() < deadline:
            await self.follow_tracks()
            response = await self.traffic.send("GET", "/documents")
            if response is not None and response.status_code == 200:
                statuses = response.json()["statuses"]
                if not statuses.get("pending") and not statuses.get("processing") and \
                        all(s not in ("pending", "processing") for s in self.tracks.values()):
                    return True
            await asyncio.sleep(2.0)
        return False


# ---- faults --------------------------------------------------------------------------------------
@dataclass
class Window:
    """A kill and the time until the service answered again (seconds since the traffic started)."""

    kind: str  # "graph shard", "embed worker", "workspace owner"
    target: str
    pid: int
    at_s: float
    end_s: float | None = None
    replacement_pid: int | None = None
    note: str = ""

    @property
    def seconds(self) -> float | None:
        return None if self.end_s is None else round(self.end_s - self.at_s, 2)


def live_actors(class_part: str) -> list[dict[str, Any]]:
    """The ALIVE actors whose class name holds ``class_part`` (GCS actor table)."""
    from ray._private import state

    return [a for a in state.actors().values() if class_part in a["ActorClassName"] and a["State"] == "ALIVE"]


def actor_by_name(name: str) -> dict[str, Any] | None:
    """The newest entry of the actor named ``name`` (any state)."""
    from ray._private import state

    found = [a for a in state.actors().values() if a.get("Name") == name]
    return max(found, key=lambda a: a.get("StartTime") or 0) if found else None


class Faults:
    """The fault schedule: shard at 1/3, embedding worker x4 from 1/2, owner at 2/3."""

    def __init__(self, traffic: Traffic, writer: Writer, workspace: str, shards: int, seed: int,
                 give_up_s: float = 180.0) -> None:
        self.traffic = traffic
        self.writer = writer
        self.workspace = workspace
        self.shards = shards
        self.rng = random.Random(seed)
        self.give_up_s = give_up_s
        self.windows: list[Window] = []

    async def _until(self, at: float) -> None:
        await asyncio.sleep(max(0.0, at - self.traffic.now()))

    async def _recovered(self, window: Window, probe: Callable[[], Awaitable[bool]]) -> None:
        """Probe every half second until ``probe`` holds; the window ends when it does."""
        deadline = window.at_s + self.give_up_s
        while self.traffic.now() < deadline:
            if await probe():
                window.end_s = self.traffic.now()
                log(f"{window.kind} back after {window.seconds} s")
                return
            await asyncio.sleep(0.5)
        window.note = f"not back after {self.give_up_s:g} s"
        log(f"{window.kind}: {window.note}")

    def _kill(self, kind: str, target: str, pid: int) -> Window:
        os.kill(pid, signal.SIGKILL)
        window = Window(kind, target, pid, self.traffic.now())
        self.windows.append(window)
        log(f"killed the {kind} {target} (pid {pid})")
        return window

    async def _insert_running(self, pieces: int) -> str | None:
        """Submit an insert of ``pieces`` Christmas Carol pieces and wait until its job runs."""
        async with self.writer.lock:
            track = await self.writer.insert([self.writer.source.piece("/documents/text") for _ in range(pieces)])
        deadline = self.traffic.now() + 120
        while track and self.traffic.now() < deadline:
            response = await self.traffic.send("GET", f"/documents/track_status/{track}",
                                               route="/documents/track_status/{id}")
            if response is not None and response.status_code == 200:
                status = response.json()["job_status"]
                self.writer.tracks[track] = status
                if status != "pending":
                    return track if status == "processing" else None
            await asyncio.sleep(0.2)
        return None

    async def _answers(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        response = await self.traffic.send(method, path, **kwargs)
        return response if response is not None and response.status_code == 200 else None

    async def kill_shard(self) -> None:
        """SIGKILL one graph shard; back when the label list and a query answer 200."""
        shard = self.rng.randrange(self.shards)
        name = shard_actor_name(self.workspace, shard, self.shards)
        actor = await asyncio.to_thread(actor_by_name, name)
        if actor is None or actor["State"] != "ALIVE":
            log(f"shard {name} not found alive: no shard kill")
            return
        window = self._kill("graph shard", name, actor["Pid"])

        async def probe() -> bool:
            body = {"query": QUESTIONS[0], "mode": "mix"}
            return bool(await self._answers("GET", "/graph/label/list") and
                        await self._answers("POST", "/query/data", json=body, mode="mix"))

        await self._recovered(window, probe)
        after = await asyncio.to_thread(actor_by_name, name)
        window.replacement_pid = after["Pid"] if after and after["State"] == "ALIVE" else None

    async def kill_embed_worker(self, times: int = 4) -> None:
        """SIGKILL the insert jobs' embedding worker ``times`` times in a row, the first while an
        insert runs, each once its replacement is up (after Ray's 3 restarts, the next insert
        job starts a new worker)."""
        running = await self._insert_running(pieces=3)
        if running is None:
            log("no insert job running before the first embedding-worker kill")
        await asyncio.sleep(1.0)
        for number in range(times):
            workers = await asyncio.to_thread(live_actors, "EmbedWorker")
            deadline = self.traffic.now() + 60
            while not workers and self.traffic.now() < deadline:
                await asyncio.sleep(0.5)
                workers = await asyncio.to_thread(live_actors, "EmbedWorker")
            if not workers:
                log("no embedding worker alive: stopping the embedding-worker kills")
                return
            window = self._kill("embed worker", f"EmbedWorker kill {number + 1}/{times}", workers[0]["Pid"])
            if number == times - 1:  # dead for good now: the next insert job replaces it
                async with self.writer.lock:
                    await self.writer.insert([self.writer.source.piece("/documents/text")])

            async def probe(killed: int = window.pid) -> bool:
                alive = await asyncio.to_thread(live_actors, "EmbedWorker")
                replacement = [a["Pid"] for a in alive if a["Pid"] != killed]
                if replacement:
                    window.replacement_pid = replacement[0]
                return bool(replacement)

            await self._recovered(window, probe)

    async def kill_owner(self) -> None:
        """SIGKILL the workspace owner while an insert runs; back when /health shows the owner's
        fields and the pipeline status answers."""
        if await self._insert_running(pieces=3) is None:
            log("no insert job running before the owner kill")
        owners = await asyncio.to_thread(live_actors, "WorkspaceDeployment")
        if not owners:
            log("no workspace owner alive: no owner kill")
            return
        window = self._kill("workspace owner", owners[0]["ActorClassName"], owners[0]["Pid"])

        async def probe() -> bool:
            health = await self._answers("GET", "/health")
            if health is None or "graph_version" not in health.json():
                return False
            return bool(await self._answers("GET", "/documents/pipeline_status"))

        await self._recovered(window, probe)
        owners = await asyncio.to_thread(live_actors, "WorkspaceDeployment")
        window.replacement_pid = owners[0]["Pid"] if owners else None

    async def run(self, total_s: float) -> None:
        """The schedule, one fault at a time (a fault due while another's window is open waits)."""
        await self._until(total_s / 3)
        await self.kill_shard()
        await self._until(total_s / 2)
        await self.kill_embed_worker()
        await self._until(2 * total_s / 3)
        await self.kill_owner()


# ---- processes ---------------------------------------------------------------------------------
def marked_pids(marker: str) -> list[int]:
    """Processes whose environment holds this run's marker (as tests/test_cli_edges.py finds them)."""
    needle = f"{MARKER_ENV}={marker}".encode()

    def marked(proc: Path) -> bool:
        try:
            return needle in (proc / "environ").read_bytes()
        except OSError:  # gone, or not ours
            return False

    return [int(proc.name) for proc in Path("/proc").iterdir() if proc.name.isdigit() and marked(proc)]


class ProcessSampler(Poller):
    """Every ``every`` s: RSS and CPU seconds of each process of the run, with its role."""

    def __init__(self, marker: str, labels: dict[int, str], every: float, t0: float) -> None:
        super().__init__(every)
        self.marker = marker
        self.labels = labels  # pid -> role of the processes this script started (and their children)
        self.t0 = t0
        self.samples: list[tuple[float, dict[int, tuple[str, int, float]]]] = []  # (t, {pid: (role, rss, cpu)})
        self.roles: dict[int, str] = {}
        self.titles: dict[int, str] = {}
        self.actors = ActorTable(5.0)

    def _role(self, pid: int, proc: psutil.Process, title: str) -> str:
        if pid in self.labels:
            return self.labels[pid]
        parent = proc.ppid()
        if parent in self.labels and self.labels[parent] != "soak script":
            return self.labels[parent]
        role = (ray_worker_role(title, self.actors.classes.get(pid, ""), ACTOR_ROLES) if is_ray_worker(title)
                else "ray daemons")
        known = self.roles.get(pid)
        if role in ("other ray workers", "ray daemons") and known not in (None, "other ray workers", "ray daemons"):
            return known  # a worker keeps the most specific role it was seen in
        return role

    def tick(self) -> None:
        now = time.monotonic() - self.t0
        self.actors.refresh()
        sample: dict[int, tuple[str, int, float]] = {}
        for pid in {*marked_pids(self.marker), os.getpid()}:
            try:
                proc = psutil.Process(pid)
                with proc.oneshot():
                    title = " ".join(proc.cmdline()).strip() or proc.name()
                    role = self._role(pid, proc, title)
                    sample[pid] = (role, proc.memory_info().rss, cpu_seconds(proc))
            except psutil.Error:
                continue
            self.roles[pid] = role
            self.titles.setdefault(pid, title[:160])
        self.samples.append((round(now, 2), sample))

    def snapshot(self) -> dict[int, str]:
        """pid -> role of the run's processes alive now (classified afresh)."""
        self.tick()
        return {pid: role for pid, (role, _, _) in self.samples[-1][1].items()}


# ---- the services ------------------------------------------------------------------------------
def marked_env(marker: str) -> dict[str, str]:
    """A child's environment: this one with the marker, offline, no auth, none of our settings variables."""
    env = child_env(PYTHONPATH=pythonpath(), **{MARKER_ENV: marker})
    return {k: v for k, v in env.items() if not k.startswith(ENV_PREFIX)}


def start_llm(workdir: Path, marker: str, latency: float) -> tuple[subprocess.Popen, str]:
    """The scripted LLM as a subprocess (its own interpreter: its work does not compete with
    this script's event loop); returns the process and its /v1 URL."""
    port = free_port()
    log_path = workdir / "scripted_llm.log"
    with log_path.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "tests.scripted_llm", "--port", str(port), "--latency",
                                    str(latency)], cwd=ROOT, env=marked_env(marker), stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers(url, "/v1/models"), 60, "the scripted LLM", process, log_path)
    return process, f"{url}/v1"


def soak_settings(llm_url: str, milvus_uri: str, prefix: str) -> dict[str, Any]:
    """The served workspace's settings (the batch run's too, with its own collections)."""
    return {
        "llm": {"backend": "openai", "base_url": llm_url, "model": "scripted", "timeout_s": 30, "max_retries": 2,
                "backoff_s": 0.2},
        "extraction": {"mode": "llm", "actors": 1},
        "chunking": {"chunk_tokens": 400, "overlap_tokens": 40},
        # source ids are kept per item up to max_source_ids in arrival order: high, so that the
        # order of inserts cannot change which ones a hub entity keeps (the graphs are compared)
        # 4 fragments (LightRAG: 8) before a description is summarised: more incremental summaries
        "graph": {"num_shards": 2, "max_source_ids": 100_000, "summary_max_fragments": 4},
        "vectors": {"uri": milvus_uri, "collection_prefix": prefix},
    }


def start_soak_ray(cpus: int) -> tuple[str, Path]:
    """A local Ray cluster owned by this process, started as `lightrag-ray serve` would start one
    (its processes inherit the marker)."""
    local_cluster_defaults()
    temp = Path(tempfile.mkdtemp(prefix="soakray_", dir="/tmp"))
    return start_ray(cpus, namespace=NAMESPACE, temp_dir=temp, object_store_mb=1024), temp


def start_serve(workdir: Path, marker: str, config: Path, address: str) -> tuple[subprocess.Popen, str, Path]:
    """``lightrag-ray serve`` on a free port, joined to the cluster; returns once /health
    answers with the owner's fields (the workspace is open)."""
    port = free_port()
    log_path = workdir / "serve.log"
    command = [sys.executable, "-m", "lightrag_ray.cli.main", "serve", "--workspace", str(workdir / "served_ws"),
               "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--ray-address", address]
    with log_path.open("w") as out:
        process = subprocess.Popen(command, cwd=workdir, env=marked_env(marker), stdout=out, stderr=subprocess.STDOUT,
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return "graph_version" in httpx.get(url + "/health", timeout=30).json()
        except (httpx.HTTPError, ValueError):
            return False

    try:
        wait_until(healthy, 600, "lightrag-ray serve", process, log_path)
    except BaseException:  # not up, or the script is stopping: the caller never gets it to stop
        process.kill()
        process.wait()
        raise
    return process, url, log_path


def stop_serve(process: subprocess.Popen, sampler: ProcessSampler, timeout_s: float = 120.0) -> dict[str, Any]:
    """SIGINT (Ctrl-C) to the server; then wait until none of the app's processes is left (the
    serve CLI, its replicas, the graph shards, the embedding workers; Serve's controller and proxy
    stay, as on a shared cluster, until this script shuts Serve down)."""
    began = time.monotonic()
    process.send_signal(signal.SIGINT)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
        code = f"killed after {timeout_s:g} s (exit {code})"
    exited_s = round(time.monotonic() - began, 1)
    deadline = time.monotonic() + 90
    while True:
        left = {pid: role for pid, role in sampler.snapshot().items() if role in APP_ROLES}
        actors = [a["ActorClassName"] for cls in ("GraphShard", "EmbedWorker", "ServeReplica")
                  for a in live_actors(cls)]
        if not left and not actors or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    return {"exit_code": code, "exited_s": exited_s, "app_gone_s": round(time.monotonic() - began, 1),
            "app_processes_left": [f"{pid} {role}: {sampler.titles.get(pid, '')[:100]}" for pid, role in left.items()],
            "app_actors_left": actors}


def leftover_processes(marker: str, timeout_s: float = 90.0) -> list[str]:
    """After everything was stopped: the processes of the run still alive after ``timeout_s``,
    listed, then killed (e.g. a server whose start a SIGTERM cut short), so none outlives the run."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [pid for pid in marked_pids(marker) if pid != os.getpid()]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    found = []
    for pid in left:
        try:
            process = psutil.Process(pid)
            found.append(f"{pid}: {' '.join(process.cmdline())[:160]}")
            process.kill()
        except psutil.Error:
            continue
    return found


# ---- the batch run and the comparison ------------------------------------------------------------
def batch_compare(docs: list[Doc], config: Path, workdir: Path) -> dict[str, Any]:
    """Index ``docs`` in one run into a fresh workspace with the served settings (its own
    collections), then compare the graph fresh shard actors load from each workspace."""
    from lightrag_ray.service.indexing import index_paths

    folder = workdir / "batch_input"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    names = {}
    for number, doc in enumerate(docs):
        stored = f"{number:04d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', Path(doc.name).stem)}{doc.suffix}"
        (folder / stored).write_bytes(doc.data)
        names[stored] = doc.name
    batch_ws = workdir / "batch_ws"
    shutil.rmtree(batch_ws, ignore_errors=True)
    prefix = f"soak_batch_{uuid.uuid4().hex[:8]}"
    batch = load_settings(config, overrides={"workspace": str(batch_ws), "vectors": {"collection_prefix": prefix}},
                          environ={})
    served = load_settings(config, overrides={"workspace": str(workdir / "served_ws")}, environ={})
    began = time.monotonic()
    report = index_paths([str(folder)], batch, progress=None, display_names=names)
    indexed_s = round(time.monotonic() - began, 1)
    got, want = load_stored(served), load_stored(batch)
    problems, summarised = graph_differences(got, want, served.graph.summary_max_fragments)
    return {"equal": not problems, "differences": problems[:50], "difference_count": len(problems),
            "documents": len(docs), "batch_docs_new": report.docs_new, "batch_docs_failed": report.docs_failed,
            "batch_index_s": indexed_s, "entities": len(want.graph["entities"]),
            "relations": len(want.graph["relations"]), "summarised": summarised,
            "served_entities": len(got.graph["entities"]), "served_relations": len(got.graph["relations"])}


def check_documents(writer: Writer, server_rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every accepted document processed or failed with a reason; every confirmed delete gone;
    nothing on the server the run did not send. Returns the counts and problems, and the
    surviving documents (processed on the server)."""
    problems: list[str] = []
    counts: Counter[str] = Counter()
    for doc in writer.docs.values():
        row = server_rows.get(doc.doc_id)
        status = row["status"] if row else "absent"
        counts[f"{doc.state}:{status}"] += 1
        if doc.state == "accepted":
            if status == "failed" and not str(row.get("error") or "").strip():
                problems.append(f"{doc.name} ({doc.doc_id}) failed without a reason")
            elif status not in ("processed", "failed"):
                problems.append(f"{doc.name} ({doc.doc_id}) accepted but {status} at the end")
        elif doc.state == "deleted" and row is not None:
            problems.append(f"{doc.name} ({doc.doc_id}) deleted but {status} at the end")
        elif doc.state in ("attempted", "delete_attempted") and status not in ("absent", "processed") and not (
                status == "failed" and str(row.get("error") or "").strip()):
            problems.append(f"{doc.name} ({doc.doc_id}) {doc.state} and {status} at the end")
    unknown = sorted(set(server_rows) - set(writer.docs))
    problems += [f"{d} on the server but never sent" for d in unknown]
    surviving = [writer.docs[d] for d, row in server_rows.items() if row["status"] == "processed" and d in writer.docs]
    failed = {d: row.get("error") for d, row in server_rows.items() if row["status"] == "failed"}
    return {"sent": len(writer.docs), "accepted": sum(1 for d in writer.docs.values() if d.accepted_s is not None),
            "deleted": sum(1 for d in writer.docs.values() if d.state == "deleted"),
            "processed": len(surviving), "failed": len(failed), "failed_reasons": sorted(set(failed.values()))[:10],
            "states": dict(sorted(counts.items())), "problems": problems,
            "jobs": dict(Counter(writer.tracks.values())), "busy_gave_up": writer.gave_up,
            "surviving": surviving}


# ---- figures -------------------------------------------------------------------------------------
def in_window(call: Call, windows: list[Window], end_s: float) -> bool:
    """Whether the request overlaps a kill window (an open one lasts to the end)."""
    return any(call.start < (w.end_s if w.end_s is not None else end_s) and call.end > w.at_s for w in windows)


def classify(call: Call, windows: list[Window], end_s: float) -> str:
    """ok, busy (a write's documented 409), window-503 (allowed), window-failure or failure."""
    if call.ok:
        return "ok"
    if call.busy:
        return "busy"
    if in_window(call, windows, end_s):
        return "window-503" if call.status == 503 and call.retry_after and not call.error.startswith("stream") \
            else "window-failure"
    return "failure"


def route_stats(calls: list[Call], windows: list[Window], end_s: float) -> dict[str, dict[str, Any]]:
    """Per route: requests, errors by status, busy refusals, p50/p99 latency (ms) of all answers."""
    rows: dict[str, dict[str, Any]] = {}
    for route in sorted({c.route for c in calls}):
        mine = [c for c in calls if c.route == route]
        kinds = Counter(classify(c, windows, end_s) for c in mine)
        errors = Counter(str(c.status) + ("" if not c.error or c.status >= 300 else " (bad body)")
                         for c in mine if not c.ok and not c.busy)
        ms = np.array([1000 * (c.end - c.start) for c in mine]) if mine else np.array([np.nan])
        rows[route] = {"requests": len(mine), "ok": kinds["ok"], "errors": dict(errors), "busy_409": kinds["busy"],
                       "in_window_503": kinds["window-503"], "failures": kinds["failure"] + kinds["window-failure"],
                       **percentiles_ms(ms, 50, 99),
                       "modes": dict(Counter(c.mode for c in mine if c.mode))}
    return rows


def role_totals(sample: dict[int, tuple[str, int, float]]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"processes": 0, "rss_mib": 0.0})
    for role, rss, _ in sample.values():
        totals[role]["processes"] += 1
        totals[role]["rss_mib"] += rss / MIB
    return totals


def interval_rows(calls: list[Call], samples: list[tuple[float, dict]], windows: list[Window], interval: float,
                  end_s: float) -> list[dict[str, Any]]:
    """One row per interval: per route requests, errors by status, p50/p99; per role processes,
    RSS (at the interval's end) and CPU seconds used in it."""
    rows = []
    edges = list(np.arange(0.0, end_s, interval)) + [end_s]
    for start, stop in zip(edges, edges[1:]):
        mine = [c for c in calls if start <= c.end < stop or (stop == end_s and c.end >= stop)]
        before = [s for t, s in samples if t <= start] or [samples[0][1]]
        upto = [s for t, s in samples if t <= stop] or [samples[0][1]]
        first, last = before[-1], upto[-1]
        roles = role_totals(last)
        cpu: dict[str, float] = defaultdict(float)
        for pid, (role, _, seconds) in last.items():
            cpu[role] += max(0.0, seconds - (first[pid][2] if pid in first else 0.0))
        rows.append({"start_s": round(float(start), 1), "end_s": round(float(stop), 1),
                     "routes": route_stats(mine, windows, end_s),
                     "roles": {role: {"processes": int(v["processes"]), "rss_mib": round(v["rss_mib"], 1),
                                      "cpu_s": round(cpu[role], 2)} for role, v in sorted(roles.items())}})
    return rows


def rss_growth(sampler: ProcessSampler, start_s: float, end_s: float, settle_s: float) -> dict[str, Any]:
    """RSS growth of every process between ``start_s`` (or ``settle_s`` after it appeared) and
    ``end_s`` (the median of its first ``RSS_SPAN_S`` against that of its last): the largest per
    role, and the largest of the product's processes (test equipment outside: this script, the
    scripted LLM)."""
    first_seen: dict[int, float] = {}
    series: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for t, sample in sampler.samples:
        for pid, (_, rss, _) in sample.items():
            first_seen.setdefault(pid, t)
            if t <= end_s:
                series[pid].append((t, rss))
    span = min(RSS_SPAN_S, (end_s - start_s) / 8)
    per_process = []
    for pid, points in series.items():
        base = next((t for t, _ in points if t >= max(start_s, first_seen[pid] + settle_s)), None)
        if base is None or points[-1][0] < end_s - 2 * sampler.every or points[-1][0] - base < (end_s - start_s) / 4:
            continue  # not alive to the end, or over too little of the window (a job's worker, a killed process)
        first = float(np.median([r for t, r in points if base <= t <= base + span]))
        last = float(np.median([r for t, r in points if t >= points[-1][0] - span]))
        per_process.append({"pid": pid, "role": sampler.roles.get(pid, "?"), "from_s": base,
                            "from_mib": round(first / MIB, 1), "to_mib": round(last / MIB, 1),
                            "growth": round(last / first - 1, 4)})
    per_role: dict[str, dict[str, Any]] = {}
    for row in per_process:
        if row["role"] not in per_role or row["growth"] > per_role[row["role"]]["growth"]:
            per_role[row["role"]] = row
    product = [r for r in per_process if r["role"] not in HARNESS_ROLES]
    worst = max(product, key=lambda r: r["growth"], default=None)
    return {"from_s": round(start_s, 1), "to_s": round(end_s, 1), "processes": len(per_process),
            "max_growth": worst["growth"] if worst else None, "worst": worst,
            "per_role": dict(sorted(per_role.items()))}


def window_rows(windows: list[Window], calls: list[Call], end_s: float) -> list[dict[str, Any]]:
    rows = []
    for w in windows:
        mine = [c for c in calls if in_window(c, [w], end_s)]
        rows.append({**asdict(w), "window_s": w.seconds, "closed_in_time": w.seconds is not None and w.seconds <= WINDOW_LIMIT_S,
                     "requests": len(mine), "statuses": dict(Counter(str(c.status) for c in mine)),
                     "non_503_failures": sum(1 for c in mine if classify(c, [w], end_s) == "window-failure")})
    return rows


def targets(result: dict[str, Any], minutes: float) -> list[dict[str, Any]]:
    """The issue's acceptance, each with its figure and whether it is met (and enforced)."""
    calls = result["calls_summary"]
    kinds = Counter(w["kind"] for w in result["kills"])
    windows_ok = all(w["closed_in_time"] for w in result["kills"])
    docs = result["documents"]
    stop = result["stop"]
    growth = result["rss_growth"]
    long_run = minutes >= 60
    rows = [
        ("no failed request outside the kill windows", f"{calls['failure']} of {calls['total']} requests",
         calls["failure"] == 0, True),
        ("inside kill windows only 503 with Retry-After", f"{calls['window-failure']} other failures; "
         f"{calls['window-503']} 503s", calls["window-failure"] == 0, True),
        ("the three kinds of kill happened (shard, owner, embedding worker x4)",
         f"shard {kinds['graph shard']}, owner {kinds['workspace owner']}, embedding worker {kinds['embed worker']}",
         kinds["graph shard"] >= 1 and kinds["workspace owner"] >= 1 and kinds["embed worker"] >= 4, True),
        (f"service back within {WINDOW_LIMIT_S:g} s after each kill",
         "longest " + (f"{max(1e9 if w['window_s'] is None else w['window_s'] for w in result['kills']):.1f} s"
                       if result["kills"] else "n/a"),
         windows_ok and bool(result["kills"]), True),
        ("no insert job lost (accepted -> processed, or failed with a reason)",
         f"{docs['accepted']} accepted: {docs['processed']} processed, {docs['failed']} failed, {docs['deleted']} "
         f"deleted; {len(docs['problems'])} problems; jobs {docs['jobs']}",
         not docs["problems"] and result["jobs_finished"], True),
        ("RSS of every process grows < 10% over the last 40 minutes" if long_run else
         "RSS growth over the second half (informational: enforced from --minutes 60)",
         "n/a" if growth["max_growth"] is None else
         f"max {100 * growth['max_growth']:.1f}% ({growth['worst']['role']}, {growth['worst']['from_mib']} -> "
         f"{growth['worst']['to_mib']} MiB)", growth["max_growth"] is not None and growth["max_growth"] < RSS_LIMIT,
         long_run),
        ("the graph equals the batch run's", f"{result['graph'].get('difference_count', '?')} differences over "
         f"{result['graph'].get('entities', '?')} entities, {result['graph'].get('relations', '?')} relations "
         f"({result['graph'].get('summarised', '?')} summarised), {result['graph'].get('documents', '?')} documents",
         bool(result["graph"].get("equal")), True),
        ("no Ray process left after stop", f"serve exit {stop['exit_code']} in {stop['exited_s']} s; app processes "
         f"left {len(stop['app_processes_left'])}, actors {len(stop['app_actors_left'])}; processes of the run left "
         f"after shutdown {len(stop.get('leftover', []))}",
         stop["exit_code"] == 0 and not stop["app_processes_left"] and not stop["app_actors_left"]
         and not stop.get("leftover"), True),
    ]
    return [{"target": t, "figure": f, "met": bool(m), "enforced": e} for t, f, m, e in rows]


def target_table(rows: list[dict[str, Any]]) -> str:
    return markdown(["target", "figure", "met"],
                    [[r["target"], r["figure"], ("met" if r["met"] else "NOT met") + ("" if r["enforced"] else
                                                                                    " (not enforced)")] for r in rows])


def route_table(routes: dict[str, dict[str, Any]]) -> str:
    return markdown(["route", "requests", "errors by status", "409 busy", "503 in windows", "failures", "p50 ms",
                     "p99 ms"],
                    [[route, r["requests"], ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "-",
                      r["busy_409"], r["in_window_503"], r["failures"], r["p50_ms"], r["p99_ms"]]
                     for route, r in routes.items()])


def interval_table(rows: list[dict[str, Any]]) -> str:
    """One line per interval: requests, not-ok by status, the query routes' p50/p99, RSS and CPU."""
    lines = []
    for row in rows:
        routes = row["routes"].values()
        errors: Counter[str] = Counter()
        for route in routes:
            errors.update(route["errors"])
        queries = [r for name, r in row["routes"].items() if name in QUERY_ROUTES]
        lines.append([f"{row['start_s']:g}-{row['end_s']:g}", sum(r["requests"] for r in routes),
                      ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "-",
                      sum(r["busy_409"] for r in routes), max((r["p50_ms"] for r in queries), default=0),
                      max((r["p99_ms"] for r in queries), default=0),
                      round(sum(v["rss_mib"] for v in row["roles"].values())),
                      round(sum(v["cpu_s"] for v in row["roles"].values()), 1)])
    return markdown(["interval s", "requests", "not ok", "409 busy", "query p50 ms (worst route)",
                     "query p99 ms (worst route)", "RSS MiB", "CPU s"], lines)


def plot(result: dict[str, Any], sampler: ProcessSampler, path: Path) -> bool:
    """Latency p50/p99, errors and RSS per role over time, kill windows shaded."""
    plt = pyplot()
    if plt is None:
        return False
    rows = result["intervals"]
    mids = [(r["start_s"] + r["end_s"]) / 120 for r in rows]
    fig, (lat, err, mem) = plt.subplots(3, 1, figsize=(10, 11), sharex=True)
    palette = plt.get_cmap("tab20").colors
    for number, route in enumerate(QUERY_ROUTES + ("/health", "/documents/text", "/documents/upload")):
        p50 = [r["routes"].get(route, {}).get("p50_ms", np.nan) for r in rows]
        p99 = [r["routes"].get(route, {}).get("p99_ms", np.nan) for r in rows]
        lat.plot(mids, p50, marker="o", ms=3, color=palette[2 * number % 20], label=f"{route} p50")
        lat.plot(mids, p99, ls="--", color=palette[2 * number % 20], label=f"{route} p99")
    lat.set_yscale("log")
    lat.set_ylabel("latency (ms)")
    lat.legend(fontsize=6, ncol=2)
    statuses = sorted({s for r in rows for route in r["routes"].values() for s in route["errors"]})
    bottom = np.zeros(len(rows))
    width = (rows[0]["end_s"] - rows[0]["start_s"]) / 60 * 0.8 if rows else 1
    for status in statuses:
        counts = np.array([sum(route["errors"].get(status, 0) for route in r["routes"].values()) for r in rows])
        err.bar(mids, counts, width=width, bottom=bottom, label=f"status {status}")
        bottom += counts
    busy = [sum(route["busy_409"] for route in r["routes"].values()) for r in rows]
    err.plot(mids, busy, color="grey", marker=".", label="409 busy (retried)")
    err.set_ylabel("not ok per interval (by status)")
    err.legend(fontsize=7)
    series: dict[str, list[float]] = defaultdict(list)
    times = [t / 60 for t, _ in sampler.samples]
    roles = sorted({role for _, s in sampler.samples for role, _, _ in s.values()})
    for _, sample in sampler.samples:
        totals = role_totals(sample)
        for role in roles:
            series[role].append(totals[role]["rss_mib"] if role in totals else np.nan)
    for number, role in enumerate(roles):
        mem.plot(times, series[role], color=palette[number % 20], ls="-" if number < 20 else ":", label=role)
    mem.set_ylabel("RSS (MiB, sum per role)")
    mem.set_xlabel("minutes since the traffic started")
    mem.legend(fontsize=6, ncol=3)
    for ax in (lat, err, mem):
        for w in result["kills"]:
            end = w["end_s"] if w["end_s"] is not None else result["traffic_s"]
            ax.axvspan(w["at_s"] / 60, end / 60, color="red", alpha=0.15)
        ax.grid(True, alpha=0.3)
    lat.set_title(f"lightrag-ray serve soak, {result['settings']['minutes']:g} min (kill windows shaded)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---- main ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=lambda prog: argparse.RawDescriptionHelpFormatter(prog, width=110))
    parser.add_argument("--minutes", type=float, default=60.0, help="minutes of traffic (default 60)")
    parser.add_argument("--rate", type=float, default=1.0,
                        help="queries per second over the five query routes (default 1.0: on 2 cores the app, "
                        "Milvus, the LLM stand-in and this client share the machine)")
    parser.add_argument("--insert-every", type=float, default=15.0,
                        help="seconds between writer cycles: one insert each, a delete every third, graph edits "
                        "every fourth (default 15)")
    parser.add_argument("--live-docs", type=int, default=12,
                        help="delete every cycle while more documents than this are live (default 12)")
    parser.add_argument("--poll-every", type=float, default=5.0, help="seconds between WebUI polling rounds (default 5)")
    parser.add_argument("--interval", type=float, default=None,
                        help="seconds per recorded interval (default 60; 20 for runs under 10 minutes)")
    parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between process samples (default 5)")
    parser.add_argument("--llm-latency", type=float, default=0.0, help="scripted LLM seconds per request (default 0)")
    parser.add_argument("--cpus", type=int, default=4,
                        help="logical CPUs Ray offers (default 4: the app's fractional reservations, an insert "
                        "job's actors and a restarting replica fit; the machine's cores are shared anyway)")
    parser.add_argument("--seed", type=int, default=0, help="order of the documents, the query mix, the shard killed")
    parser.add_argument("--workdir", default=None, help="work folder, kept (default: a temp dir, removed at the end)")
    parser.add_argument("--json-out", default=None, help="write the figures, intervals, kills and targets as JSON here")
    parser.add_argument("--plot", default=None, help="PNG: latency p50/p99, errors and RSS per role over time")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0:
        parser.error("--minutes and --rate must be positive")
    if args.interval is None:
        args.interval = 60.0 if args.minutes >= 10 else 20.0
    return args


async def drive(url: str, args: argparse.Namespace, workspace: str, shards: int) -> dict[str, Any]:
    """Seed documents, then the traffic and the faults for ``--minutes``, then the jobs' end."""
    t0 = time.monotonic()
    traffic = Traffic(url, t0)
    source = DocumentSource(args.seed)
    writer = Writer(traffic, source, args.live_docs)
    try:
        log("seeding: one piece of the book and one sample document")
        await writer.insert([source.piece("/documents/text")])
        await writer.insert([source.sample()])
        if not await writer.wait_for_jobs(600):
            raise RuntimeError("the seed documents were not indexed within 10 minutes")
        seed_calls = len(traffic.calls)
        traffic.t0 = time.monotonic()  # the run's clock starts with the traffic: the seeding is before 0
        shift = traffic.t0 - t0
        for call in traffic.calls:
            call.start, call.end = call.start - shift, call.end - shift
        for doc in writer.docs.values():
            doc.accepted_s = None if doc.accepted_s is None else doc.accepted_s - shift
        total = args.minutes * 60
        faults = Faults(traffic, writer, workspace, shards, args.seed)
        log(f"traffic for {args.minutes:g} min: {args.rate:g} queries/s, a writer cycle every {args.insert_every:g} s")
        skipped, cycles, *_ = await asyncio.gather(
            run_queries(traffic, args.rate, total, args.seed), writer.run(args.insert_every, total),
            poll_webui(traffic, args.poll_every, total), faults.run(total), report_progress(traffic, args.interval, total))
        traffic_s = traffic.now()
        log(f"traffic over ({len(traffic.calls)} requests); removing leftover probes, waiting for the insert jobs")
        await writer.remove_probes()
        finished = await writer.wait_for_jobs(600)
        response = await traffic.send("GET", "/documents")
        rows = {row["doc_id"]: row for group in response.json()["statuses"].values() for row in group} \
            if response is not None and response.status_code == 200 else {}
        return {"traffic": traffic, "writer": writer, "faults": faults, "traffic_s": traffic_s, "skipped": skipped,
                "cycles": cycles, "jobs_finished": finished, "server_rows": rows, "seed_calls": seed_calls,
                "probes_left": sorted(writer.probes)}
    finally:
        await traffic.close()


async def report_progress(traffic: Traffic, every: float, until: float) -> None:
    """One line per interval on stderr: requests, failures, p50/p99 of the queries."""
    last = 0
    while traffic.now() < until:
        await asyncio.sleep(min(every, max(0.1, until - traffic.now())))
        mine = traffic.calls[last:]
        last = len(traffic.calls)
        ms = [1000 * (c.end - c.start) for c in mine if c.route in QUERY_ROUTES]
        bad = Counter(str(c.status) for c in mine if not c.ok and not c.busy)
        log(f"{traffic.now():.0f} s: {len(mine)} requests, not ok {dict(bad) or 0}, busy {sum(c.busy for c in mine)}; "
            f"queries p50 {np.percentile(ms, 50) if ms else 0:.0f} ms p99 {np.percentile(ms, 99) if ms else 0:.0f} ms")


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    """A SIGTERM (``kill``, a job's timeout) ends the run through its clean-up, as Ctrl-C does:
    without this the Milvus server and the scripted LLM outlived the script."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    command = command_line("soak.py", argv)
    marker = uuid.uuid4().hex
    os.environ[MARKER_ENV] = marker  # before Ray, Milvus and the subprocesses start: they all inherit it
    workdir = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="soak_"))
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    milvus = MilvusStandalone(workdir / "milvus")
    llm: subprocess.Popen | None = None
    serve_process: subprocess.Popen | None = None
    sampler: ProcessSampler | None = None
    ray_temp: Path | None = None
    result: dict[str, Any] = {"command": command, "settings": {**vars(args)}, "marker": marker}
    stop: dict[str, Any] = {"exit_code": None, "exited_s": None, "app_processes_left": [], "app_actors_left": []}
    try:
        log(f"work folder {workdir}; starting the scripted LLM, Milvus and Ray")
        llm, llm_url = start_llm(workdir, marker, args.llm_latency)
        milvus.base_dir.mkdir(parents=True)
        milvus_thread = threading.Thread(target=milvus.start, name="milvus-start")
        milvus_thread.start()
        address, ray_temp = start_soak_ray(args.cpus)
        signal.signal(signal.SIGTERM, _stop_on_sigterm)  # again: ray.init puts its own in (a crash report, then abort)
        milvus_thread.join()
        if milvus.process is None:
            raise RuntimeError("the Milvus server did not start (see its logs in the work folder)")
        config = workdir / "soak_settings.yaml"
        settings = soak_settings(llm_url, milvus.uri, "soak_served")
        config.write_text(yaml.safe_dump(settings), encoding="utf-8")
        result["settings"]["served"] = settings
        labels = {os.getpid(): "soak script", llm.pid: "scripted LLM", milvus.process.pid: "milvus server"}
        sampler = ProcessSampler(marker, labels, args.sample_every, time.monotonic()).start()
        log("starting lightrag-ray serve")
        serve_process, url, serve_log = start_serve(workdir, marker, config, address)
        sampler.labels[serve_process.pid] = "serve CLI"
        workspace = httpx.get(url + "/health", timeout=30).json()["workspace"]
        log(f"serving on {url}")
        driven = asyncio.run(drive(url, args, workspace, settings["graph"]["num_shards"]))
        traffic, writer, faults = driven["traffic"], driven["writer"], driven["faults"]
        docs = check_documents(writer, driven["server_rows"])
        log(f"documents: {docs['accepted']} accepted, {docs['processed']} processed, {docs['failed']} failed, "
            f"{docs['deleted']} deleted; problems: {docs['problems'][:5] or 'none'}")
        log("stopping the server (SIGINT)")
        stop = stop_serve(serve_process, sampler)
        sampler.stop()
        shift = traffic.t0 - sampler.t0  # the samples' clock from now on: the traffic's
        sampler.samples = [(round(t - shift, 2), s) for t, s in sampler.samples]
        log(f"server stopped: exit {stop['exit_code']} after {stop['exited_s']} s; app processes left "
            f"{stop['app_processes_left'] or 'none'}")
        log(f"batch run of the {len(docs['surviving'])} surviving documents, then the graph comparison")
        try:
            graph = batch_compare(docs["surviving"], config, workdir)
        except Exception as error:  # noqa: BLE001 - reported as a target not met
            graph = {"equal": False, "error": f"{type(error).__name__}: {error}", "differences": []}
        log(f"graphs {'EQUAL' if graph.get('equal') else 'DIFFERENT'}: {graph.get('difference_count', graph.get('error'))}")
        end_s = driven["traffic_s"]
        calls = [c for c in traffic.calls if c.end >= 0]  # the seed phase's requests are outside the figures
        result.update({
            "machine": {"machine": machine(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
                        "load_avg": [round(x, 2) for x in os.getloadavg()], "ray": ray.__version__,
                        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")},
            "traffic_s": round(end_s, 1), "seed_requests": driven["seed_calls"], "writer_cycles": driven["cycles"], "query_ticks_skipped": driven["skipped"],
            "jobs_finished": driven["jobs_finished"], "probes_left": driven["probes_left"],
            "calls_summary": {"total": len(calls), **Counter(classify(c, faults.windows, end_s) for c in calls)},
            "routes": route_stats(calls, faults.windows, end_s),
            "intervals": interval_rows(calls, sampler.samples, faults.windows, args.interval, end_s),
            "kills": window_rows(faults.windows, calls, end_s),
            "failures": [asdict(c) for c in calls if classify(c, faults.windows, end_s) in ("failure", "window-failure")][:100],
            "documents": {k: v for k, v in docs.items() if k != "surviving"},
            "graph": graph,
            "rss_growth": rss_growth(sampler, max(0.0, end_s - RSS_WINDOW_S) if args.minutes >= 60 else end_s / 2,
                                     end_s, settle_s=min(60.0, end_s / 10)),
            "serve_log_tail": serve_log.read_text(errors="replace")[-3000:],
        })
        for key in ("ok", "busy", "window-503", "window-failure", "failure"):
            result["calls_summary"].setdefault(key, 0)
    finally:
        if serve_process is not None and serve_process.poll() is None:
            serve_process.kill()
        if sampler is not None:
            sampler.stop()
        if ray.is_initialized():
            from ray import serve

            try:
                serve.shutdown()
            except Exception:  # noqa: BLE001 - Ray is stopped next anyway
                pass
            stop_ray()
        milvus.stop()
        if llm is not None:
            llm.terminate()
            llm.wait(timeout=30)
        stop["leftover"] = leftover_processes(marker)
        if ray_temp is not None:
            shutil.rmtree(ray_temp, ignore_errors=True)
    result["stop"] = stop
    log(f"after shutdown: processes of the run left: {stop['leftover'] or 'none'}")
    result["targets"] = targets(result, args.minutes)
    result["passed"] = all(t["met"] for t in result["targets"] if t["enforced"])

    print(f"\n## Soak: {args.minutes:g} min, {args.rate:g} queries/s, a writer cycle every {args.insert_every:g} s\n")
    print(route_table(result["routes"]))
    print("\nKills:\n")
    print(markdown(["kind", "target", "at s", "window s", "requests in window", "statuses"],
                   [[k["kind"], k["target"], round(k["at_s"], 1), k["window_s"], k["requests"],
                     ", ".join(f"{s}: {n}" for s, n in k["statuses"].items()) or "-"] for k in result["kills"]]))
    print("\nIntervals (all routes; RSS and CPU of every process of the run):\n")
    print(interval_table(result["intervals"]))
    growth = result["rss_growth"]
    print(f"\nRSS growth from {growth['from_s']} s to {growth['to_s']} s, largest per role:\n")
    print(markdown(["role", "pid", "from MiB", "to MiB", "growth %"],
                   [[role, r["pid"], r["from_mib"], r["to_mib"], round(100 * r["growth"], 1)]
                    for role, r in growth["per_role"].items()]))
    if result["failures"]:
        print("\nFailed requests (first 10):")
        for failure in result["failures"][:10]:
            print(f"  {failure['start']:.1f} s {failure['route']} {failure['status']}: {failure['error'][:200]}")
    if result["graph"].get("differences"):
        print("\nGraph differences (first 10):")
        for problem in result["graph"]["differences"][:10]:
            print(f"  {problem[:300]}")
    print("\n## Targets\n")
    print(target_table(result["targets"]))
    print(f"\n{'PASSED' if result['passed'] else 'FAILED'}; machine: {result.get('machine', {}).get('machine')}; "
          f"command: {command}")
    write_json(args.json_out, result)
    if args.plot and sampler is not None and "intervals" in result and plot(result, sampler, Path(args.plot)):
        print(f"plot: {args.plot}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
