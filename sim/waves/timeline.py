"""Pictures of what the tile did in a program: a timeline PNG and a Perfetto / Chrome trace.

Both show, per command of a :func:`systolica.sim.run_program` run, when the tile accepted it,
when its stationary beats loaded, when its moving beats entered the array and when its result
beats came out: the stamps measured at the tile's ports (:attr:`ProgramResult.stamps`) over
the cycle model's (:attr:`ProgramResult.predicted`; the stationary loads only there, as the
ports do not stamp them). Beats on consecutive cycles are drawn as one bar; a stall is a gap.

The trace is Chrome's JSON Trace Event Format, which the Perfetto UI (ui.perfetto.dev) and
``chrome://tracing`` open: complete events (``"ph": "X"``) for the bars, instant events
(``"ph": "i"``) for the accepts, metadata events naming a process per source (RTL, cycle
model) and a thread per lane. Its time unit is the format's microsecond, used here as one
clock cycle (``ts`` and ``dur`` are whole cycles).
"""

import json
from pathlib import Path

#: The lanes drawn, top to bottom: (key, label, CommandTiming attribute).
LANES = (("accept", "command accepted", "accept"),
         ("load", "stationary beats", "loads"),
         ("issue", "moving beats / READ issue", "issues"),
         ("result", "result beats", "results"))
#: The two sources of stamps: (key, label).
SOURCES = (("measured", "RTL, measured at the tile's ports"),
           ("model", "cycle model (golden.command_schedule)"))


def runs(cycles):
    """Consecutive-cycle runs of ``cycles`` (sorted ints): a list of ``(start, length)``
    pairs, e.g. ``(3, 4, 5, 9)`` -> ``[(3, 3), (9, 1)]``."""
    out = []
    for cycle in cycles:
        if out and cycle == out[-1][0] + out[-1][1]:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((int(cycle), 1))
    return out


def command_names(jobs):
    """One label per command (list of str): ``"matmul 0 [K=8, M=8, N=128]"``,
    ``"READ 3 [N=40]"``; ``jobs`` are the :class:`Matmul` / :class:`Read` objects run."""
    names = []
    for i, job in enumerate(jobs):
        if hasattr(job, "stationary"):
            (k, m), n = job.stationary.shape, job.moving.shape[1]
            names.append(f"matmul {i} [K={k}, M={m}, N={n}]")
        else:
            names.append(f"READ {i} [N={job.n}]")
    return names


def segments(result, jobs):
    """Every bar of the picture: a list of dicts with ``source`` ("measured" or "model"),
    ``lane`` (a key of :data:`LANES`), ``command`` (index), ``name`` (label), ``start`` and
    ``length`` (cycles; an accept has length 1)."""
    names = command_names(jobs)
    out = []
    for source, stamps in (("measured", result.stamps), ("model", result.predicted)):
        for index, timing in enumerate(stamps):
            for lane, _, attr in LANES:
                value = getattr(timing, attr)
                cycles = (value,) if lane == "accept" else value
                for start, length in runs(cycles):
                    out.append({"source": source, "lane": lane, "command": index,
                                "name": names[index], "start": start, "length": length})
    return out


def trace(result, jobs, *, title="systolica run_program"):
    """The run as a Chrome / Perfetto JSON trace (dict; ``json.dump`` it). One process per
    source (pid 1 RTL, pid 2 cycle model), one thread per lane; 1 trace microsecond = 1 clock
    cycle."""
    events = []
    for pid, (_, label) in enumerate(SOURCES, start=1):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"{label} (1 us = 1 clock cycle)"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
        for tid, (_, lane_label, _) in enumerate(LANES, start=1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": lane_label}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
    pids = {source: pid for pid, (source, _) in enumerate(SOURCES, start=1)}
    tids = {lane: tid for tid, (lane, _, _) in enumerate(LANES, start=1)}
    for s in segments(result, jobs):
        common = {"pid": pids[s["source"]], "tid": tids[s["lane"]], "ts": s["start"],
                  "cat": s["lane"], "args": {"command": s["command"], "cycle": s["start"]}}
        if s["lane"] == "accept":
            events.append({"ph": "i", "s": "t", "name": f"{s['name']} accepted", **common})
        else:
            events.append({"ph": "X", "name": s["name"], "dur": s["length"], **common,
                           "args": {**common["args"], "beats": s["length"]}})
    return {"traceEvents": events,
            "otherData": {"title": title, "time_unit": "1 microsecond = 1 clock cycle",
                          "cycles": int(result.cycles),
                          "model_agrees": bool(result.model_agrees())}}


def write_trace(path, result, jobs, *, title="systolica run_program"):
    """Write :func:`trace` to ``path`` as JSON; returns the path (pathlib.Path). Raises
    OSError if it cannot be written."""
    path = Path(path)
    path.write_text(json.dumps(trace(result, jobs, title=title)) + "\n")
    return path


def draw_timeline(path, result, jobs, *, title="systolica run_program"):
    """Draw the run as a PNG timeline at ``path`` (cycles on x; per lane the measured bars
    above the cycle model's, lighter and hatched; one colour per command, numbered on its
    bars); returns the path (pathlib.Path). Raises OSError if it cannot be written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    bars = segments(result, jobs)
    count = len(jobs)
    colours = matplotlib.colormaps["tab10" if count <= 10 else "tab20"]
    rows = [(lane, label, source) for lane, label, _ in LANES for source, _ in SOURCES
            if not (lane == "load" and source == "measured")]
    height = 0.8
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.45 * len(rows)))
    end = max(s["start"] + s["length"] for s in bars)
    for y, (lane, _, source) in enumerate(rows):
        for s in bars:
            if (s["lane"], s["source"]) != (lane, source):
                continue
            colour = colours(s["command"] % colours.N)
            model = source == "model"
            ax.broken_barh([(s["start"], s["length"])], (y - height / 2, height),
                           facecolors=colour, alpha=0.45 if model else 1.0,
                           hatch="//" if model else None, edgecolor="black" if model else colour,
                           linewidth=0.3)
            if s["length"] >= end / 60:
                ax.text(s["start"] + s["length"] / 2, y, str(s["command"]), ha="center",
                        va="center", fontsize=7, color="black")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{label} ({'RTL' if source == 'measured' else 'model'})"
                        for _, label, source in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, end + 1)
    ax.set_xlabel("clock cycle (from the end of reset)")
    agrees = "measured = model, every stamp" if result.model_agrees() else \
        "measured differs from the stall-free model"
    ax.set_title(f"{title}: {count} commands, {result.cycles:,} cycles ({agrees})", fontsize=10)
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    legend = [Patch(facecolor="white", edgecolor="black", label="RTL (measured): solid"),
              Patch(facecolor="white", hatch="//", edgecolor="black",
                    label="cycle model: hatched")]
    if count <= 10:
        legend += [Patch(facecolor=colours(i), label=name)
                   for i, name in enumerate(command_names(jobs))]
    ax.legend(handles=legend, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              borderaxespad=0)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
