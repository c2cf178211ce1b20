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
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

needs_mpi = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (pip install munet[dist])"
)
_ENV = {"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _check(command: str, returncode: int, stdout: str, output: str, nprocs: int, done: str) -> str:
    assert returncode == 0, f"{command} failed:\n{output[-6000:]}"
    for rank in range(nprocs):
        assert f"rank {rank}: {done}" in stdout, output[-6000:]
    return output


def run_ranks(script: str, nprocs: int, done: str, timeout: float = 240) -> str:
    """Run ``script`` on ``nprocs`` ranks; assert each printed ``rank r: {done}``; return the output."""
    from munet.distributed.run import mpirun_command

    env = dict(os.environ, **_ENV)
    command = mpirun_command(nprocs, [str(HERE / script)], oversubscribe=nprocs > 2)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return _check(" ".join(command), result.returncode, result.stdout, result.stdout + result.stderr, nprocs, done)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_separately(script: str, nprocs: int, extra_env=None) -> list[subprocess.Popen]:
    """Start ``nprocs`` ranks of ``script`` as torchrun would, without mpirun."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env.update(_ENV, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nprocs))
    env.update(LOCAL_WORLD_SIZE=str(nprocs), **(extra_env or {}))
    return [
        subprocess.Popen(
            [sys.executable, str(HERE / script)],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for rank in range(nprocs)
    ]


def run_separately(script: str, nprocs: int, done: str, timeout: float = 240, extra_env=None) -> str:
    """``run_ranks`` without mpirun: independent processes joined through MASTER_ADDR/MASTER_PORT."""
    processes = start_separately(script, nprocs, extra_env)
    stdout, output, worst = "", "", 0
    try:
        for rank, process in enumerate(processes):
            out, err = process.communicate(timeout=timeout)
            stdout += out
            output += f"--- rank {rank} (exit {process.returncode})\n{out}{err}"
            worst = worst or process.returncode
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    return _check(f"{nprocs} separate ranks of {script}", worst, stdout, output, nprocs, done)
