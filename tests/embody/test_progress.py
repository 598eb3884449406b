import io

from embody.progress import Progress


def test_progress_line_has_rate_eta_and_metrics():
    out = io.StringIO()
    p = Progress(1000, label="train", stream=out, every=0)
    p.update(500, ret=12.5)
    line = out.getvalue()
    assert "50.0%" in line and "steps/s" in line and "<" in line and "ret 12.5" in line


def test_a_time_budget_that_ends_first_sets_the_eta():
    out = io.StringIO()
    p = Progress(10**9, label="train", stream=out, every=0, max_time_s=120)
    p.start -= 30  # 30 s in, far from the step total
    p.update(1000)
    assert "] 25.0% " in out.getvalue() and "< 01:29 |" in out.getvalue()


def test_a_resumed_count_does_not_inflate_the_rate():
    out = io.StringIO()
    p = Progress(2000, label="train", stream=out, every=0)
    p.update(1000)  # resumed at 1000
    p.start -= 10
    p.update(1100)
    assert "| 10 steps/s |" in out.getvalue().splitlines()[-1]


def test_a_count_past_the_total_shows_no_time_left():
    out = io.StringIO()
    p = Progress(1000, label="train", stream=out, every=0)
    p.update(0)
    p.start -= 10
    p.update(1024)  # the last vector step overshoots
    assert "100.0% 1,024/1,000" in out.getvalue() and "< 00:00 |" in out.getvalue()
