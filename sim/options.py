"""Command-line pieces shared by the workloads' parsers (no workload imports: the random
workload's :mod:`systolica.cli.simulate` and the MiniLM workload's
:mod:`systolica.cli.minilm` both use these, and neither imports the other's parser)."""

import argparse
import os
import re
import sys

from systolica.hdl.config import TileConfig
from systolica.sim.builder.toolchain import FOLDER_ALLOWED, SIMULATORS, folder_problem

#: The workloads ``python -m systolica.sim`` runs.
WORKLOADS = ("minilm", "random")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr (``prog: error: message; see
    --help``) with exit status 2, without the usage block. Options must be given in full:
    an abbreviation is refused (``--dtype`` was silently taken for ``--dtypes``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        if kwargs.get("description"):
            kwargs["description"] = plain_text(kwargs["description"])
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


_ROLE = re.compile(r":[a-z]+:`(~?)([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(doc):
    """``doc`` (str, a module docstring written in reST) as a terminal reads it: a role such
    as ``:data:`VARIANTS``` becomes its target (``~`` keeps the last dotted name, as Sphinx
    shows it), a double-backquoted literal loses its quotes. ``--help`` descriptions taken
    from ``__doc__`` pass through it."""
    def role(match):
        return match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)

    return _LITERAL.sub(r"\1", _ROLE.sub(role, doc))


def exit_with(main):
    """Run a ``python -m`` entry point's ``main()`` (returning its exit status) and exit with
    that status; Ctrl-C prints one line, ``interrupted``, and exits 130 (128 + SIGINT), as
    the ``systolica`` command does, instead of the traceback of wherever the run was."""
    try:
        status = main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    sys.exit(status)


def env(name, default):
    """``$name`` if set and non-empty, else ``default`` (str)."""
    value = os.environ.get(name)
    return default if value in (None, "") else value


def env_types(default=None):
    """``$TYPES`` as it is set, even empty, else ``default``: unlike :func:`env`, an empty
    ``TYPES=`` is passed on, for :class:`~systolica.hdl.config.TileConfig` (the one place
    type sets are checked) to refuse in one line rather than be taken as "the default"."""
    return os.environ.get("TYPES", default)


#: The values a yes/no make variable (WAVES, FTZ) may take, any case; unset or empty is no.
FLAG_VALUES = {"1": True, "yes": True, "true": True, "on": True,
               "0": False, "no": False, "false": False, "off": False, "": False}


def env_flag(name):
    """``$name`` read as a yes/no switch (bool): ``1``/``yes``/``true``/``on`` or
    ``0``/``no``/``false``/``off``, any case; unset or empty is False.

    Any other value (``WAVES=2``, ``FTZ=maybe``) is a bad argument: one line on stderr that
    names the variable and the values allowed, then exit status 2 (``SystemExit``), as for a
    bad option; command-line tools only.
    """
    text = os.environ.get(name, "")
    value = FLAG_VALUES.get(text.strip().lower())
    if value is None:
        print(f"systolica: error: {name} must be 1 or 0 (or yes/no, true/false, on/off), "
              f"not {text!r}",
              file=sys.stderr)
        raise SystemExit(2)
    return value


def integer(minimum, env_name=None):
    """argparse type: an integer >= ``minimum``; ``env_name`` names the make variable, if
    any (it appears in the error)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            where = f" ({env_name}=... or the option)" if env_name else ""
            raise argparse.ArgumentTypeError(f"must be {kind}{where}, not {text!r}")
        return value
    return parse


def folder(text):
    """argparse type for ``--build-dir``: a writable folder, or a path that can become one
    (:func:`~systolica.sim.builder.toolchain.folder_problem`); returns ``text`` (str).
    Checked while parsing, so a bad path is a one-line error naming it and why, before
    anything is built."""
    from pathlib import Path

    problem = folder_problem(Path(text).expanduser().resolve())
    if problem is not None:
        raise argparse.ArgumentTypeError(
            f"{text!r} cannot be a build folder: {problem}; allowed: {FOLDER_ALLOWED}")
    return text


def size_value(text):
    """argparse type of ``--rows``/``--cols``: the text as an int when it is one, else as
    it is; the value is checked by :class:`~systolica.hdl.config.TileConfig` (the one place
    sizes are validated), through :func:`resolve_config`."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return text


def parse_tile_sizes(text):
    """``"ROWSxCOLS[,ROWSxCOLS...]"`` (``8x8,16x16``) as a tuple of ``(rows, cols)`` pairs
    (ints where the text is one; the values are :class:`~systolica.hdl.config.TileConfig`'s
    to check). Raises ValueError with the syntax otherwise."""
    sizes = tuple(tuple(size_value(v) for v in size.lower().split("x"))
                  for size in text.split(","))
    if not sizes or any(len(size) != 2 for size in sizes):
        raise ValueError(f"must be ROWSxCOLS sizes separated by commas, like 8x8,16x4, not "
                         f"{text!r}")
    return sizes


def tile_sizes(count=None):
    """argparse type: :func:`parse_tile_sizes`; with ``count`` 1, exactly one size,
    returned as a ``(rows, cols)`` pair."""
    def parse(text):
        try:
            sizes = parse_tile_sizes(text)
            if count == 1 and len(sizes) != 1:
                raise ValueError
        except ValueError as error:
            raise argparse.ArgumentTypeError(
                str(error) if count != 1 else
                f"must be one ROWSxCOLS size, like 3x3, not {text!r}"
            ) from None
        return sizes[0] if count == 1 else sizes
    return parse


def add_tile_arguments(p, sizes=None, types_help="what the workload needs"):
    """Add ``--sim``, ``--rows``, ``--cols`` and ``--types`` to parser ``p``, with defaults
    from SIM, ROWS, COLS and TYPES as ``make sim`` passes them (every workload's parser has
    them). ``types_help`` says what the type set defaults to.

    ``sizes`` maps a simulator to its default square tile side (default: 8 for each); when
    it differs between simulators, :func:`resolve_tile` fills ``--rows``/``--cols`` in
    after parsing, from the simulator chosen."""
    sizes = sizes or dict.fromkeys(SIMULATORS, 8)
    text = (str(sizes["verilator"]) if len(set(sizes.values())) == 1 else
            ", ".join(f"{size} on {sim.capitalize()}" for sim, size in sizes.items()))
    p.set_defaults(tile_sizes=sizes)
    p.add_argument("--sim", choices=SIMULATORS, default=env("SIM", "verilator"),
                   help="simulator (default: $SIM or verilator)")
    p.add_argument("--rows", type=size_value, default=env("ROWS", None),
                   help=f"partition rows K of the tile (default: $ROWS or {text})")
    p.add_argument("--cols", type=size_value, default=env("COLS", None),
                   help=f"stationary columns M of the tile (default: $COLS or {text})")
    p.add_argument("--types", default=env_types(),
                   help="the operand types the tile is generated for: int8, bf16, fp16, fp8 "
                        "(e4m3, e5m2, e3m4, e4m3fn), fp8-double-row, fp32 (tf32, fp32: 32-bit "
                        "lanes), mx (MXFP8/MXFP4 matmuls: 32-bit lanes with E8M0 scales) or all "
                        "(every set but fp32 and mx), joined with + "
                        f"or , (default: $TYPES or {types_help})")


def resolve_tile(args):
    """Fill in ``args.rows``/``args.cols`` left unset with the simulator's default size
    (see :func:`add_tile_arguments`); returns ``args``."""
    # An unknown $SIM is reported by the workload's own checks; any size will do until then.
    size = args.tile_sizes.get(args.sim, min(args.tile_sizes.values()))
    args.rows = size if args.rows is None else size_value(args.rows)
    args.cols = size if args.cols is None else size_value(args.cols)
    return args


def resolve_config(p, args, dtypes=(), double_row=False, mx=False):
    """Set ``args.config``: the :class:`~systolica.hdl.config.TileConfig` of ``args.rows``,
    ``args.cols`` and ``args.types`` (TYPES), or, without ``--types``, of the smallest type
    set holding ``dtypes`` (golden short names; FP8 double-row with ``double_row``, the MX
    datapath with ``mx``): what the workload needs. A bad size or type set (an empty one
    too), or a ``--types`` lacking what the run issues, is ``p.error`` with a one-line
    message. Returns ``args``."""
    try:
        if args.types is not None:
            args.config = TileConfig(args.rows, args.cols, args.types)
            lacking = [d for d in dtypes if d not in args.config.dtypes]
            if double_row and not args.config.double_row:
                lacking.append("fp8-double-row")
            if mx and not args.config.mx:
                lacking.append("mx")
            if lacking:
                needed = TileConfig.for_dtypes(1, 1, dtypes, double_row=double_row,
                                               mx=mx).types_name
                p.error(f"--types {args.types} (TYPES) lacks {', '.join(sorted(lacking))}, "
                        f"which this run issues; allowed: a type set holding {needed}"
                        + (" (e.g. all+mx)" if mx else "") + ", or no --types (the run's own "
                        "set)")
        else:
            args.config = TileConfig.for_dtypes(args.rows, args.cols, dtypes,
                                                double_row=double_row, mx=mx)
    except ValueError as error:
        text = str(error)
        where = (" (--types or TYPES)" if "type" in text else
                 " (--rows or ROWS)" if text.startswith("rows ") else
                 " (--cols or COLS)" if text.startswith("cols ") else "")
        p.error(f"{text}{where}")
    return args


def add_json_argument(parser, what):
    """Add ``--json`` to ``parser``: ``what`` (str) goes to stdout as JSON, the text report
    to stderr (see :func:`report_as_json`)."""
    parser.add_argument("--json", action="store_true",
                        help=f"print {what} as JSON on stdout (the text report goes to stderr)")


def report_as_json(args, run):
    """Call ``run()``, which prints a text report and returns ``(status, result)`` with
    ``result`` a JSON-serialisable dict; return ``status``. With ``args.json``, the text goes
    to stderr and ``result`` to stdout as JSON."""
    import contextlib
    import json

    if not args.json:
        return run()[0]
    with contextlib.redirect_stdout(sys.stderr):
        status, result = run()
    print(json.dumps(result, indent=1, default=str))
    return status
