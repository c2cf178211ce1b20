"""Peak resident memory of ``munet.load`` on a 768 MiB state dict, default read and ``mmap=True``,
beside ``torch.load`` of the same tensors saved with ``torch.save`` (the peer, when torch is installed).

    python benchmarks/load_memory.py [--dir /tmp]

A subprocess saves three float32 tensors of 256 MiB; fresh subprocesses of this small parent
load the file and print ``ru_maxrss`` after import and after the load plus a sum over every
tensor (which touches all mapped pages). Linux keeps the high-water mark across fork and exec,
so the parent itself never allocates much. Loading is single-threaded in both libraries (the
sums are memory-bound), so the figures do not depend on the thread count.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

_SAVE = """
import sys
import munet
munet.manual_seed(0)
munet.save({f"w{i}": munet.randn(64 * 1024 * 1024) for i in range(3)}, sys.argv[1])
"""

_TORCH_SAVE = """
import sys
import munet, torch
tensors = munet.load(sys.argv[1])
torch.save({name: torch.from_numpy(t.numpy()) for name, t in tensors.items()}, sys.argv[2])
"""

_LOAD = """
import resource, sys, time
import {library} as lib
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
tensors = lib.load(sys.argv[1], mmap=sys.argv[2] == "1")
total = sum(float(t.sum().item()) for t in tensors.values())
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"after import {base / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, load and sum {seconds:.1f} s")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=None, help="where to write the 768 MiB file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = os.path.join(tmp, "big.munet")
        subprocess.run([sys.executable, "-c", _SAVE, path], check=True)
        print(f"file: {os.path.getsize(path) / 2**20:.0f} MiB")
        files = {"munet": path}
        if importlib.util.find_spec("torch") is not None:
            files["torch"] = os.path.join(tmp, "big.pt")
            subprocess.run([sys.executable, "-c", _TORCH_SAVE, path, files["torch"]], check=True)
        for library, file in files.items():
            for mmap in ("0", "1"):
                code = _LOAD.replace("{library}", library)
                out = subprocess.run(
                    [sys.executable, "-c", code, file, mmap], check=True, capture_output=True, text=True
                )
                print(f"{library}.load mmap={mmap == '1'}: {out.stdout.strip()}")


if __name__ == "__main__":
    main()
