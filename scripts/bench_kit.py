"""What the benchmarks and the soak share: the repository on the import path, a local Ray
cluster started one way, the machine's description for their tables, markdown tables and
matplotlib plots. Every script under scripts/ takes these from here."""

from __future__ import annotations

import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT / "scripts"), str(ROOT)):  # tests/ (scripted servers) and the other scripts
    if _path not in sys.path:
        sys.path.insert(0, _path)


def start_ray(cpus: int | None = None, *, address: str | None = "local", namespace: str | None = None,
              temp_dir: Path | None = None, object_store_mb: int | None = None) -> str:
    """``ray.init`` as every benchmark wants it (no dashboard, warnings only, no Ray Data progress
    bars): a new local cluster of ``cpus`` CPUs, or the one at ``address``; returns its GCS address."""
    import ray

    options: dict[str, Any] = {"namespace": namespace, "include_dashboard": False, "logging_level": logging.WARNING}
    if address == "local" or address is None:
        options.update(num_cpus=cpus)
        if temp_dir is not None:
            options["_temp_dir"] = str(temp_dir)
        if object_store_mb is not None:
            options["object_store_memory"] = object_store_mb * 1024 * 1024
    ray.init(address=address, **options)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray.get_runtime_context().gcs_address


def stop_ray() -> None:
    import ray

    ray.shutdown()


def machine() -> str:
    """This machine for a table's caption: cores, CPU model, kernel."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def markdown(headers: list[str], rows: list[list[Any]]) -> str:
    """A markdown table; columns of numbers right-aligned."""
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "".join("---:|" if n else "---|" for n in numeric)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None (with a note) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    return plt


def save_plot(fig: Any, ax: Any, path: Path, title: str, grid_axis: str = "both") -> None:
    """Title, grid and legend on ``ax``; write ``fig`` to ``path`` and close it."""
    ax.set_title(title)
    ax.grid(True, axis=grid_axis, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
