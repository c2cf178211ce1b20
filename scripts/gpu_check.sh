#!/usr/bin/env bash
# MuNet's GPU backends on a machine with a GPU: for each backend asked for (default: vulkan cuda),
# its tests, the op parity suite where it has one, and its benchmark.
#
#   scripts/gpu_check.sh OUTDIR [vulkan] [cuda]
#
# Exits non-zero when a backend's setup fails, when it finds no GPU, or when a test fails (the
# benchmark still runs then); each backend is checked even when another one failed.
#
# vulkan: the tests and benchmarks/vulkan.py on the GPU's Vulkan adapter (chosen by adapter type,
# never a CPU driver such as lavapipe). Writes OUTDIR/machine.txt, OUTDIR/vulkan_tests.log,
# OUTDIR/vulkan_bench.md and OUTDIR/vulkan_bench.json.
#
# cuda: the tests marked cuda (anywhere under tests/, munet.rtc's included, with MUNET_TEST_CUDA=1 so that a
# missing GPU fails instead of skipping; tests/backends/test_cuda_gpu_transfers.py checks pinned memory,
# non_blocking copies, nonzero/unique and fused integer chains), the op parity suite on cuda:0 (pytest tests/ops
# --munet-device=cuda: an op without a cuda kernel skips, saying so) and benchmarks/cuda_bench.py.
# Writes OUTDIR/cuda_machine.txt, OUTDIR/cuda_tests.log, OUTDIR/cuda_parity.log,
# OUTDIR/cuda_bench.log, OUTDIR/cuda_bench.json and OUTDIR/cuda.md (the page docs/perf/cuda.md
# holds: copy it there). CuPy comes from the machine's python when it imports; else CUPY_PACKAGE
# (default: cupy-cuda12x or cupy-cuda13x, by the driver's CUDA version) and cuda-pathfinder go to
# /tmp/gpu_check_site, from WHEELS when it exists (with any nvidia_*.whl there), else from the
# package index. CuPy finds cuBLAS, cuSOLVER, cuFFT, NVRTC and the CUDA runtime in the nvidia-* wheels
# a CUDA build of torch brings, or in the system's CUDA toolkit; else bring them as wheels too:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .whl \
#       cupy-cuda12x cuda-pathfinder nvidia-cublas-cu12 nvidia-cusolver-cu12 nvidia-cufft-cu12 \
#       nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12
#
# Setup, from the checkout, without a project venv: the machine's python3 (PYTHON=...) with
# numpy, torch and pytest; munet is used from the checkout (PYTHONPATH), not installed, and
# not with pip install -e '.[test,vulkan]': the test extra pins a CPU build of torch that
# would replace the machine's CUDA one. The vulkan extra (wgpu and what it needs beyond
# numpy) goes to /tmp/gpu_check_site when missing: from WHEELS (a folder of wheels, default
# ./.whl) when it exists, else from the package index, which fails fast without internet.
# Prepare the wheels on a machine with internet (--python-version: the GPU machine's python3):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl wgpu cffi pycparser rendercanvas
# Debian packages of the Vulkan loader may be given in GL_DEBS (default ./.gl); they are
# unpacked when libvulkan is missing. BENCH_ARGS adds arguments to benchmarks/vulkan.py
# (CUDA_BENCH_ARGS to benchmarks/cuda_bench.py); ADAPTER_TYPES (an awk regex, default 'GPU$') says
# which adapter types count: a dry run on a machine without a GPU takes ADAPTER_TYPES=CPU
# BENCH_ARGS='--max-size 256'.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [vulkan] [cuda]" >&2
    exit 2
fi
OUT=$1
shift
BACKENDS=("$@")
[ ${#BACKENDS[@]} -gt 0 ] || BACKENDS=(vulkan cuda)
for backend in "${BACKENDS[@]}"; do
    case "$backend" in
    vulkan | cuda) ;;
    *) echo "usage: $0 OUTDIR [vulkan] [cuda] (got '$backend')" >&2 && exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
GL_DEBS=${GL_DEBS:-.gl}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

fail() {
    echo "gpu_check: $*" >&2
    exit 1
}

