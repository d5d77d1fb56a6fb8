"""The search-and-copy's data as one file: the slow plan search runs once (CPU), the copy anywhere (a GPU box).

``python -m openconductor.train.sim_general CONFIG --stage search`` writes ``RUN/copy_data.json.gz``: the
settings it was searched with (``key``), and per training pool each example's question, its bucket's best
plan with its search scores, its prompt (chat messages) and its target as searched, plus the rows of
``copy_targets.jsonl``. ``load`` rebuilds the examples from the questions and plans with the code that
loads them (prompts and targets are cheap; only the search is slow), so a change of the prompt or target
wording since the search is used, not silently undone; it is logged. A file searched with other settings,
another training pool or another held-out set is refused (``CopyDataError``).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import logging
from pathlib import Path
from typing import Optional

from ..sim.plan_search import Scored, SearchSettings
from ..sim.questions import Question
from ..workflow import Workflow
from .sim_general import CopyData, CopySettings, PromptShape, Searched, add_search_arguments, examples, search_settings, training_pools

log = logging.getLogger(__name__)

FORMAT = "openconductor-copy-data/1"
FILE_NAME = "copy_data.json.gz"


class CopyDataError(ValueError):
    """A copy-data file that is missing, unreadable, or searched for another run than this one."""


def data_key(settings: CopySettings, training_pool: Path, *, test_n: int, eval_seed: int) -> dict:
    """What the search's results depend on: its settings, the training pool file and the held-out questions it
    excluded (not the prompt's shape: prompts and targets are rebuilt when the data loads)."""
    copy = dataclasses.asdict(settings)
    if copy["targets"] == "search":  # the targets' source as data written before it could be chosen recorded it: absent
        del copy["targets"], copy["rank_questions"]
    if copy["ranking"] == "area":  # likewise the ranking, before it could be chosen
        del copy["ranking"]
    if copy["training_pool_token_weight"] is None:  # and the training pool's own price
        del copy["training_pool_token_weight"]
    if copy["training_pool_search"] is None:  # and its search's size
        del copy["training_pool_search"]
    else:
        copy["training_pool_search"] = list(copy["training_pool_search"])  # as JSON reads it back
    return {"copy": copy, "training_pool_sha256": hashlib.sha256(Path(training_pool).read_bytes()).hexdigest(),
            "test_n": test_n, "eval_seed": eval_seed}


def save(data: CopyData, path: Path, key: dict) -> Path:
    """Write ``data`` (built by ``sim_general.build``, so it holds what it was searched from) to ``path``."""
    if len(data.searched) != len(data.groups):
        raise ValueError("copy data without its search results (CopyData.searched) cannot be saved")
    pools = []
    for s, (prompts, targets) in zip(data.searched, data.groups):
        pools.append({"name": s.spec.name, "examples": [
            {"question": dataclasses.asdict(q), "plan": b.plan.to_dict(), "score": b.score, "accuracy": b.accuracy, "tokens": b.tokens,
             "questions": b.questions, "prompt": p, "target": t}
            for q, b, p, t in zip(s.questions, s.best, prompts, targets)]})
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump({"format": FORMAT, "key": key, "seconds": data.seconds, "pools": pools, "rows": data.rows}, fh)
    return path


def load(path: Path, key: dict, training_pool: Path, prompt: PromptShape) -> CopyData:
    """The copy data in ``path``, checked against this run's ``key`` and rebuilt with this code's prompts
    and targets (the pools are regenerated from their seeds: the file names them, it does not hold them)."""
    raw = _read(path)
    found = {k: (raw.get("key") or {}).get(k) for k in key}  # fields this code does not check are ignored
    if found != key:
        raise CopyDataError(f"{path} was searched for another run: {_differences(found, key)}; "
                            "run `--stage search` again with this run's settings, or pass the settings it was searched with")
    settings = _settings(key["copy"])
    specs = training_pools(settings, training_pool)
    names = [p["name"] for p in raw["pools"]]
    if names != [s.name for s in specs]:
        raise CopyDataError(f"{path}: its pools {names[:3]}... are not this code's training pools {[s.name for s in specs][:3]}...: "
                            "the pool generator changed since the search; run `--stage search` again")
    searched = [Searched(spec, [Question(**e["question"]) for e in p["examples"]],
                         [Scored(Workflow.from_dict(e["plan"]), e["score"], e["accuracy"], e["tokens"], e["questions"]) for e in p["examples"]])
                for spec, p in zip(specs, raw["pools"])]
    data = examples(searched, prompt, raw["seconds"])
    stale = sum(p != e["prompt"] or t != e["target"]
                for (prompts, targets), pool in zip(data.groups, raw["pools"]) for p, t, e in zip(prompts, targets, pool["examples"]))
    if stale:
        log.warning("%s: %d of %d examples' prompts or targets differ from this code's; training on this code's", path, stale, len(data.rows))
    return data


def training_questions(path: Path) -> frozenset[str]:
    """The texts of every question a copy-data file's conductor was trained or searched on: its examples' (stored) and
    its search's (drawn again from its key), so that a held-out set drawn with another seed than the one the search
    excluded can be checked against them."""
    from .sim_general import held_out_texts, own_search_questions, search_questions

    raw = _read(path)
    key = raw["key"]
    settings = _settings(key["copy"])
    exclude = held_out_texts(key["test_n"], key["eval_seed"])
    texts = {e["question"]["text"] for p in raw["pools"] for e in p["examples"]}
    texts |= {q.text for q in search_questions(settings, exclude) + own_search_questions(settings, exclude)}
    return frozenset(texts)


def _read(path: Path) -> dict:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError as exc:
        raise CopyDataError(f"copy data not found: {path} (write it with `--stage search`)") from exc
    except (OSError, EOFError, ValueError) as exc:
        raise CopyDataError(f"{path} is not a copy-data file ({FILE_NAME}, gzip JSON): {exc}") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CopyDataError(f"{path}: format {raw.get('format') if isinstance(raw, dict) else None!r}, expected {FORMAT!r}")
    return raw


def _settings(copy: dict) -> CopySettings:
    return CopySettings(**{**copy, "search": SearchSettings(**copy["search"])})


def _differences(found: dict, wanted: dict, prefix: str = "") -> str:
    """The settings that differ, as ``name: file's value != this run's`` (a setting a key leaves out is at its default:
    keys omit defaults that older files never recorded)."""
    out = []
    for k in sorted(set(found) | set(wanted)):
        a, b = found.get(k), wanted.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = _differences(a, b, f"{prefix}{k}.")
            out += [inner] if inner else []
        elif a != b:
            shown = [repr(v) if k in side else "its default" for v, side in ((a, found), (b, wanted))]
            out.append(f"{prefix}{k}: {shown[0]} in the file != {shown[1]} in this run")
    return "; ".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    """Check a copy-data file against a training config at the issue's scale (the defaults of
    ``sim_general``), as ``--stage copy --copy-data FILE`` would load it."""
    import argparse

    from .config import load_train_config

    ap = argparse.ArgumentParser(description="Check that a copy-data file loads for a config (before carrying it to another machine).")
    ap.add_argument("config")
    ap.add_argument("file")
    ap.add_argument("--test-n", type=int, default=1000)
    add_search_arguments(ap)  # as the search was given them
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = load_train_config(args.config)
    shape = PromptShape.of(cfg)
    try:
        data = load(Path(args.file), data_key(search_settings(args), cfg.pool_path, test_n=args.test_n, eval_seed=cfg.data.eval_seed), cfg.pool_path, shape)
    except CopyDataError as exc:
        ap.error(str(exc))
    print(f"{args.file}: {len(data.rows)} examples over {len(data.groups)} pools (searched in {data.seconds:.0f} s): loads for {args.config}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
