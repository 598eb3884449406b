"""PRIMT (papers/primt): strict parsing of judges' replies; order-swapped repeats turning a position-biased judge
into "unsure"; every endpoint failure counted as unsure, never a crash; the information-limited text stand-in
deciding from the prompt's numbers alone; the fusion rules; ``embody primt train`` end to end on loopback."""

import json
import socket
import time

import numpy as np
import pytest

from embody.chat import ChatClient, LoopbackChatServer
from embody.papers.primt.briefs import BRIEFS, evaluate
from embody.papers.primt.fusion import FusionWeights, fuse
from embody.papers.primt.judges import TextJudge, Verdicts, parse_answer
from embody.papers.primt.standins import text_standin

BRIEF = BRIEFS["cartpole-swingup"]


@pytest.mark.parametrize(
    "reply, answer",
    [
        ('{"better": 2}', 2),
        ('  {"better": 1}\n', 1),
        ('```json\n{"better": 0}\n```', 0),
        ('{"better": 3}', None),
        ('{"better": true}', None),
        ('{"better": "1"}', None),
        ('{"better": 1, "why": "it swings"}', None),
        ("Segment 1 is better.", None),
        ('{"better": 1', None),
        ('Sure! {"better": 1}', None),
    ],
)
def test_replies_are_parsed_strictly(reply, answer):
    assert parse_answer(reply) == answer


def cartpole_pairs(k=2, length=20, better_second=True) -> dict[str, np.ndarray]:
    """Pairs whose second segment keeps the pole higher (pole_cos near 1) when ``better_second``."""
    obs = np.zeros((k, 2, length, 5), np.float32)
    obs[:, 0, :, 1], obs[:, 1, :, 1] = (-0.5, 0.9) if better_second else (0.9, -0.5)
    return {"obs": obs, "actions": np.zeros((k, 2, length, 1)), "rewards": np.zeros((k, 2, length))}


def test_the_order_swap_makes_a_position_biased_judge_unsure_and_the_stand_in_reads_only_the_prompt():
    with LoopbackChatServer(respond=lambda body: '{"better": 1}') as biased:
        judge = TextJudge(ChatClient(biased.url, "m"), BRIEF, repeats=4)
        v = judge.judge(cartpole_pairs())
        assert v.p_second.tolist() == [0.5, 0.5] and v.labels().tolist() == [0.5, 0.5]
        assert judge.stats.first == judge.stats.decisive == 8  # the bias, visible in the counters
        prompt = biased.requests[0]["body"]["messages"][0]["content"]
    assert "Goal: maximize pole_cos" in prompt and "reward" not in prompt.lower()
    with LoopbackChatServer(respond=text_standin) as standin:
        judge = TextJudge(ChatClient(standin.url, "m"), BRIEF, repeats=3)
        assert judge.judge(cartpole_pairs()).labels().tolist() == [1, 1]
        assert judge.judge(cartpole_pairs(better_second=False)).labels().tolist() == [0, 0]
    assert judge.stats.as_dict() == {
        "asked": 12,
        "decisive": 12,
        "first": 6,
        "unsure": 0,
        "unparseable": 0,
        "errors": 0,
    }


def test_every_endpoint_failure_is_an_unsure_answer_counted_and_never_a_crash():
    with LoopbackChatServer() as server:
        server.say("too late", delay_s=5)  # a timeout
        server.fail(500, b'{"error": "overloaded"}')
        server.say("The second one, clearly.")  # prose
        server.fail(200, b"{not json")  # a malformed body
        server.say('{"better": 2}')
        server.say('{"better": 0}')
        judge = TextJudge(ChatClient(server.url, "m", timeout_s=0.3), BRIEF, repeats=6)
        v = judge.judge(cartpole_pairs(k=1))
    # timeout, HTTP 500 and the malformed body are errors, the prose unparseable; the one decisive answer (the
    # fifth asking, order as given) names the second segment
    assert v.p_second.tolist() == [1.0] and judge.stats.as_dict() == {
        "asked": 6,
        "decisive": 1,
        "first": 0,
        "unsure": 1,
        "unparseable": 1,
        "errors": 3,
    }
    with socket.socket() as s:  # a port nobody listens on: refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    refused = TextJudge(ChatClient(f"http://127.0.0.1:{port}/v1", "m", timeout_s=0.5), BRIEF, repeats=2)
    assert np.isnan(refused.judge(cartpole_pairs(k=1)).p_second).all() and refused.stats.errors == 2


