"""Draws bench/results.png from bench/results.json (written by peer-bench): schedkit's
advantage on each measure that has a target, against that target, on a log scale.

    python chart.py results.json results.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source, out):
    with open(source) as f:
        results = json.load(f)
    rows = [
        (f"{r['name'].strip()}\n({s['theirs']})", r["advantage"], r["target"])
        for s in results["sections"]
        for r in s["rows"]
        if r["target"] is not None
    ]
    rows.reverse()
    fig, ax = plt.subplots(figsize=(10, 0.75 * len(rows) + 1.6))
    for i, (_name, advantage, target) in enumerate(rows):
        met = advantage >= target
        ax.barh(i, advantage, color="#2e7d32" if met else "#ef6c00", height=0.6)
        ax.plot([target, target], [i - 0.4, i + 0.4], color="black", linewidth=2)
        ax.text(advantage * 1.05, i, f"{advantage:.1f}×", va="center", fontsize=9)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.axvline(1, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("how many times better schedkit is (log scale); black tick: the target; orange: target missed")
    ax.set_title(f"schedkit against its peers, {results['date']}\n{results['machine']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
