"""What the arm-backend test modules share: which vendor libraries are installed, the connect deadline,
and a per-test cache folder (FrankaArm's default spec writes a scene file there)."""

import pytest

from embody.extras import available

HAS_UR = available("rtde_receive") and available("rtde_control")
HAS_FRANKA = available("pylibfranka")
needs_ur = pytest.mark.skipif(not HAS_UR, reason="the 'ur' extra (ur-rtde) is not installed")
needs_franka = pytest.mark.skipif(not HAS_FRANKA, reason="the 'franka' extra (pylibfranka) is not installed")
TIMEOUT = 0.5  # s: every connect deadline in the arm tests


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBODY_CACHE_DIR", str(tmp_path))
