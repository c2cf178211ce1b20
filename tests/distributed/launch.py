"""Start a worker script of this folder under the venv's mpirun (through munet-run) and check every rank passed."""

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

needs_mpi = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (pip install munet[dist])"
)


def run_ranks(script: str, nprocs: int, done: str, timeout: float = 240) -> str:
    """Run ``script`` on ``nprocs`` ranks; assert each printed ``rank r: {done}``; return the output."""
    from munet.distributed.run import mpirun_command

    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    command = mpirun_command(nprocs, [str(HERE / script)], oversubscribe=nprocs > 2)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{output[-6000:]}"
    for rank in range(nprocs):
        assert f"rank {rank}: {done}" in result.stdout, output[-6000:]
    return output
