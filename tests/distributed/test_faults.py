"""Faults: a rank that never joins makes the others raise after the group's timeout (worker_timeout.py), naming
it under mpirun (worker_watchdog.py), and a rank that dies makes them raise at once, naming it
(worker_dead_rank.py; under mpirun through MPI's fault tolerance, which munet-run turns on). With the agreement check on (``DETAIL``) the wait
that fails is the check's, with it off (``OFF``) the all_reduce's own, on its synchronous path."""

import subprocess
import time

import pytest

from tests.distributed.launch import HERE, ROOT, mpi_environment, needs_mpi, run_ranks, run_separately


# DETAIL: the wait that times out is the agreement check's; OFF: the all_reduce's own (the synchronous path's)
@pytest.mark.parametrize("debug", ["DETAIL", "OFF"])
@pytest.mark.parametrize("launch", [pytest.param(run_ranks, marks=needs_mpi, id="mpirun"), run_separately])
def test_missing_peer_times_out_instead_of_hanging(launch, debug, monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", debug)
    launch("worker_timeout.py", 2, "timeout ok", timeout=120)


@pytest.mark.parametrize("nprocs,debug", [(2, "DETAIL"), (3, "DETAIL"), (2, "OFF")])
def test_dead_rank_fails_the_others_naming_it(nprocs, debug, monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", debug)
    run_separately("worker_dead_rank.py", nprocs, "dead rank ok", timeout=120)


@needs_mpi
@pytest.mark.parametrize("nprocs,debug", [(2, "DETAIL"), (3, "DETAIL"), (2, "OFF")])
def test_dead_rank_fails_the_others_naming_it_under_mpirun(nprocs, debug, monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", debug)
    result = _mpirun("worker_dead_rank.py", nprocs, timeout=120)
    output = result.stdout + result.stderr
    for rank in range(nprocs):
        assert f"rank {rank}: dead rank ok" in result.stdout, output
    assert result.returncode == 1, output  # the survivors end after rank 1 died: the job failed
    assert "munet-run: rank 1 of this job died" in output, output


@needs_mpi
@pytest.mark.parametrize("debug", ["DETAIL", "OFF"])
def test_a_timed_out_collective_names_the_rank_that_did_not_arrive(debug, monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", debug)
    run_ranks("worker_watchdog.py", 3, "census ok", timeout=120)


def _mpirun(script: str, nprocs: int, timeout: float) -> subprocess.CompletedProcess:
    from munet.distributed.run import mpirun_command

    command = mpirun_command(nprocs, [str(HERE / script)], oversubscribe=nprocs > 2, fault_tolerant=True)
    return subprocess.run(command, env=mpi_environment(), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@needs_mpi
def test_a_rank_that_raises_ends_the_job_at_once_with_its_status():
    start = time.monotonic()
    result = _mpirun("worker_rank_raises.py", 3, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "ValueError: rank 1 raises on purpose" in output, output
    assert time.monotonic() - start < 60, "the others waited for their timeout (300 s) instead of being stopped"


@needs_mpi
def test_a_job_whose_rank_was_killed_fails_naming_it():
    result = _mpirun("worker_rank_killed.py", 3, timeout=120)
    output = result.stdout + result.stderr
    assert "rank 0: finished its work" in result.stdout and "rank 2: finished its work" in result.stdout, output
    assert result.returncode != 0, output
    assert "munet-run: rank 1 of this job died" in output, output
