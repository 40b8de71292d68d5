"""Export a :class:`~systolica.nki.engines.Profile`: Chrome/Perfetto trace events and a PNG
timeline.

The trace follows the Trace Event Format (Google, "Trace Event Format", the JSON Object
Format): ``{"traceEvents": [...], "displayTimeUnit": "ns"}``; each engine and each DMA queue is
one thread (``tid``) of one process, named by metadata events (``ph: "M"``,
``thread_name``); each instruction is a complete event (``ph: "X"``) with ``ts`` and ``dur`` in
microseconds.
"""

#: Process id of the NeuronCore in the trace.
PID = 1

#: One colour per opcode family (the timeline and its legend).
_COLOURS = {
    "nc_matmul": "#1f77b4", "nc_transpose": "#aec7e8", "activation": "#ff7f0e",
    "tensor_tensor": "#2ca02c", "tensor_scalar": "#98df8a", "tensor_reduce": "#d62728",
    "tensor_copy": "#9467bd", "dma_copy": "#8c564b", "memset": "#e377c2", "iota": "#7f7f7f",
    "reciprocal": "#bcbd22", "affine_select": "#17becf",
}
_OTHER = "#c7c7c7"


def trace_events(profile):
    """The trace-event document of ``profile`` (a JSON-able dict)."""
    tracks = profile.tracks()
    tid = {name: k + 1 for k, name in enumerate(tracks)}
    events = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0,
               "args": {"name": f"{profile.target.core} ({profile.target.name})"}}]
    for name in tracks:
        events.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid[name],
                       "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid[name],
                       "args": {"sort_index": tid[name]}})
    for track, start, end, p in profile.spans():
        events.append({"name": p.opcode, "cat": p.engine, "ph": "X", "pid": PID,
                       "tid": tid[track], "ts": start * 1e6, "dur": (end - start) * 1e6,
                       "args": {"index": p.index, "source": p.source,
                                "ready_us": p.ready * 1e6}})
    return {"traceEvents": events, "displayTimeUnit": "ns"}


def plot_timeline(profile, path, *, title=None):
    """Draw every engine's and DMA queue's busy intervals on one time axis and save a PNG.

    Uses matplotlib's object API (no global backend change).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    tracks = profile.tracks()
    row = {name: k for k, name in enumerate(tracks)}
    bars = {}
    for track, start, end, p in profile.spans():
        bars.setdefault((track, p.opcode), []).append((start * 1e6, max((end - start) * 1e6,
                                                                         1e-6)))
    fig = Figure(figsize=(12, 0.32 * len(tracks) + 1.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    used = set()
    for (track, opcode), spans in bars.items():
        colour = _COLOURS.get(opcode, _OTHER)
        used.add(opcode if opcode in _COLOURS else "other")
        ax.broken_barh(spans, (row[track] - 0.4, 0.8), facecolors=colour, linewidth=0)
    ax.set_yticks(range(len(tracks)), tracks)
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_xlim(0, max(profile.seconds * 1e6, 1e-3))
    busy = ", ".join(f"{e} {v:.0%}" for e, v in profile.engine_busy.items())
    ax.set_title(title or f"{profile.target.name}: {profile.seconds * 1e6:.2f} us; busy {busy}",
                 fontsize=9)
    handles = [Patch(color=_COLOURS.get(o, _OTHER), label=o) for o in sorted(used)]
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
