#!/usr/bin/env bash
# The wheels the GPU check needs on a machine without network (scripts/gpu_check.sh): embody's dependencies and the
# mjx extra, less what that machine has preinstalled (PyTorch, JAX with CUDA, NumPy, SciPy, NVIDIA's libraries),
# into build/gpu-wheels; at most 64 MiB in all. GPU_PYTHON=3.X picks the target's Python (default: this one's).
# Usage: scripts/gpu_wheels.sh, then carry build/gpu-wheels beside the code.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu-wheels
py=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
target=()
[ -n "${GPU_PYTHON:-}" ] && target=(--python-version "$GPU_PYTHON" --only-binary=:all:)
rm -rf "$dir" && mkdir -p "$dir"
# the requirements of embody[mjx] (from pyproject.toml) and pytest, resolved here
reqs=$("$py" - <<'PY'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["mjx"] + ["pytest>=8"]))
PY
)
mapfile -t reqs <<<"$reqs"
"$py" -m pip download -q -d "$dir" "${target[@]}" "${reqs[@]}"
# preinstalled there: PyTorch, JAX and what they depend on; PyAV only writes videos, which the check skips
there=(torch jax jaxlib numpy scipy triton sympy networkx mpmath filelock fsspec jinja2 markupsafe setuptools
       typing_extensions ml_dtypes opt_einsum cuda_bindings cuda_pathfinder cuda_toolkit av)
for w in "${there[@]}"; do rm -f "$dir/$w"-*.whl; done
rm -f "$dir"/nvidia_*.whl
size=$(du -cm "$dir"/*.whl | tail -1 | cut -f1)
echo "gpu wheels: $(ls "$dir" | wc -l) files, ${size} MiB in $dir"
[ "$size" -le 64 ] || { echo "gpu wheels: ${size} MiB is over the 64 MiB the GPU machine accepts" >&2; exit 1; }
