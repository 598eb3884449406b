"""Fuse atomic domains into one: unify types and predicates, deduplicate operators, causal graph.

UniDomain's fusion step for our STRIPS fragment. Atomic domains learned from different
demonstrations (or written by different people) name the same thing differently
(``holding`` / ``grasped``, ``block`` / ``cube``). ``fuse`` proceeds in three passes:

1. **Types** with the same name are one type. Two differently named types merge when their
   score reaches ``type_threshold`` and no single domain uses both (a domain's own names are
   distinct by definition). The score is the cosine similarity of the names' embeddings, plus
   ``alignment_bonus`` when same-named operators of two domains (the robot's own skill names)
   take them at the same parameter position.
2. **Predicates**, after type renaming, are keyed by name and signature. Two keys with equal
   signatures merge when their score reaches ``predicate_threshold`` and no domain uses both;
   most similar pairs first. Here the bonus is for atoms that same-named operators use in the
   same part (precondition/add/delete) on the same parameters (when several atoms share a part
   and parameters, they are paired by name similarity). A cluster takes the name used by most
   domains (ties: the first seen), so a name that needed no merge is kept.
3. **Operators**, after renaming, are compared up to parameter names. Identical ones are one
   operator. Ones with the same parameter types and effects whose preconditions differ, and
   that share a name or whose preconditions nest, become one operator with the *union* of the
   preconditions (the conservative choice: a plan valid for it is valid for each source).
   Same name and parameter types with contradicting effects (one adds what the other deletes)
   is a conflict: ``FusionConflict`` unless ``on_conflict="keep"``. Other same-named operators
   are kept apart, the later one renamed ``NAME-DOMAIN``.

Every merge and rename is recorded (``Fusion.merges``), per-source rename maps are returned
(``Fusion.renames``) and can be applied to problem files, and the causal graph has an edge
A → B for each predicate that A adds and B requires.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from embody.files import write_atomic

from .embed import LexicalEmbedder, get_embedder, similarity
from .pddl import Atom, Domain, Operator, PDDLError, Predicate, Problem, check_domain


class FusionConflict(PDDLError):
    """Domains that contradict each other (the message names both and the operator)."""


@dataclass(frozen=True)
class FusionConfig:
    """Settings of ``fuse``: the embedder, the merge thresholds and bonus, and what to do on a conflict."""

    embedder: str = "minilm"  # "minilm" | "lexical"
    type_threshold: float = 0.75  # score (name similarity + bonus) to merge two types
    predicate_threshold: float = 0.6  # ... two predicates with the same signature
    alignment_bonus: float = 0.5  # added to the score of names that same-named operators align
    on_conflict: str = "error"  # "error" | "keep" (contradicting operators stay apart, renamed)


@dataclass(frozen=True)
class Merge:
    """One recorded merge or rename of ``fuse``: what was merged (``domain:name`` each), into what, and why."""

    kind: str  # "type" | "predicate" | "operator" | "rename"
    sources: tuple[str, ...]  # "domain:name" of everything merged
    into: str
    reason: str

    def __str__(self) -> str:
        return f"{self.kind} {' + '.join(self.sources)} -> {self.into} ({self.reason})"


@dataclass
class Fusion:
    """What ``fuse`` returns: the fused ``domain`` and how it came about.

    ``renames[source]``: ``{"types" | "predicates" | "actions": {source name: fused name}}``;
    ``merges``: every merge and rename; ``conflicts``: messages for contradicting operators kept
    apart; ``causal_edges``: (operator A, operator B, predicate A adds and B requires);
    ``sources[operator]``: the ``"domain:action"`` it came from.
    """

    domain: Domain
    renames: dict[str, dict[str, dict[str, str]]]  # source -> {"types"|"predicates"|"actions": {name: fused name}}
    merges: list[Merge]
    conflicts: list[str]
    causal_edges: list[tuple[str, str, str]]  # (operator, operator, predicate)
    sources: dict[str, list[str]] = field(default_factory=dict)  # operator -> ["domain:action", ...]

    def original(self, action: str) -> str:
        """The name ``action`` had in the first domain it came from (the skill, for learned domains)."""
        return self.sources[action][0].split(":", 1)[1] if action in self.sources else action

    def summary(self) -> dict:
        """Counts: ``domain`` (its name), ``operators``, ``predicates``, ``types``, ``causal_edges``,
        ``merges``, ``conflicts``."""
        d = self.domain
        return {
            "domain": d.name,
            "operators": len(d.operators),
            "predicates": len(d.predicates),
            "types": len(d.types),
            "causal_edges": len(self.causal_edges),
            "merges": len(self.merges),
            "conflicts": len(self.conflicts),
        }

    def to_json(self) -> dict:
        """The fusion report: ``summary``, ``renames``, ``merges``, ``conflicts``, ``causal_edges``, ``sources``."""
        return {
            "summary": self.summary(),
            "renames": self.renames,
            "merges": [asdict(m) for m in self.merges],
            "conflicts": self.conflicts,
            "causal_edges": [list(e) for e in self.causal_edges],
            "sources": self.sources,
        }

    def save_report(self, path: str | Path) -> Path:
        """Write ``to_json()`` to ``path`` (atomically); returns the path."""
        return write_atomic(path, json.dumps(self.to_json(), indent=1))


# ---------------------------------------------------------------- name clustering


def _cluster(keys: list, users: dict, sim, threshold: float, kind: str, label) -> tuple[dict, list[Merge]]:
    """Greedy agglomeration of ``keys`` (most similar pair first) under the no-shared-domain rule.

    ``users[key]``: the domains (in order) that use it; ``sim``: (K, K) similarity with -inf where a
    pair may never merge; ``label(key)``: its name. Returns key -> canonical key, and the merges.
    """
    parent = {k: k for k in keys}
    members = {k: [k] for k in keys}
    doms = {k: set(users[k]) for k in keys}

    def root(k):
        while parent[k] != k:
            k = parent[k]
        return k

    pairs = sorted(
        ((sim[i, j], i, j) for i in range(len(keys)) for j in range(i + 1, len(keys)) if sim[i, j] >= threshold),
        reverse=True,
    )
    reasons = {}
    for s, i, j in pairs:
        a, b = root(keys[i]), root(keys[j])
        if a == b or doms[a] & doms[b]:
            continue
        parent[b] = a
        members[a] += members.pop(b)
        doms[a] |= doms.pop(b)
        reasons[a] = max(reasons.get(a, 0.0), float(s))
    order = {k: n for n, k in enumerate(keys)}
    canon, merges = {}, []
    for r, ms in members.items():
        best = max(ms, key=lambda k: (len(users[k]), -order[k]))  # most used, then first seen
        for k in ms:
            canon[k] = best
        if len(ms) > 1:
            srcs = tuple(f"{','.join(users[k])}:{label(k)}" for k in sorted(ms, key=order.get))
            merges.append(Merge(kind, srcs, label(best), f"score {reasons[r]:.2f} ≥ {threshold:g}"))
    return canon, merges


def _unify_types(domains: Sequence[Domain], cfg: FusionConfig, embedder) -> tuple[dict, list[Merge]]:
    users: dict[str, list[str]] = {}
    for d in domains:
        for t in d.types:
            users.setdefault(t, []).append(d.name)
    keys = list(users)
    if len(keys) < 2:
        return {k: k for k in keys}, []
    sim = similarity(embedder, keys, keys)
    index = {k: i for i, k in enumerate(keys)}
    aligned = {
        frozenset((ta, tb))
        for a, b in _operator_pairs(domains)
        for (_, ta), (_, tb) in zip(a.params, b.params)
        if ta != tb
    }
    for ta, tb in aligned:  # the bonus once per pair, however many operators align it
        sim[index[ta], index[tb]] = sim[index[tb], index[ta]] = sim[index[ta], index[tb]] + cfg.alignment_bonus
    return _cluster(keys, users, sim, cfg.type_threshold, "type", str)


def _operator_pairs(domains: Sequence[Domain]):
    """Same-named operators of the same arity in two different domains: (op of one, op of the other)."""
    by_name: dict[tuple[str, int], list[tuple[int, Operator]]] = {}
    for i, d in enumerate(domains):
        for o in d.operators:
            by_name.setdefault((o.name, len(o.params)), []).append((i, o))
    for group in by_name.values():
        for k, (i, a) in enumerate(group):
            for j, b in group[k + 1 :]:
                if i != j:
                    yield a, b


def _aligned_predicates(domains: Sequence[Domain], sim_of) -> set[tuple[str, str]]:
    """Predicate name pairs that same-named operators use in the same part on the same parameters."""
    out = set()
    for a, b in _operator_pairs(domains):
        pos_a = {v: k for k, (v, _) in enumerate(a.params)}
        pos_b = {v: k for k, (v, _) in enumerate(b.params)}
        for part in ("preconditions", "add", "delete"):
            groups: dict[tuple, tuple[list, list]] = {}
            for atom in getattr(a, part):
                groups.setdefault(tuple(pos_a.get(x) for x in atom.args), ([], []))[0].append(atom.predicate)
            for atom in getattr(b, part):
                groups.setdefault(tuple(pos_b.get(x) for x in atom.args), ([], []))[1].append(atom.predicate)
            for left, right in groups.values():
                out |= _pair_by_similarity(left, right, sim_of)
    return {p for p in out if p[0] != p[1]}


def _pair_by_similarity(left: list[str], right: list[str], sim_of) -> set[tuple[str, str]]:
    """Greedy one-to-one pairing of two name lists, most similar first (a single pair needs no similarity)."""
    if len(left) == 1 and len(right) == 1:
        return {(left[0], right[0])}
    cands = sorted(((sim_of(x, y), x, y) for x in left for y in right), reverse=True)
    used_l, used_r, out = set(), set(), set()
    for _, x, y in cands:
        if x not in used_l and y not in used_r:
            used_l.add(x), used_r.add(y), out.add((x, y))
    return out


def _unify_predicates(domains: Sequence[Domain], tmap: dict, cfg: FusionConfig, embedder):
    """(domain, name) -> canonical predicate name; the canonical predicates; merges."""
    users: dict[tuple, list[str]] = {}
    for d in domains:
        for p in d.predicates:
            users.setdefault((p.name, tuple(tmap[t] if t in tmap else t for _, t in p.params)), []).append(d.name)
    keys = list(users)
    names = [k[0] for k in keys]
    if len(keys) > 1:
        sim = similarity(embedder, names, names)
        col = {n: i for i, n in enumerate(names)}
        aligned = _aligned_predicates(domains, lambda x, y: sim[col[x], col[y]]) if cfg.alignment_bonus else set()
        for i, (ni, si) in enumerate(keys):
            for j, (nj, sj) in enumerate(keys):
                if si != sj:  # only predicates with the same signature can be synonyms
                    sim[i, j] = -math.inf
                elif (ni, nj) in aligned or (nj, ni) in aligned:
                    sim[i, j] += cfg.alignment_bonus
        canon, merges = _cluster(keys, users, sim, cfg.predicate_threshold, "predicate", lambda k: k[0])
    else:
        canon, merges = {k: k for k in keys}, []
    # One name per canonical key: a name shared by two different signatures gets the second renamed.
    final, taken = {}, {}
    for k in keys:
        c = canon[k]
        if c in final:
            continue
        name = c[0]
        if name in taken and taken[name] != c[1]:
            new = f"{name}-{users[c][0]}"
            merges.append(
                Merge("rename", (f"{users[c][0]}:{name}",), new, f"another predicate {name} has a different signature")
            )
            name = new
        taken[name] = c[1]
        final[c] = name
    pmap = {(dn, k[0]): final[canon[k]] for k in keys for dn in users[k]}
    preds = {}
    for k in keys:
        name = final[canon[k]]
        preds.setdefault(name, Predicate(name, tuple((f"?x{i + 1}", t) for i, t in enumerate(canon[k][1]))))
    return pmap, list(preds.values()), merges


# ---------------------------------------------------------------- operators


def _rename_op(op: Operator, dname: str, tmap: dict, pmap: dict) -> Operator:
    var = {v: f"?x{i + 1}" for i, (v, _) in enumerate(op.params)}

    def atoms(s):
        return frozenset(Atom(pmap[(dname, a.predicate)], tuple(var.get(x, x) for x in a.args)) for a in s)

    params = tuple((var[v], tmap.get(t, t)) for v, t in op.params)
    return Operator(op.name, params, atoms(op.preconditions), atoms(op.add), atoms(op.delete))


def _contradicts(a: Operator, b: Operator) -> frozenset[Atom]:
    return (a.add & b.delete) | (a.delete & b.add)


def _merge_operators(renamed: list[tuple[str, Operator]], cfg: FusionConfig):
    """renamed: (source domain, operator in unified names). Returns ops, actions map, merges, conflicts, sources."""
    kept: list[Operator] = []
    srcs: list[list[str]] = []
    amap: dict[tuple[str, str], str] = {}
    merges, conflicts = [], []
    for dname, op in renamed:
        for i, k in enumerate(kept):
            types_eq = [t for _, t in k.params] == [t for _, t in op.params]
            if not types_eq:
                continue
            same_eff = (k.add, k.delete) == (op.add, op.delete)
            nested = k.preconditions <= op.preconditions or op.preconditions <= k.preconditions
            if same_eff and (k.preconditions == op.preconditions or k.name == op.name or nested):
                pre = k.preconditions | op.preconditions
                why = (
                    "same structure"
                    if k.preconditions == op.preconditions
                    else f"same effects; preconditions unioned (+{' '.join(map(str, sorted(pre - k.preconditions))) or 'none'})"
                )
                merges.append(Merge("operator", (*srcs[i], f"{dname}:{op.name}"), k.name, why))
                kept[i] = Operator(k.name, k.params, pre, k.add, k.delete)
                srcs[i].append(f"{dname}:{op.name}")
                amap[(dname, op.name)] = k.name
                break
            if k.name == op.name and _contradicts(k, op):
                msg = (
                    f"operator {op.name}: {dname} and {', '.join(s.split(':')[0] for s in srcs[i])} contradict: "
                    f"{' '.join(map(str, sorted(_contradicts(k, op))))} is added by one and deleted by the other"
                )
                if cfg.on_conflict == "error":
                    raise FusionConflict(msg)
                conflicts.append(msg)
        else:
            name = op.name
            if any(k.name == name for k in kept):
                name = f"{op.name}-{dname}"
                merges.append(Merge("rename", (f"{dname}:{op.name}",), name, "another operator has this name"))
            kept.append(Operator(name, op.params, op.preconditions, op.add, op.delete))
            srcs.append([f"{dname}:{op.name}"])
            amap[(dname, op.name)] = name
    return kept, amap, merges, conflicts, {k.name: s for k, s in zip(kept, srcs)}


def causal_edges(domain: Domain) -> list[tuple[str, str, str]]:
    """(A, B, p) for each predicate p that operator A adds and operator B has as a precondition."""
    adds = {o.name: {a.predicate for a in o.add} for o in domain.operators}
    return [
        (a.name, b.name, p)
        for a in domain.operators
        for b in domain.operators
        for p in sorted(adds[a.name] & {x.predicate for x in b.preconditions})
    ]


# ---------------------------------------------------------------- public


def fuse(
    domains: Sequence[Domain],
    name: str = "fused",
    cfg: FusionConfig = FusionConfig(),
    embedder=None,
    unify: bool = True,
) -> Fusion:
    """Fuse ``domains`` (distinct names) into one domain; see the module docstring.

    ``unify=False``: merge only identical type and predicate names (the naive union, or domains
    already in one vocabulary); operators are still deduplicated.
    """
    names = [d.name for d in domains]
    if len(set(names)) != len(names):
        dup = sorted(n for n, c in Counter(names).items() if c > 1)
        raise PDDLError(f"domains to fuse must have distinct names; repeated: {', '.join(dup)}")
    if not unify:
        cfg, embedder = replace(cfg, type_threshold=math.inf, predicate_threshold=math.inf), LexicalEmbedder()
    embedder = embedder or get_embedder(cfg.embedder)
    tmap, type_merges = _unify_types(domains, cfg, embedder)
    pmap, preds, pred_merges = _unify_predicates(domains, tmap, cfg, embedder)
    renamed = [(d.name, _rename_op(o, d.name, tmap, pmap)) for d in domains for o in d.operators]
    ops, amap, op_merges, conflicts, sources = _merge_operators(renamed, cfg)
    types = tuple(dict.fromkeys(tmap[t] for d in domains for t in d.types))
    fused = Domain(name, types, tuple(preds), tuple(ops))
    check_domain(fused)
    # Complete maps (unchanged names too), so that merged_renames can tell a name two sources use
    # differently from one only a single source uses.
    renames = {
        d.name: {
            "types": {t: tmap[t] for t in d.types},
            "predicates": {p.name: pmap[(d.name, p.name)] for p in d.predicates},
            "actions": {o.name: amap[(d.name, o.name)] for o in d.operators},
        }
        for d in domains
    }
    return Fusion(fused, renames, type_merges + pred_merges + op_merges, conflicts, causal_edges(fused), sources)


def changed(renames: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Only the names a source's map changes."""
    return {kind: {a: b for a, b in m.items() if a != b} for kind, m in renames.items()}


def merged_renames(renames: dict[str, dict[str, dict[str, str]]]) -> dict[str, dict[str, str]]:
    """One map over all sources (for problems whose source is unknown); a name mapped two ways is left out."""
    out: dict[str, dict[str, str]] = {"types": {}, "predicates": {}, "actions": {}}
    clash: set[tuple[str, str]] = set()
    for maps in renames.values():
        for kind, m in maps.items():
            for old, new in m.items():
                if out[kind].setdefault(old, new) != new:
                    clash.add((kind, old))
    for kind, old in clash:
        del out[kind][old]
    return out


def rename_problem(problem: Problem, renames: dict[str, dict[str, str]], domain_name: str) -> Problem:
    """``problem`` in the fused vocabulary: predicates and object types renamed, domain name replaced."""
    pm, tm = renames.get("predicates", {}), renames.get("types", {})

    def atoms(s):
        return frozenset(Atom(pm.get(a.predicate, a.predicate), a.args) for a in s)

    return Problem(
        problem.name,
        domain_name,
        {o: tm.get(t, t) for o, t in problem.objects.items()},
        atoms(problem.init),
        atoms(problem.goal),
    )
