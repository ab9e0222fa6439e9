#!/usr/bin/env python3
"""plot_results.py — WER/ARWER against chunk size or latency from srkit results.json files.

Usage:
  plot_results.py RESULTS.json [RESULTS.json ...] [-o OUT_PREFIX] [--x chunk_ms|latency_p50|first_hyp]
                  [--y wer,arwer,rwer]

One line per strategy (runs grouped by stream.strategy and decoder, and by data set when the
runs cover several), one panel per metric; writes
OUT_PREFIX.png and OUT_PREFIX.svg (default: plot next to the first results file). Rates are shown
in percent. Needs matplotlib (Debian: apt-get install python3-matplotlib); srkit's tests do not.
"""
import argparse
import json
import os
import sys

X_AXES = {
    "chunk_ms": ("chunk size (ms)", lambda run: run.get("stream", {}).get("chunk_ms")),
    "latency_p50": ("per-chunk compute p50 (ms)",
                    lambda run: run["aggregate"]["latency"]["chunk_compute_ms"].get("p50")),
    "first_hyp": ("first hypothesis (ms of audio)",
                  lambda run: run["aggregate"]["latency"]["first_hyp_ms"].get("mean")),
}


def load_runs(paths):
    runs = []
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                res = json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"plot_results.py: {p}: {e}")
        if not isinstance(res.get("runs"), list):
            sys.exit(f"plot_results.py: {p}: not an srkit results.json (no runs)")
        for run in res["runs"]:
            run["_file"] = p
            runs.append(run)
    return runs


def data_name(run):
    return os.path.basename(os.path.normpath((run.get("data") or {}).get("path") or "?"))


def series_key(run, several_sets=False):
    s = run.get("stream", {})
    label = f"{s.get('strategy') or 'default'} / {s.get('decoder') or 'default'}"
    if (s.get("beam") or 1) > 1:
        label += f" b={s['beam']}"
    if several_sets:  # runs over different data sets are separate lines
        label += f" ({data_name(run)})"
    return label


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--out")
    ap.add_argument("--x", default="chunk_ms", choices=sorted(X_AXES))
    ap.add_argument("--y", default="wer,arwer")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_results.py: matplotlib is missing (Debian: apt-get install python3-matplotlib)")
    runs = load_runs(args.results)
    metrics = [m.strip() for m in args.y.split(",") if m.strip()]
    xlabel, xget = X_AXES[args.x]
    several = len({data_name(r) for r in runs}) > 1
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: a smaller SVG
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        groups = {}
        for run in runs:
            x, y = xget(run), run["aggregate"].get(metric)
            if x is None or y is None:
                continue
            groups.setdefault(series_key(run, several), []).append((x, 100.0 * y))
        for label, pts in sorted(groups.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{metric.upper()} (%)")
        ax.grid(True, alpha=0.3)
        if not groups:
            ax.text(0.5, 0.5, f"no {metric} values", ha="center", va="center", transform=ax.transAxes)
        else:
            ax.legend(fontsize=8)
    fig.tight_layout()
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.results[0])), "plot")
    for ext in ("png", "svg"):
        fig.savefig(f"{out}.{ext}", dpi=120)
        print(f"wrote {out}.{ext}")


if __name__ == "__main__":
    main()
