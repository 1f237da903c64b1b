"""The corrected score's simulation (docs/metrics.md#corrected-scores): a judge biased upwards
(it calls 95% of the correct answers correct and 40% of the wrong ones) on 1000 answers of
which 60% are correct; people label n of them at random. Writes coverage.svg here and prints
the table of the page: how often each 95% interval covers the true 0.6 (a run without an
estimate, where one verdict got no label, counts as not covered), and its mean width.

    python docs/judges/simulation.py
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ragsweep.evaluation.agreement import corrected  # noqa: E402

TRUTH, ANSWERS, RUNS = 0.6, 1000, 4000
LABELS = (10, 25, 50, 100, 200, 400)


def simulate(labels: int, seed: int) -> dict[str, tuple[float, float]]:
    rng = np.random.default_rng(seed)
    person = rng.random((RUNS, ANSWERS)) < TRUTH
    judge = np.where(person, rng.random(person.shape) < 0.95, rng.random(person.shape) < 0.4)
    picked = np.argsort(rng.random(person.shape), axis=1)[:, :labels]
    rows = np.arange(RUNS)[:, None]
    f, h = judge[rows, picked], person[rows, picked]
    z = 1.959964
    out = {}
    _, low, high = corrected(judge, f, h)
    out["corrected (PPI)"] = (low, high)
    raw, se = judge.mean(1), judge.std(1, ddof=1) / np.sqrt(ANSWERS)
    out["judge alone"] = (raw - z * se, raw + z * se)
    mean, se = h.mean(1), h.std(1, ddof=1) / np.sqrt(labels)
    out["labels alone"] = (mean - z * se, mean + z * se)
    return {
        name: (float(np.mean((lo <= TRUTH) & (hi >= TRUTH))), float(np.nanmean(hi - lo)))
        for name, (lo, hi) in out.items()
    }


def main() -> None:
    found = {n: simulate(n, seed=n) for n in LABELS}
    names = list(found[LABELS[0]])
    print("| labels | " + " | ".join(f"{n}: coverage, width" for n in names) + " |")
    print("| --- |" + " --- |" * len(names))
    for n in LABELS:
        cells = [f"{found[n][m][0]:.1%}, {found[n][m][1]:.3f}" for m in names]
        print(f"| {n} | " + " | ".join(cells) + " |")
    figure, (cover, width) = plt.subplots(1, 2, figsize=(9, 3.4))
    for name in names:
        cover.plot(LABELS, [found[n][name][0] for n in LABELS], marker="o", label=name)
        width.plot(LABELS, [found[n][name][1] for n in LABELS], marker="o", label=name)
    cover.axhline(0.95, color="grey", linestyle=":", linewidth=1)
    cover.set(xscale="log", xlabel="labelled answers", ylabel="coverage of the true 0.6",
              ylim=(0, 1.02), title="95% intervals: coverage")  # fmt: skip
    width.set(xscale="log", xlabel="labelled answers", ylabel="mean width",
              title="95% intervals: width")  # fmt: skip
    cover.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(Path(__file__).with_name("coverage.svg"), metadata={"Date": None})


if __name__ == "__main__":
    main()
