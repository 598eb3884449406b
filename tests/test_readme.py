"""The README's Python quickstart runs as written (each ```python block in order, one namespace)."""

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def quickstart_blocks() -> list[str]:
    text = README.read_text()
    section = text.split("## Python quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_quickstart_has_every_step():
    code = "\n".join(quickstart_blocks())
    for step in ("make_env(", "train(", "load_run_checkpoint(", "evaluate_run(", "record(", "deploy("):
        assert step in code, step


@pytest.mark.slow
def test_the_python_quickstart_runs(tmp_path, capsys):
    pytest.importorskip("cyclonedds", reason="the deploy step needs the hardware extra")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the blocks write runs/ relative to the working directory
    try:
        namespace: dict = {}
        for block in quickstart_blocks():
            exec(compile(block, str(README), "exec"), namespace)
    finally:
        os.chdir(cwd)
    assert (tmp_path / "runs/quickstart/checkpoint/checkpoint.json").is_file()
    assert namespace["demos"].episode_lengths.size == 2
    assert namespace["report"]["ended_in"] in ("POLICY", "DAMPING")
