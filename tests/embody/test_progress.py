import io

from embody.progress import Progress


def test_progress_line_has_rate_eta_and_metrics():
    out = io.StringIO()
    p = Progress(1000, label="train", stream=out, every=0)
    p.update(500, ret=12.5)
    line = out.getvalue()
    assert "50.0%" in line and "steps/s" in line and "<" in line and "ret 12.5" in line
