#!/usr/bin/env bash
# The GPU check, one command: scripts/gpu_check.sh [--tiny] [OUT]   (OUT: gpu-check; writes OUT/gpu_check.json)
#
# For the GPU machine (JAX with CUDA and PyTorch preinstalled, no network): what else embody needs is installed from
# build/gpu-wheels (made beforehand by scripts/gpu_wheels.sh, carried beside the code). Then, on the MJX path:
#   1. the simulator conformance suite (tests/sims/test_conformance.py -k mjx)
#   2. embody bench gpu: physics and env rates against MuJoCo on the CPU, host-copy cost, PPO on h1_2-velocity with
#      GPU_ENVS envs (default 4096) for GPU_BUDGET seconds (default 240)
#   3. the D.VA and ALMI GPU checks, where the plugin offers one (benchmarks "dva-gpu", "almi-gpu"; today ALMI's)
# and merges everything into one JSON. --tiny sizes it for a CPU (CI runs it end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
tiny=""
out=gpu-check
for a in "$@"; do case $a in --tiny) tiny=--tiny ;; *) out=$a ;; esac; done
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
mkdir -p "$out"
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$PWD/build/jax-cache}
export MUJOCO_GL=${MUJOCO_GL:-egl}

if ! "$py" -c "import embody.sims.mjx, mujoco.mjx, pytest" 2>/dev/null; then
  [ -d build/gpu-wheels ] || { echo "gpu check: embody[mjx] is not installed and build/gpu-wheels is missing" >&2; exit 2; }
  "$py" -m pip install -q --no-index --find-links build/gpu-wheels --no-build-isolation -e ".[mjx]" pytest
fi
"$py" -c "import jax; print('gpu check: JAX', jax.__version__, 'on', jax.devices())"

if [ -n "$tiny" ]; then select="mjx and (determinism or exact_state or free_fall)"; else select=mjx; fi
start=$(date +%s)
"$py" -m pytest -q -p no:cacheprovider tests/sims/test_conformance.py -m "mjx" -k "$select" \
  --junitxml "$out/conformance.xml" >"$out/conformance.log" 2>&1 && status=0 || status=$?
conformance_s=$(($(date +%s) - start))
tail -3 "$out/conformance.log"

bench=(--envs "${GPU_ENVS:-4096}" --budget "${GPU_BUDGET:-240}")
[ -n "$tiny" ] && bench=(--tiny)
"$py" -m embody.cli bench gpu "${bench[@]}" --out "$out/bench"

"$py" - "$out" "$status" "$conformance_s" $tiny <<'PY'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path

from embody import plugins
from embody.benchmarks import BENCHMARKS, run_benchmark

out, status, seconds, tiny = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
suite = next(ET.parse(out / "conformance.xml").getroot().iter("testsuite"))
count = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
count["passed"] = count["tests"] - count["failures"] - count["errors"] - count["skipped"]
plugins.load()  # plugins register their benchmarks
plugins = {}
for method in ("dva", "almi"):  # a plugin offers its GPU check as the benchmark "<method>-gpu"
    name = f"{method}-gpu"
    if name in BENCHMARKS:
        code = run_benchmark(name, [*tiny, "--out", str(out / name)])
        plugins[method] = {"exit_code": code, **json.loads((out / name / "results.json").read_text())}
    else:
        plugins[method] = f"not run: no benchmark {name!r} (its method has no GPU path yet)"
result = {
    "conformance": {**count, "exit_code": status, "seconds": seconds},
    "bench_gpu": json.loads((out / "bench" / "results.json").read_text()),
    "plugins": plugins,
}
(out / "gpu_check.json").write_text(json.dumps(result, indent=2))
print(f"gpu check: {out / 'gpu_check.json'}; conformance {count['passed']} of {count['tests']} passed")
sys.exit(1 if status else 0)
PY