def test_fusion_follows_agreement_then_the_larger_evidence_and_else_stays_unsure():
    text = Verdicts(np.array([1.0, 1.0, 1.0, np.nan, 0.5]), np.array([1.0, 1 / 3, 1.0, 0.0, 0.0]))
    visual = Verdicts(np.array([1.0, 0.0, 0.0, 1.0, 0.5]), np.array([1.0, 1.0, 1.0, 1 / 3, 0.0]))
    labels = fuse(text, visual, FusionWeights())
    # agree → second; disagree, visual surer → first; disagree, equally sure → unsure; only the visual judge,
    # at a third of its votes' margin → its side; neither → unsure
    assert labels.tolist() == [1, 0, 0.5, 1, 0.5]
    assert fuse(text, visual, FusionWeights(prior=2.0))[3] == 0.5  # a stronger prior holds the weak verdict back


def test_goal_expressions_and_bad_ones():
    s = {"tip_x": np.array([0.0]), "tip_y": np.array([0.0]), "tip_z": np.array([0.0]), "a": np.array([-2.0])}
    s |= {"target_x": np.array([3.0]), "target_y": np.array([4.0]), "target_z": np.array([0.0])}
    assert evaluate("distance(tip, target)", s).tolist() == [5.0] and evaluate("abs(a)", s).tolist() == [2.0]
    with pytest.raises(ValueError, match="cannot evaluate goal expression 'speed'"):
        evaluate("speed", s)


def test_primt_train_learns_from_the_stand_in_on_loopback(tmp_path, capsys):
    from embody.cli import main
    from embody.papers.primt.study import for_scale

    out = tmp_path / "run"
    sets = for_scale("tiny").sets  # the tiny study's small run
    argv = ["primt", "train", "cartpole-swingup", "--envs", "4", "--steps", "800", "--repeats", "2", "--out", str(out)]
    assert main(argv + [x for s in sets for x in ("--set", s)]) == 0
    judges = json.loads((out / "judges.json").read_text())
    assert judges["llm_url"] == "stand-in" and judges["text"]["asked"] == 2 * 8 * 2  # sessions at 400 and 600
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["feedback"] == 16 and 0 <= rows[-1]["label_agreement"] <= 1
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--steps", "1000"]) == 2  # the judge is not the core's to resume
    assert "unknown preference.teacher 'text'" in capsys.readouterr().err


