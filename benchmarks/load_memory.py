"""Peak resident memory of ``munet.load`` on a 768 MiB state dict, default read and ``mmap=True``.

    OPENBLAS_NUM_THREADS=1 python benchmarks/load_memory.py [--dir /tmp]

A subprocess saves three float32 tensors of 256 MiB; fresh subprocesses of this small parent
load the file and print ``ru_maxrss`` after import and after the load plus a sum over every
tensor (which touches all mapped pages). Linux keeps the high-water mark across fork and exec,
so the parent itself never allocates much.
"""

import argparse
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

_LOAD = """
import resource, sys, time
import munet
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
tensors = munet.load(sys.argv[1], mmap=sys.argv[2] == "1")
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
        for mmap in ("0", "1"):
            out = subprocess.run([sys.executable, "-c", _LOAD, path, mmap], check=True, capture_output=True, text=True)
            print(f"mmap={mmap == '1'}: {out.stdout.strip()}")


if __name__ == "__main__":
    main()
