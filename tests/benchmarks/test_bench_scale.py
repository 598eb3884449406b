"""``embody bench scale --quick``: single-process and Ray-worker rows end to end (structure only, no timing asserted)."""

import json

import pytest


@pytest.mark.slow
def test_bench_scale_quick_times_single_and_worker_rows(tmp_path, capsys):
    pytest.importorskip("ray", reason="needs the scale extra")
    from embody.benchmarks import run_benchmark

    assert run_benchmark("scale", ["--quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())
    rows = result["workloads"]["mujoco"]["rows"]
    assert list(rows) == ["single", "1 workers", "2 workers"] and rows["single"]["vs_single"] == 1.0
    assert all(r["env_steps_per_s"] > 0 for r in rows.values())
    assert "ray_overhead_s_per_iteration" in rows["2 workers"] and "ray_overhead_s_per_iteration" not in rows["single"]
    assert "| mujoco (h1_2-velocity) | 16 | 2 workers |" in capsys.readouterr().out
    import ray

    assert not ray.is_initialized()  # the bench stops the Ray instance it started