def test_the_tiny_study_writes_its_report_and_resumes(tmp_path, capsys):
    from embody.cli import main
    from embody.papers.primt.study import ARMS

    out = tmp_path / "study"
    assert main(["primt", "study", "--scale", "tiny", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    arms = {(e["arm"], e["budget"]) for e in result["table"]}
    assert arms == {("true", 0), *((a, 16) for a in ARMS[1:])} and ARMS[0] == "true"
    text = next(e for e in result["table"] if e["arm"] == "text")
    assert text["judges"]["text"]["asked"] == 2 * 16 and text["feedback"] == 16
    foresight = next(e for e in result["table"] if e["arm"] == "fused+foresight+hindsight")
    assert foresight["judges"]["foresight"]["trajectories"] == 200
    scripted = next(e for e in result["table"] if e["arm"] == "scripted+foresight")  # no judge asked for a plan
    assert scripted["judges"] == {"foresight": {"trajectories": 200, "asked": 0, "parsed": 0, "fallback": 0}}
    assert scripted["label_agreement"] == 1.0 and scripted["foresight_queries"] > 0
    assert "| foresight 0 / 0 / 0 |" in (out / "report.md").read_text()  # plans asked / parsed / fallback
    assert (out / "return_vs_budget.png").stat().st_size > 0 and "| cartpole-swingup | text | 16 |" in (
        out / "report.md"
    ).read_text()
    capsys.readouterr()
    assert main(["primt", "study", "--scale", "tiny", "--out", str(out)]) == 0
    assert "resuming: 8 of 8 jobs" in capsys.readouterr().err
    more = ["--set", "arms=[scripted]", "--set", "budgets=[16,8]"]  # they choose jobs: the folder takes another
    assert main(["primt", "study", "--scale", "tiny", "--out", str(out), *more]) == 0
    assert (
        "resuming: 1 of 2 jobs" in capsys.readouterr().err
        and (out / "jobs" / "seed0-cartpole-swingup-scripted-b8.json").exists()
    )


def test_keyframes_keep_the_ends_held_poses_and_change_points():
    from embody.papers.primt.frames import change_points, keyframes

    t = np.linspace(0, 1, 40)
    x = np.where(t < 0.5, 0.0, 1.0)[:, None] + 0.01 * np.sin(40 * t)[:, None]  # a step at 20
    assert 20 in change_points(x, 1)
    k = keyframes(np.hstack([x, np.cos(6 * t)[:, None]]), 6)
    assert len(k) == 6 and k[0] == 0 and k[-1] == 39 and (np.diff(k) > 0).all()
    assert keyframes(np.zeros((4, 2)), 6).tolist() == [0, 1, 2, 3]


def test_the_visual_judge_sends_rendered_keyframes_and_the_stand_in_reads_only_pixels():
    from embody.papers.primt.frames import decode_data_url, png_data_url
    from embody.papers.primt.judges import VisualJudge
    from embody.papers.primt.standins import visual_standin

    image = np.zeros((8, 8, 3), np.uint8)
    image[2:4, 2:4] = (255, 128, 0)
    assert (decode_data_url(png_data_url(image)) == image).all()
    obs = np.zeros((2, 2, 12, 5), np.float32)
    obs[:, 0, :, 1] = -1.0  # hanging
    obs[:, 1, :, 1], obs[:, 1, :, 2] = np.cos(0.3), np.sin(0.3)  # near upright
    obs[1] = obs[1, ::-1]  # the second pair: the upright segment first
    pairs = {"obs": obs, "actions": np.zeros((2, 2, 12, 1)), "rewards": np.zeros((2, 2, 12))}
    with LoopbackChatServer(respond=visual_standin) as server:
        judge = VisualJudge(ChatClient(server.url, "m"), BRIEF, repeats=2, keyframes=4, size=96)
        assert judge.judge(pairs).labels().tolist() == [1, 0]
        parts = server.requests[0]["body"]["messages"][0]["content"]
    judge.renderer.close()
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 8 and decode_data_url(images[0]["image_url"]["url"]).shape == (96, 96, 3)
    text = " ".join(p["text"] for p in parts if p["type"] == "text")
    assert (
        "Colours: red = RGB (230, 26, 26); blue = RGB (26, 51, 230)" in text and "pole_cos: " not in text
    )  # no numbers
    assert visual_standin({"messages": [{"role": "user", "content": "Which is better?"}]}).startswith("I cannot")


@pytest.mark.parametrize("task", sorted(BRIEFS))
def test_every_brief_names_real_channels_and_draws_its_scene(task):
    from embody.papers.primt.frames import SceneRenderer
    from embody.papers.primt.judges import VisualJudge
    from embody.runs import build_env
    from embody.train import resolve_config

    brief = BRIEFS[task]
    env = build_env(resolve_config(task), n_envs=1)
    obs = env.reset()[0]
    assert max(brief.channels.values()) < obs.shape[1]
    for _, expr in brief.goals:
        assert np.isfinite(evaluate(expr, brief.series(obs))).all()
    if brief.scene is None:  # a text judge only
        env.close()
        with pytest.raises(ValueError, match="has no scene for the visual judge"):
            VisualJudge(ChatClient("http://127.0.0.1:9", "m"), brief)
        return
    renderer = SceneRenderer(brief.scene, size=48)
    image = renderer.render(brief.pose(obs, env.task), obs)
    renderer.close()
    env.close()
    assert image.shape == (1, 48, 48, 3) and image.std() > 0


def test_a_person_labels_five_pairs_with_the_keyboard_in_a_real_headless_browser(tmp_path):
    import threading
    import urllib.error
    import urllib.request

    from browser import HeadlessChromium

    from embody.cli import main
    from embody.policies.preference import PreferenceDataset, SegmentHistory

    rng = np.random.default_rng(0)
    history = SegmentHistory(40, 2, 5, 1)
    for _ in range(40):
        th = rng.uniform(-np.pi, np.pi, 2)
        obs = np.stack([rng.uniform(-1, 1, 2), np.cos(th), np.sin(th), np.zeros(2), np.zeros(2)], 1)
        history.add(obs, rng.uniform(-1, 1, (2, 1)), rng.random(2), np.zeros(2, bool))
    pairs = PreferenceDataset()
    pairs.add(history.pairs(5, 8, rng), np.zeros(5))
    pairs.save(tmp_path / "pairs.safetensors")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "person.safetensors"
    argv = ["primt", "label", str(tmp_path / "pairs.safetensors"), "--task", "cartpole-swingup"]
    argv += ["--out", str(out), "--port", str(port), "--timeout-s", "120"]
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("rc", main(argv)))
    worker.start()
    url = f"http://127.0.0.1:{port}/"

    def post(path: str, body: dict) -> int:
        req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        try:
            return urllib.request.urlopen(req, timeout=5).status
        except urllib.error.HTTPError as e:
            return e.code

    for _ in range(600):  # the page is up once the videos are rendered
        try:
            if len(json.load(urllib.request.urlopen(url + "api/pairs", timeout=5))["pairs"]) == 5:
                break
        except OSError:
            pass
        time.sleep(0.1)
    assert post("api/label", {"pair": "nope", "label": "first"}) == 404
    assert post("api/label", {"pair": "q0", "label": "best"}) == 400
    assert post("api/undo", {}) == 409
    browser = HeadlessChromium(url)
    try:
        browser.wait_for("document.getElementById('progress').textContent === '0 / 5 labelled'")
        for n, key in enumerate(["ArrowLeft", "2", "=", "s"], start=1):
            browser.press(key)
            browser.wait_for(f"document.getElementById('progress').textContent === '{n} / 5 labelled'")
        browser.press("u")  # undo the skip
        browser.wait_for("document.getElementById('progress').textContent === '3 / 5 labelled'")
        browser.press("1")
        browser.wait_for("document.getElementById('progress').textContent === '4 / 5 labelled'")
        browser.press("ArrowRight")
        worker.join(timeout=60)
    finally:
        browser.close()
    assert done.get("rc") == 0
    labels = PreferenceDataset.load(out, 5, 1).data["labels"]
    assert labels.tolist() == [0, 1, 0.5, 0, 1]


def test_hindsight_teaches_that_the_preferred_actions_beat_their_edits_and_reaches_the_learner():
    import torch

    from embody.papers.primt.hindsight import HindsightLoss
    from embody.papers.primt.teacher import PRIMTTeacher
    from embody.policies.preference import PreferenceConfig, PreferenceLearner, RewardModel

    torch.manual_seed(0)
    model, loss = RewardModel(3, 2, [32, 32], ensemble=2), HindsightLoss(edits=5, weight=1.0)
    obs, actions = torch.randn(16, 2, 10, 3), torch.rand(16, 2, 10, 2) * 0.5  # preferred actions in [0, 0.5]
    labels = torch.tensor([0.0, 1.0] * 8)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    before = loss(model, obs, actions, labels).item()
    for _ in range(200):
        opt.zero_grad()
        loss(model, obs, actions, labels).backward()
        opt.step()
    assert loss(model, obs, actions, labels).item() < 0.7 * before  # softplus(gap) from log 2 towards 0
    with torch.no_grad():
        s, a = obs[:, 0], actions[:, 0]
        edited = (a + 0.3 * (2 * torch.rand_like(a) - 1)).clamp(-1, 1)
        assert (model(s, edited) - model(s, a)).mean() < -0.1  # fresh edits earn less than the preferred steps
    assert loss(model, obs, actions, torch.full((16,), 0.5)).item() == 0  # no strict label: no counterfactuals
    with LoopbackChatServer(respond=text_standin) as server:
        teacher = PRIMTTeacher(text=TextJudge(ChatClient(server.url, "m"), BRIEF), aux_loss=HindsightLoss())
        assert PreferenceLearner(PreferenceConfig(), teacher, 5, 1, 1).aux_loss is teacher.aux_loss


def test_the_llm_bench_measures_a_judge_at_a_url(tmp_path, capsys):
    from embody.cli import main
    from embody.policies.preference import PreferenceDataset

    pairs = cartpole_pairs(k=4)
    pairs["rewards"][:, 1] = 1.0  # the upright segments are the better ones
    d = PreferenceDataset()
    d.add(pairs, np.zeros(4))
    d.save(tmp_path / "pairs.safetensors")
    with LoopbackChatServer(respond=text_standin) as server:
        argv = ["bench", "primt", str(tmp_path / "pairs.safetensors"), "--llm-url", server.url, "--repeats", "2"]
        assert main(argv + ["--out", str(tmp_path / "bench")]) == 0
    result = json.loads((tmp_path / "bench" / "results.json").read_text())
    assert result["agreement"] == 1.0 and result["unsure"] == 0 and result["first_position_rate"] == 0.5


@pytest.mark.parametrize(
    "reply, plan",
    [
        ('{"waypoints": [[1, 1, 1]]}', [[1, 1, 1]]),
        ('```json\n{"waypoints": [[0, 0, 1], [1.0, 1.0, 1.0]]}\n```', [[0, 0, 1], [1, 1, 1]]),
        ('{"waypoints": []}', None),
        ('{"waypoints": [[1, 1]]}', None),
        ('{"waypoints": [[1, 1, "1"]]}', None),
        ('{"waypoints": [[9, 1, 1]]}', None),  # far outside the start–target frame
        ('{"waypoints": [[1, 1, 1]], "code": "import os"}', None),
        ('{"waypoints": [[1, 1, 1]] * 9}', None),
        ("def plan(): return [[1, 1, 1]]", None),
    ],
)
def test_foresight_plans_are_parsed_strictly(reply, plan):
    from embody.papers.primt.foresight import parse_plan

    parsed = parse_plan(reply)
    assert (parsed is None) if plan is None else parsed.tolist() == plan


def test_foresight_tracks_the_judges_plan_and_swings_up_and_a_bad_plan_falls_back(tmp_path):
    from embody.papers.primt.foresight import STRAIGHT, ForesightConfig, ask_plan, synthesize
    from embody.papers.primt.standins import PLAN
    from embody.runs import build_env
    from embody.train import resolve_config

    config = ForesightConfig(trajectories=16)
    with LoopbackChatServer(respond=text_standin) as server:
        reach = synthesize(resolve_config("arm-reach"), ChatClient(server.url, "m"), config, seed=0)
    assert config.stats.asked == config.stats.parsed == 1
    assert reach["obs"].shape == (16, 75, 33) and reach["actions"].shape == (16, 75, 7)
    tip, target = reach["obs"][:, :, 14:17], reach["obs"][:, :, 27:30]
    assert (np.linalg.norm(tip[:, -1] - target[:, -1], axis=1) < 0.02).mean() >= 0.9  # they reach and hold
    start, mid = tip[:, 0], tip[:, 25]  # the stand-in's plan: the target's height first
    assert np.abs(mid[:, 2] - target[:, 0, 2]).mean() < 0.5 * np.abs(start[:, 2] - target[:, 0, 2]).mean()
    random = build_env(resolve_config("cartpole-swingup"), n_envs=16, evaluation=True)
    random.reset()
    rng = np.random.default_rng(0)
    r_random = sum(random.step(rng.uniform(-1, 1, (16, 1)).astype(np.float32))[1] for _ in range(250))
    random.close()
    swing = synthesize(resolve_config("cartpole-swingup"), None, ForesightConfig(trajectories=16), seed=0)
    assert swing["rewards"].sum(1).mean() > 4 * r_random.mean()  # purposeful, unlike random actions
    assert swing["obs"][:, :, 1].max(1).min() > 0.9  # every episode gets the pole up
    with LoopbackChatServer(respond=lambda body: "Move to the target.") as prose:
        bad = ForesightConfig().stats
        assert ask_plan(ChatClient(prose.url, "m"), "task", bad).tolist() == STRAIGHT
    assert (bad.asked, bad.parsed, bad.fallback) == (1, 0, 1) and PLAN["waypoints"][-1] == [1.0, 1.0, 1.0]


def test_foresight_ends_scattered_around_the_target_with_end_jitter():
    from embody.papers.primt.foresight import ForesightConfig, synthesize
    from embody.train import resolve_config

    def final_distance(jitter: float) -> np.ndarray:
        reach = synthesize(resolve_config("arm-reach"), None, ForesightConfig(trajectories=16, end_jitter=jitter))
        return np.linalg.norm(reach["obs"][:, -1, 14:17] - reach["obs"][:, -1, 27:30], axis=1)

    exact, scattered = final_distance(0.0), final_distance(0.02)
    assert np.median(exact) < 0.01 and 0.015 < np.median(scattered) < 0.06  # 0.02 · √3 ≈ 0.035 expected


def test_foresight_tilt_turns_the_peg_but_still_reaches_the_target():
    """Untilted, every trajectory ends with the peg pointing exactly down (one quaternion for every hover); tilted,
    the orientations spread and the tips still arrive."""
    from embody.papers.primt.foresight import ForesightConfig, synthesize
    from embody.train import resolve_config

    def ends(tilt: float) -> tuple[np.ndarray, float]:
        obs = synthesize(resolve_config("arm-reach"), None, ForesightConfig(trajectories=16, tilt=tilt))["obs"][:, -1]
        return np.linalg.norm(obs[:, 14:17] - obs[:, 27:30], axis=1), obs[:, 17:21].std(0).max()

    (d0, spread0), (d1, spread1) = ends(0.0), ends(0.1)
    assert spread0 < 1e-3 and spread1 > 0.02  # quaternion components; 0.1 rad per axis turns them by ~0.05
    assert np.median(d1) < 0.01 and np.median(d0) < 0.01
