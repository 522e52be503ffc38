#!/usr/bin/env bash
# The GPU checks of issue 8, for a lent GPU machine (the `device` tool; CI has no GPU).
#
#   bash .ci/gpu_checks.sh OUT [PHASES]      PHASES: comma list of env,tests,triton,bench (default all)
#
# Runs with the machine's own python3 (cupy, triton, torch, numpy, sympy, pytest there); wheels
# of packages it lacks (bytecode) are installed from .whl/ into /tmp/site when present (carry
# .whl: see /work/.library/device/README.md for downloading them), and ember's C extension is
# built for that Python when no build of it travelled. Put every phase in one device call (a
# new machine costs a start), e.g.
#   bash .ci/gpu_checks.sh $OUT env,tests,triton; BENCH_ARGS="--reps 10 --no-warm" bash .ci/gpu_checks.sh $OUT bench
# Every
# phase has its own time limit and writes its log under OUT, so a phase that fails or runs long
# costs only itself:
#   env     versions, the GPU, a cuda tensor, a compiled function
#   tests   tests/cuda_device/test_real_gpu.py (op sweep on cupy, benchmark models compiled vs eager,
#           no torch import, streams) and the stand-in tests of tests/cuda_device
#   triton  the Triton lowering tests with their kernels launched on the GPU
#           (EMBER_TRITON_TEST_DEVICE=cuda) instead of the interpreter
#   bench   benchmarks/suite.py --device cuda (ember eager on cupy, ember compiled to Triton,
#           torch eager, torch.compile); BENCH_ARGS adds options
set -u
OUT=${1:?usage: gpu_checks.sh OUT [PHASES]}
PHASES=${2:-env,tests,triton,bench}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > /tmp/gpu_checks_pip.log 2>&1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
# dynamo's frame hook and guard checks are C extensions built per Python version: build them if absent
if ! $PY -c "import ember._C._eval_frame, ember._C._guards" >/dev/null 2>&1; then
  $PY setup.py -q build_ext --inplace > /tmp/gpu_checks_build.log 2>&1 || { echo "building ember._C failed:"; tail -20 /tmp/gpu_checks_build.log; }
fi
has() { [[ ",$PHASES," == *",$1,"* ]]; }
N=${WORKERS:-$(( $(nproc) > 12 ? 12 : $(nproc) ))}

if has env; then
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c "import sys, numpy, cupy, triton; print(sys.version); print('numpy', numpy.__version__, 'cupy', cupy.__version__, 'triton', triton.__version__)"
    g++ --version | head -1
    timeout 300 $PY - <<'EOF'
import sys, time
import ember, ember.nn as nn
print("cuda available:", ember.cuda.is_available(), ember.cuda.get_device_name(), ember.cuda.get_device_capability())
x = ember.randn(4, 5, device="cuda")
print((x @ x.T).softmax(-1).sum(-1))
m = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64)).cuda()
t0 = time.perf_counter()
c = ember.compile(m)
y = c(ember.randn(8, 64, device="cuda"))
ember.cuda.synchronize()
print("compiled forward ok in %.2f s" % (time.perf_counter() - t0), y.shape, y.device, "torch imported:", "torch" in sys.modules)
# where ember's eager time goes on the GPU: the benchmark MLP's inference step, profiled
import cProfile, pstats
sys.path.insert(0, "benchmarks")
from models import build
case = build("mlp", ember, 1.0, "cuda")
xb = case.make_input()
def step():
    with ember.no_grad():
        case.model(xb)
    ember.cuda.synchronize()
for _ in range(3):
    step()
t0 = time.perf_counter()
for _ in range(10):
    step()
print("eager mlp inference step: %.2f ms" % ((time.perf_counter() - t0) * 100))
pr = cProfile.Profile()
pr.enable()
for _ in range(10):
    step()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
EOF
  } > "$OUT/env.log" 2>&1
  echo "env: rc=$?"; tail -5 "$OUT/env.log"
fi

if has tests; then
  timeout ${TESTS_TIMEOUT:-300} $PY -m pytest -p no:cacheprovider -q -n $N tests/cuda_device/test_real_gpu.py \
    -rfE ${TESTS_ARGS:-} > "$OUT/tests_gpu.log" 2>&1
  echo "tests (real GPU): rc=$?"; grep -E "passed|failed" "$OUT/tests_gpu.log" | tail -1
  timeout 200 $PY -m pytest -p no:cacheprovider -q -n $N tests/cuda_device -rfE \
    --ignore=tests/cuda_device/test_real_gpu.py > "$OUT/tests_standin.log" 2>&1
  echo "tests (stand-in): rc=$?"; grep -E "passed|failed" "$OUT/tests_standin.log" | tail -1
fi

if has triton; then
  EMBER_TRITON_TEST_DEVICE=cuda timeout ${TRITON_TIMEOUT:-240} $PY -m pytest -p no:cacheprovider -q -n $N -rfE \
    ${TRITON_TESTS:-tests/inductor/test_triton_pointwise.py tests/inductor/test_triton_reductions.py \
    tests/inductor/test_triton_scans.py} > "$OUT/tests_triton_gpu.log" 2>&1
  echo "triton tests on the GPU: rc=$?"; grep -E "passed|failed" "$OUT/tests_triton_gpu.log" | tail -1
fi

if has bench; then
  timeout ${BENCH_TIMEOUT:-600} $PY benchmarks/suite.py --device cuda --out "$OUT/bench" --timeout 240 \
    ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
  rc=$?
  [ -f "$OUT/bench/suite.json" ] && rm -f "$OUT/bench/suite.partial.json"
  echo "bench: rc=$rc"; tail -40 "$OUT/bench.log"
fi
