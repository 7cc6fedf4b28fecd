"""A real S3 server on 127.0.0.1 for tests and benchmarks: moto's standalone server (PyPI
``moto[server]``, the ``moto_server`` command). pyarrow's S3 filesystem reaches it through
``AWS_ENDPOINT_URL`` (``env()``); buckets are made with ``bucket``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.fs as pafs

from tests.net_helpers import free_port

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class S3Server:
    """``moto_server`` in a subprocess on ``port`` (default: a free one); its log in ``folder``."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder = folder
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        """The variables a process (a driver, a Ray worker) needs to reach this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.url}

    def start(self, timeout_s: float = 60) -> "S3Server":
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(self.port)]
        with (self.folder / "moto.log").open("w") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start: {(self.folder / 'moto.log').read_text()[-2000:]}")
                time.sleep(0.2)

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(endpoint_override=self.url, scheme="http", access_key="testing",
                                 secret_key="testing", region="us-east-1", allow_bucket_creation=True)

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if missing); returns its URI."""
        self.filesystem().create_dir(name)
        return f"s3://{name}"

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Copy ``folder``'s files to ``s3://bucket/prefix/...``; returns that URI."""
        fs = self.filesystem()
        self.bucket(bucket)
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            with fs.open_output_stream(f"{bucket}/{prefix}/{path.relative_to(folder).as_posix()}") as out:
                out.write(path.read_bytes())
        return f"s3://{bucket}/{prefix}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()


def delete_prefix(server: S3Server, uri: str) -> None:
    """Remove every object under ``s3://bucket/prefix``."""
    fs = server.filesystem()
    inner = uri.removeprefix("s3://")
    if fs.get_file_info(inner).type != pafs.FileType.NotFound:
        fs.delete_dir(inner)
