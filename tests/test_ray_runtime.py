"""Workers at chosen niceness: query-serving actors ahead of background work."""

from __future__ import annotations

import os
import threading

import pytest
import ray

from lightrag_ray.ray_runtime import lower_thread_priority, niceness_options


def test_lowering_a_thread_leaves_the_others_alone():
    before = os.getpriority(os.PRIO_PROCESS, 0)
    seen: list[int] = []

    def job() -> None:
        lower_thread_priority(before + 5)
        inner = threading.Thread(target=lambda: seen.append(os.getpriority(os.PRIO_PROCESS, 0)))
        inner.start()
        inner.join()  # a thread started by the lowered thread inherits its niceness
        seen.append(os.getpriority(os.PRIO_PROCESS, 0))
        lower_thread_priority(before)  # never back up: that needs privileges
        seen.append(os.getpriority(os.PRIO_PROCESS, 0))

    worker = threading.Thread(target=job)
    worker.start()
    worker.join()
    assert seen == [min(19, before + 5)] * 3
    assert os.getpriority(os.PRIO_PROCESS, 0) == before


def test_no_options_keep_rays_default():
    assert niceness_options(None) == {}


def _niceness() -> int:
    return os.nice(0)


@pytest.mark.integration
def test_tasks_and_data_stages_start_at_the_niceness_asked(ray_cluster):
    task = ray.remote(num_cpus=0.1)(_niceness)
    assert ray.get(task.remote()) == 15  # Ray's own default for workers
    assert ray.get(task.options(**niceness_options(0)).remote()) == 0
    assert ray.get(task.options(**niceness_options(10)).remote()) == 10

    @ray.remote(num_cpus=0.1)
    def parent() -> list[int]:  # what a serving replica at 0 starts inherits 0, unless told
        return ray.get([task.remote(), task.options(**niceness_options(10)).remote()])

    assert ray.get(parent.options(**niceness_options(0)).remote()) == [0, 10]
    rows = ray.data.range(4, override_num_blocks=2).map(
        lambda row: {"nice": os.nice(0)}, num_cpus=0.1, **niceness_options(10)).take_all()
    assert {row["nice"] for row in rows} == {10}