# 1. Python packages -------------------------------------------------------------------------
for module in numpy torch pytest; do
    "$PY" -c "import $module" 2>/dev/null || fail "$PY cannot import $module (needed by the tests); install it first"
done
# The vulkan backend -----------------------------------------------------------------------
check_vulkan() {
    VULKAN_PACKAGES=(wgpu cffi pycparser rendercanvas)
    if ! "$PY" -c "import wgpu" 2>/dev/null; then
        PIP=("$PY" -m pip install -q --no-deps --upgrade --target /tmp/gpu_check_site)
        if [ -d "$WHEELS" ]; then
            echo "gpu_check: wgpu missing; installing ${VULKAN_PACKAGES[*]} from the wheels in $WHEELS"
            "${PIP[@]}" --no-index --find-links "$WHEELS" "${VULKAN_PACKAGES[@]}" ||
                fail "pip could not install ${VULKAN_PACKAGES[*]} from $WHEELS (a wheel missing or for another python?)"
        else
            echo "gpu_check: wgpu missing; installing ${VULKAN_PACKAGES[*]} from the package index"
            "${PIP[@]}" --timeout 15 --retries 0 "${VULKAN_PACKAGES[@]}" ||
                fail "pip could not reach the package index (no internet?). Download the wheels on a machine \
with internet into $WHEELS (see the header of $0), bring them here and run again"
        fi
        export PYTHONPATH="$PYTHONPATH:/tmp/gpu_check_site"
        "$PY" -c "import wgpu" || fail "wgpu still cannot be imported (see the error above)"
    fi

    # 2. The Vulkan loader and the GPU's driver ----------------------------------------------------
    if ! ldconfig -p | grep -q libvulkan; then
        if compgen -G "$GL_DEBS/*.deb" >/dev/null; then
            [ "$(id -u)" = 0 ] || fail "libvulkan is missing and unpacking $GL_DEBS/*.deb needs root"
            echo "gpu_check: libvulkan missing; unpacking $GL_DEBS/*.deb"
            for deb in "$GL_DEBS"/*.deb; do dpkg -x "$deb" /; done
            ldconfig
        else
            fail "the Vulkan loader (libvulkan.so.1) is missing: apt-get install libvulkan1, or put its .deb in $GL_DEBS"
        fi
    fi
    NVIDIA_ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && [ -f "$NVIDIA_ICD" ] &&
        ! compgen -G "/usr/share/vulkan/icd.d/nvidia*.json" >/dev/null &&
        ! compgen -G "/etc/vulkan/icd.d/nvidia*.json" >/dev/null; then
        export VK_DRIVER_FILES=$NVIDIA_ICD # the container's NVIDIA driver, outside the loader's search path
    fi

    # The first adapter whose type is a GPU; CPU drivers (lavapipe, SwiftShader) never count.
    ADAPTERS=$("$PY" - <<'EOF'
from munet.backends.vulkan import adapters

for i, adapter in enumerate(adapters.adapters_for("vulkan")):
    info = adapter.info
    print(f"{i}\t{info.get('adapter_type', '?')}\t{info.get('device', '?')}\t{info.get('description', '')}")
EOF
    )
    echo "gpu_check: Vulkan adapters:"
    echo "${ADAPTERS:-  (none)}"
    INDEX=$(awk -F'\t' -v types="${ADAPTER_TYPES:-GPU\$}" '$2 ~ types { print $1; exit }' <<<"$ADAPTERS")
    [ -n "$INDEX" ] || fail "no GPU Vulkan adapter (only: ${ADAPTERS:-none}); is the GPU's Vulkan ICD installed? \
(VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset})"
    DEVICE="vulkan:$INDEX"
    echo "gpu_check: testing $DEVICE"

    {
        date -u
        uname -a
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true
        echo "device under test: $DEVICE"
        echo "$ADAPTERS"
        "$PY" -c "import numpy, torch, wgpu; print('numpy', numpy.__version__, 'torch', torch.__version__, 'wgpu', wgpu.__version__)"
    } >"$OUT/machine.txt"

    # 3. Tests, then the benchmark -----------------------------------------------------------------
    local status=0
    MUNET_TEST_VULKAN=1 MUNET_TEST_VULKAN_DEVICE=$DEVICE "$PY" -m pytest tests/backends -q -p no:cacheprovider \
        -o addopts="" -rfs "${XDIST[@]}" 2>&1 | tee "$OUT/vulkan_tests.log" || status=1
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
    "$PY" benchmarks/vulkan.py --device "$DEVICE" --json "$OUT/vulkan_bench.json" ${BENCH_ARGS:-} 2>&1 |
        tee "$OUT/vulkan_bench.md" ||
        status=1
    return "$status"
}

# 4. CUDA --------------------------------------------------------------------------------------
check_cuda() {
    if ! "$PY" -c "import cupy" 2>/dev/null; then
        local cuda_major package
        cuda_major=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\).*/\1/p' | head -1)
        package=${CUPY_PACKAGE:-cupy-cuda$([ "${cuda_major:-12}" -ge 13 ] && echo 13 || echo 12)x}
        local pip=("$PY" -m pip install -q --no-deps --upgrade --target /tmp/gpu_check_site)
        if [ -d "$WHEELS" ]; then
            echo "gpu_check: cupy missing; installing $package and cuda-pathfinder from the wheels in $WHEELS"
            "${pip[@]}" --no-index --find-links "$WHEELS" "$package" cuda-pathfinder ||
                fail "pip could not install $package from $WHEELS (see the header of $0 for the wheels)"
            for extra in "$WHEELS"/nvidia_*.whl; do
                if [ -e "$extra" ]; then "${pip[@]}" --no-index "$extra"; fi
            done
        else
            echo "gpu_check: cupy missing; installing $package and cuda-pathfinder from the package index"
            "${pip[@]}" --timeout 15 --retries 0 "$package" cuda-pathfinder ||
                fail "pip could not reach the package index (no internet?). Download the wheels named in the \
header of $0 into $WHEELS and run again"
        fi
        export PYTHONPATH="$PYTHONPATH:/tmp/gpu_check_site"
    fi
    "$PY" - <<'EOF' || fail "no CUDA device MuNet can use (the reason is above)"
import munet
from munet.backends.cuda import discovery

if not munet.cuda.is_available():
    raise SystemExit(f"gpu_check: {discovery.explain_unavailable(0)}")
for i in range(munet.cuda.device_count()):
    print(f"gpu_check: cuda:{i} {munet.cuda.get_device_name(i)} capability {munet.cuda.get_device_capability(i)}")
EOF
    {
        date -u
        uname -a
        nvidia-smi 2>/dev/null || true
        "$PY" -c "import numpy, torch, cupy; print('numpy', numpy.__version__, 'torch', torch.__version__, \
'torch.cuda', torch.version.cuda, 'cupy', cupy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion())"
    } >"$OUT/cuda_machine.txt"
    local status=0
    # every test marked cuda (backend, renderer, munet.rtc, CUDA graphs and the compiled plans replayed as
    # graphs: test_cuda_gpu_graphs.py), and the device surface's own tests
    MUNET_TEST_CUDA=1 "$PY" -m pytest tests -m cuda tests/backends/test_cuda_device.py \
        -q -p no:cacheprovider -o addopts="" -rfs 2>&1 | tee "$OUT/cuda_tests.log" || status=1
    "$PY" -m pytest tests/ops --munet-device=cuda -q -p no:cacheprovider -o addopts="" -rf "${XDIST[@]}" 2>&1 |
        tee "$OUT/cuda_parity.log" || status=1
    # shellcheck disable=SC2086 # CUDA_BENCH_ARGS is a list of arguments
    "$PY" benchmarks/cuda_bench.py --device cuda:0 --markdown "$OUT/cuda.md" --json "$OUT/cuda_bench.json" \
        ${CUDA_BENCH_ARGS:-} 2>&1 | tee "$OUT/cuda_bench.log" || status=1
    return "$status"
}

XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 4)
status=0
for backend in "${BACKENDS[@]}"; do
    echo "gpu_check: === $backend ==="
    ("check_$backend") || {
        status=1
        echo "gpu_check: $backend FAILED" >&2
    }
done
[ "$status" = 0 ] && echo "gpu_check: passed; figures in $OUT" || echo "gpu_check: FAILED; see $OUT" >&2
exit "$status"
