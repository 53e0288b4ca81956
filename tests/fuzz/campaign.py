"""A long fuzzing run: ``python -m fuzz.campaign --seconds 600 --workers 2`` (from tests/,
or ``make fuzz FUZZ_SECONDS=600``).

Mutates the seeds for the time given, prints the counts per outcome, and saves each
contract violation (mismatch, other exception, crash, hang) as ``<out>/<outcome>-N.onnx``
with a ``.txt`` that says what was mutated and what happened.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fuzz.harness import FAILURES, OUTCOMES, Worker
from fuzz.mutate import mutate
from fuzz.seeds import seed_models

# outcomes that keep the contract but whose details are worth a look
REPORTED = ("wrapped", "nonfinite", "ort_rejects", "ort_crash", "documented")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-mutants", type=int, default=0, help="0: no limit")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--out", default="fuzz-failures")
    args = parser.parse_args(argv)
    seeds = seed_models()
    names = sorted(seeds)
    out = Path(args.out)
    counts: Counter = Counter()
    details: Counter = Counter()
    stop = time.monotonic() + args.seconds
    issued = [0]

    def work(index: int) -> None:
        worker = Worker(args.timeout)
        rng = random.Random(f"{args.seed}-{index}")
        try:
            while time.monotonic() < stop:
                if args.max_mutants and issued[0] >= args.max_mutants:
                    return
                issued[0] += 1
                name = rng.choice(names)
                mutant, done = mutate(seeds[name], rng)
                result = worker.check(mutant.SerializeToString())
                outcome = result["outcome"]
                counts[outcome] += 1
                if outcome in FAILURES + REPORTED:
                    key = (outcome, result["detail"][:160])
                    details[key] += 1
                    if details[key] <= (2 if outcome in FAILURES else 1):
                        out.mkdir(parents=True, exist_ok=True)
                        stem = out / f"{outcome}-{sum(details.values())}"
                        stem.with_suffix(".onnx").write_bytes(mutant.SerializeToString())
                        stem.with_suffix(".txt").write_text(
                            f"seed {name}\nmutations: {done}\n{json.dumps(result)}\n")
        finally:
            worker.close()

    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(work, range(args.workers)))
    total = sum(counts.values())
    print(f"{total} mutants in {args.seconds:g} s ({args.workers} workers)")
    for outcome in OUTCOMES:
        print(f"  {outcome:16} {counts[outcome]}")
    for (outcome, detail), n in details.most_common(60):
        print(f"  {n:5} {outcome}: {detail}")
    return 1 if any(counts[o] for o in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
