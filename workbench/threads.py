"""How many CPU threads torch uses: chosen deliberately, because oversubscription is costly.

torch starts one intra-op thread per core. On a small machine where another process keeps a
core busy (a second notebook, the runner, another user), those threads wait for each other at
every operation: the example trainer ran 6x slower on 2 cores with one core busy. The workbench
therefore uses half the cores (at least one) unless told otherwise; the notebook runner
passes the same number to each kernel through ``OMP_NUM_THREADS`` and runs as many kernels
at once as the cores hold (``workbench.runs.default_jobs``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or ``taskset`` narrows),
    at least 1; ``os.cpu_count()`` where the platform has no affinity."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def default_threads() -> int:
    """``OMP_NUM_THREADS`` when set (the runner sets it for its kernels), else half the cores, at least 1."""
    configured = os.environ.get("OMP_NUM_THREADS", "")
    if configured.isdigit() and int(configured) >= 1:
        return int(configured)
    return max(1, usable_cores() // 2)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[int]:
    """Inside the block torch uses ``threads`` intra-op threads (None: :func:`default_threads`);
    the previous setting is restored after. Yields the number in use."""
    import torch

    wanted = default_threads() if threads is None else threads
    if wanted < 1:
        raise ValueError(f"threads: must be an int >= 1 or None, got {threads!r}")
    previous = torch.get_num_threads()
    torch.set_num_threads(wanted)
    try:
        yield wanted
    finally:
        torch.set_num_threads(previous)


def kernel_environment(threads: int) -> dict[str, str]:
    """Environment variables that give a notebook kernel ``threads`` CPU threads (and no tokenizer fork warnings)."""
    return {**dict.fromkeys(THREAD_VARIABLES, str(threads)), "TOKENIZERS_PARALLELISM": "false"}
