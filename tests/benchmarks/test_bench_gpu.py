"""``scripts/gpu_check.sh --tiny``: the GPU check end to end on JAX's CPU backend, as the GPU machine runs it (wheels
aside: here embody[mjx] is installed). Structure and counts only, no timing asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.mjx
def test_gpu_check_tiny_writes_one_json_of_what_ran(tmp_path):
    pytest.importorskip("mujoco.mjx", reason="needs the mjx extra")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(
        [str(ROOT / "scripts" / "gpu_check.sh"), "--tiny", str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["conformance"]["passed"] == result["conformance"]["tests"] == 3
    bench = result["bench_gpu"]
    assert bench["physics"]["mjx"]["device"].startswith("cpu")
    assert bench["physics"]["mjx"]["host_copy_ms"] > 0 and bench["physics"]["mujoco"]["env_steps_per_s"] > 0
    assert all(0 < bench["env"][sim]["sim_share"] <= 1 for sim in ("mjx", "mujoco"))
    assert bench["train"]["env_steps"] >= 32  # one PPO iteration of 8 steps × 4 envs
    almi, dva = result["plugins"]["almi"], result["plugins"]["dva"]  # ALMI offers a GPU check, D.VA does not
    assert almi["exit_code"] == 0 and set(almi["env"]) == {"almi-lower", "almi-upper"} and almi["train"]["env_steps"]
    assert dva.startswith("not run: no benchmark 'dva-gpu'")
    assert "| physics, MJX |" in done.stdout
