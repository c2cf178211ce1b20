"""init_process_group without mpirun through each init_method and through store= (worker_init_methods.py)."""

import pytest

from tests.distributed.launch import free_port, run_separately


@pytest.mark.parametrize("scheme", ["tcp", "file"])
def test_init_methods_join_separate_processes(scheme, tmp_path):
    url = f"tcp://127.0.0.1:{free_port()}" if scheme == "tcp" else f"file://{tmp_path / 'rendezvous'}"
    run_separately("worker_init_methods.py", 2, "init methods ok", extra_env={"MUNET_TEST_INIT": url})
