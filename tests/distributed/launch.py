"""Start a worker script of this folder on N ranks and check every rank passed.

``run_ranks`` starts them under the venv's mpirun (through munet-run); ``run_separately`` starts
N independent ``python`` processes with torchrun's variables (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), so they meet through a TCPStore and talk over
MuNet's TCP transport.
"""

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

needs_mpi = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (pip install munet[dist])"
)
_ENV = {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def expect_raises(kind, words, fn):
    """For worker scripts: ``fn()`` raises ``kind`` with every one of ``words`` in its message."""
    try:
        fn()
    except kind as error:
        for word in words:
            if word not in str(error):
                raise AssertionError(f"error {error!r} does not mention {word!r}") from error
        return
    raise AssertionError(f"expected {kind.__name__} mentioning {words}")


def _check(command: str, returncode: int, stdout: str, output: str, nprocs: int, done: str) -> str:
    assert returncode == 0, f"{command} failed:\n{output[-6000:]}"
    for rank in range(nprocs):
        assert f"rank {rank}: {done}" in stdout, output[-6000:]
    return output


def mpi_environment() -> dict:
    """The environment worker scripts run in under mpirun: this checkout on the path, one BLAS thread."""
    return dict(os.environ, **_ENV)


def run_ranks(script: str, nprocs: int, done: str, timeout: float = 240) -> str:
    """Run ``script`` on ``nprocs`` ranks; assert each printed ``rank r: {done}``; return the output."""
    from munet.distributed.run import mpirun_command

    command = mpirun_command(nprocs, [str(HERE / script)], oversubscribe=nprocs > 2)
    result = subprocess.run(command, env=mpi_environment(), capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return _check(" ".join(command), result.returncode, result.stdout, result.stdout + result.stderr, nprocs, done)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_separately(script: str, nprocs: int, extra_env=None, output=None) -> list[subprocess.Popen]:
    """Start ``nprocs`` ranks of ``script`` as torchrun would, without mpirun; rank r writes to ``output[r]``
    (open files; pipes could fill up and stall a rank while its peers wait for it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env.update(_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nprocs))
    env.update(LOCAL_WORLD_SIZE=str(nprocs), **(extra_env or {}))
    return [
        subprocess.Popen(
            [sys.executable, str(HERE / script)],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=output[rank] if output else None,
            stderr=subprocess.STDOUT if output else None,
            text=True,
            cwd=ROOT,
        )
        for rank in range(nprocs)
    ]


def run_separately(script: str, nprocs: int, done: str, timeout: float = 240, extra_env=None) -> str:
    """``run_ranks`` without mpirun: independent processes joined through MASTER_ADDR/MASTER_PORT."""
    files = [tempfile.TemporaryFile("w+") for _ in range(nprocs)]
    processes = start_separately(script, nprocs, extra_env, files)
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            process.wait(max(deadline - time.monotonic(), 1))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = []
    for file in files:
        file.seek(0)
        outputs.append(file.read())
        file.close()
    text = "".join(f"--- rank {r} (exit {p.returncode})\n{out}" for r, (p, out) in enumerate(zip(processes, outputs)))
    worst = next((p.returncode for p in processes if p.returncode), 0)
    return _check(f"{nprocs} separate ranks of {script}", worst, "".join(outputs), text, nprocs, done)
