"""A real Milvus server for tests and benchmarks: the standalone binary of the PyPI package
``milvus`` (2.3.5), started in a given directory on free ports.

    with MilvusStandalone(tmp_dir) as server:
        MilvusStore(server.uri, 384)

The binaries (~250 MB unpacked) are unpacked once into a cache folder shared by every run.
Each server gets its own ports, the embedded etcd's included (it would otherwise take
2379/2380), so several servers can run on one machine at once. Its config holds
``STEADY_WRITE_SETTINGS``, which keep its memory bounded under hours of small writes.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.net_helpers import ServerProcess

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lightrag-ray"

# Milvus's defaults suit bulk loads. Under a steady trickle of small writes (a served
# workspace: an insert, delete or edit every few seconds) they let the server's memory grow for
# hours: rocksmq keeps every message in a RocksDB memtable (up to 64 MB) until its compaction,
# daily by default, flushes it; and a growing segment, which holds every row written to it
# (replaced and deleted ones too, until a compaction after sealing drops them), is sealed only
# at ~118 MB, after 10 idle minutes, or at its 32nd binlog, and the datanode writes a binlog
# every 10 minutes. With these settings the memtable is flushed every 2 minutes and a segment
# that keeps taking writes is sealed after about 8 (docs/benchmarks.md, "Soak").
STEADY_WRITE_SETTINGS: dict[str, Any] = {
    "rocksmq": {"compactionInterval": 120},  # s; default 86400
    "dataNode": {"segment": {"syncPeriod": 60}},  # s between binlogs of a segment with new rows; default 600
    "dataCoord": {"segment": {"maxBinlogFileNumber": 8}},  # binlogs that seal a segment; default 32
}


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that nothing listens on right now."""
    probes = [socket.socket() for _ in range(n)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _binaries() -> Path:
    """The folder holding the unpacked ``milvus`` executable and its libraries."""
    import milvus

    folder = CACHE / f"milvus-{milvus.__version__}"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:  # one unpacking at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        milvus._initialize_data_files(str(folder))  # no-op when the checksums match
    return folder / "bin"


def override(config: dict[str, Any], settings: dict[str, Any], where: str = "") -> None:
    """Set ``settings`` (nested like the config) in ``config``; a key the config lacks raises,
    so a renamed setting in another Milvus version fails loudly instead of doing nothing."""
    for key, value in settings.items():
        if key not in config:
            raise KeyError(f"Milvus config has no setting {where}{key}")
        if isinstance(value, dict):
            override(config[key], value, f"{where}{key}.")
        else:
            config[key] = value


def _tail(path: Path, chars: int = 2500) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no file)"


class MilvusStandalone(ServerProcess):
    """A Milvus standalone server under ``base_dir`` (config, data, logs) on free ports of
    127.0.0.1, its config changed by ``settings`` (nested like milvus.yaml); ``start`` waits at
    most ``start_timeout_s`` for it to report healthy."""

    def __init__(self, base_dir: str | Path, start_timeout_s: float = 120.0,
                 settings: dict[str, Any] = STEADY_WRITE_SETTINGS) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.start_timeout_s = start_timeout_s
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.metrics_port = 0  # Prometheus /metrics, /healthz and Go's /debug/pprof

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the server and wait until it is healthy; returns its URI."""
        from milvus import MilvusServerConfig

        config = MilvusServerConfig(data_dir=str(self.base_dir))
        keys = [key for key in config.configurable_items if key.endswith("_port")]
        *ports, self.metrics_port, peer = _free_ports(len(keys) + 2)
        config.update(**dict(zip(keys, ports)))
        config.resolve()  # writes configs/milvus.yaml and creates data/ and logs/
        milvus_yaml = self.base_dir / "configs" / "milvus.yaml"
        settings = yaml.safe_load(milvus_yaml.read_text())
        override(settings, self.settings)
        milvus_yaml.write_text(yaml.safe_dump(settings, sort_keys=False))
        self.port, client = config.get("proxy_port"), config.get("etcd_port")
        etcd = self.base_dir / "configs" / "etcd.yaml"
        etcd.write_text(
            f"name: standalone\nlisten-client-urls: http://127.0.0.1:{client}\n"
            f"advertise-client-urls: http://127.0.0.1:{client}\nlisten-peer-urls: http://127.0.0.1:{peer}\n"
            f"initial-advertise-peer-urls: http://127.0.0.1:{peer}\ninitial-cluster: standalone=http://127.0.0.1:{peer}\n")
        bin_dir = _binaries()
        env = {**os.environ, "DEPLOY_MODE": "STANDALONE", "METRICS_PORT": str(self.metrics_port), "ETCD_CONFIG_PATH": str(etcd),
               "QUERYNODE_GRACEFULSTOPTIMEOUT": "0",
               "LD_LIBRARY_PATH": f"{bin_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        logs = self.base_dir / "logs"
        with (logs / "milvus-stdout.log").open("wb") as out, (logs / "milvus-stderr.log").open("wb") as err:
            self.process = subprocess.Popen([str(bin_dir / "milvus"), "run", "standalone"], cwd=self.base_dir,
                                            env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        deadline = time.monotonic() + self.start_timeout_s
        while not self._healthy(self.metrics_port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                code = self.process.poll()
                self.stop(timeout_s=5)
                state = f"exited with code {code}" if code is not None else f"not healthy after {self.start_timeout_s:g} s"
                raise RuntimeError(
                    f"Milvus standalone in {self.base_dir} {state} (port {self.port}).\n"
                    f"--- tail of logs/milvus-stdout.log:\n{_tail(logs / 'milvus-stdout.log')}\n"
                    f"--- tail of logs/milvus-stderr.log:\n{_tail(logs / 'milvus-stderr.log')}")
            time.sleep(0.25)
        return self.uri

    @staticmethod
    def _healthy(metrics_port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/healthz", timeout=2) as response:
                return b"OK" in response.read()
        except OSError:
            return False
