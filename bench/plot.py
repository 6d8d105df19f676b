#!/usr/bin/env python3
"""Draws one PNG per table of a warden-bench results file.

    plot.py RESULTS.json OUTDIR

Bars: one group per column, one bar per row, at the median with min-max
whiskers; a log axis when the figures span more than two decades. Lines:
one line per row over numeric columns (log-log). Rows quoted from papers
are hatched.
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

COLORS = {"warden": "#1f6feb"}


def figures(table):
    for row in table["rows"]:
        for c in row["cells"]:
            if c is not None and c["median"] > 0:
                yield c


def bars(table, ax):
    cols = [c["name"] for c in table["columns"]]
    rows = table["rows"]
    width = 0.8 / max(len(rows), 1)
    peer_colors = iter(plt.cm.tab10.colors[1:])
    paper_colors = iter(["#c8c8c8", "#a0a0a0", "#e0e0e0", "#888888", "#b4b4b4", "#d4d4d4"] * 2)
    for i, row in enumerate(rows):
        xs, ys, lo, hi = [], [], [], []
        for j, c in enumerate(row["cells"]):
            if c is None:
                continue
            xs.append(j + (i - (len(rows) - 1) / 2) * width)
            ys.append(c["median"])
            lo.append(c["median"] - c["min"])
            hi.append(c["max"] - c["median"])
        if not xs:
            continue
        kind = row["kind"]
        color = {"warden": COLORS["warden"], "paper": None}.get(kind) or (
            next(paper_colors) if kind == "paper" else next(peer_colors))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=row["system"], color=color,
               hatch="//" if kind == "paper" else None, edgecolor="#444444", linewidth=0.4)
    ax.set_xticks(range(len(cols)))
    units = {c["unit"] for c in table["columns"]}
    ax.set_xticklabels([f"{c['name']}\n({c['unit']})" if len(units) > 1 else c["name"]
                        for c in table["columns"]], fontsize=8)
    if len(units) == 1:
        ax.set_ylabel(units.pop())
    vals = [c["median"] for c in figures(table)]
    if vals and max(vals) / min(vals) > 100:
        ax.set_yscale("log")


def lines(table, ax):
    xs = [float(c["name"]) for c in table["columns"]]
    for row in table["rows"]:
        pts = [(x, c) for x, c in zip(xs, row["cells"]) if c is not None]
        if not pts:
            continue
        style = "o-" if row["kind"] == "warden" else "s--"
        ax.errorbar([p[0] for p in pts], [p[1]["median"] for p in pts],
                    yerr=[[p[1]["median"] - p[1]["min"] for p in pts],
                          [p[1]["max"] - p[1]["median"] for p in pts]],
                    fmt=style, capsize=2, label=row["system"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel("N copies")
    ax.set_ylabel(table["columns"][0]["unit"])


def main():
    results, outdir = sys.argv[1], sys.argv[2]
    with open(results) as f:
        run = json.load(f)
    os.makedirs(outdir, exist_ok=True)
    for table in run["tables"]:
        fig, ax = plt.subplots(figsize=(9, 4.8))
        (lines if table["plot"] == "lines" else bars)(table, ax)
        ax.set_title(table["title"], fontsize=10)
        ax.grid(axis="y", alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, table["id"] + ".png"), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    main()
