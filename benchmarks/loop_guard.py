"""What the local models' loop guard would do to the completions in a replay store or response cache.

    PYTHONPATH=src python benchmarks/loop_guard.py runs/fit-local/replay.sqlite3

For every stored completion of a packaged local model (other workers' are skipped), finds the first prefix that
``providers.local_gguf.looping`` calls a loop, and prints: how many of the completions that ran to
max_tokens it would have stopped and how early (characters kept of the full text), and how many of those
that ended by themselves it would have cut (each one printed: these are the false alarms).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics

from openconductor.providers.local_gguf import PACKAGED, looping


def first_loop(text: str) -> int | None:
    return next((i for i in range(1, len(text) + 1) if looping(text[:i])), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", help="a replay store or response cache (SQLite)")
    args = parser.parse_args()
    rows = [(w, b) for w, m, b in sqlite3.connect(args.store).execute("select worker, model, completion from responses") if m in PACKAGED]
    full, stopped, kept, cut = 0, 0, [], []
    for worker, blob in rows:
        completion = json.loads(blob)
        text = completion.get("text") or ""
        at = first_loop(text)
        if completion.get("finish_reason") == "length":
            full += 1
            if at is not None:
                stopped += 1
                kept.append(at / len(text))
        elif at is not None:
            cut.append((worker, text))
    ended = len(rows) - full
    print(f"ran to max_tokens: {full}; the guard stops {stopped} of them, keeping a median {statistics.median(kept) if kept else 0:.0%} of their text")
    print(f"ended by themselves: {ended}; the guard would cut {len(cut)} of them")
    for worker, text in cut:
        print(f"--- {worker}: {text[-200:]!r}")


if __name__ == "__main__":
    main()
