"""Faults: a rank that never joins makes the others raise after the group's timeout (worker_timeout.py), naming
it under mpirun (worker_watchdog.py), and a rank that dies makes them raise at once, naming it
(worker_dead_rank.py; under mpirun, mpirun ends the job). With the agreement check on (``DETAIL``) the wait
that fails is the check's, with it off (``OFF``) the all_reduce's own, on its synchronous path."""

import pytest

from tests.distributed.launch import needs_mpi, run_ranks, run_separately


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
@pytest.mark.parametrize("debug", ["DETAIL", "OFF"])
def test_a_timed_out_collective_names_the_rank_that_did_not_arrive(debug, monkeypatch):
    monkeypatch.setenv("MUNET_DISTRIBUTED_DEBUG", debug)
    run_ranks("worker_watchdog.py", 3, "census ok", timeout=120)
