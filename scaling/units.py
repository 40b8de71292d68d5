"""Parse figures with units as the sources print them ("2.8 GHz", "820 GiB/s", "3.2 Tbps").

Hardware files keep every figure in the unit its source uses, so the comment beside it can be
checked against the document at a glance; this module turns them into SI base units (Hz, bytes,
bytes per second, FLOP/s, watts).
"""

import re

_DECIMAL = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}

#: kind -> {unit spelling: factor to the base unit}
UNITS = {
    "frequency": {f"{p}Hz": f for p, f in _DECIMAL.items() if p in ("", "M", "G")},
    "bytes": {
        **{f"{p}B": f for p, f in _DECIMAL.items() if p != "P"},
        **{f"{p}B": f for p, f in _BINARY.items()},
    },
    "bandwidth": {
        **{f"{p}B/s": f for p, f in _DECIMAL.items() if p != "P"},
        **{f"{p}B/s": f for p, f in _BINARY.items()},
        **{f"{p}bps": f / 8 for p, f in _DECIMAL.items() if p != "P"},
    },
    "flops": {f"{p}FLOPS": f for p, f in _DECIMAL.items() if p in ("G", "T", "P")}
    | {f"{p}OPS": f for p, f in _DECIMAL.items() if p in ("G", "T", "P")},
    "power": {"W": 1.0, "kW": 1e3},
}

_FIGURE = re.compile(r"^\s*([0-9][0-9_,]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]+)\s*$")


def parse_quantity(text, kind):
    """Convert ``"<number> <unit>"`` to a float in the base unit of ``kind``.

    Parameters
    ----------
    text : str
        For example ``"2.4 GHz"``, ``"96 GiB"``, ``"2.9 TB/s"``, ``"800 Gbps"`` (bits per second,
        converted to bytes per second), ``"4 PFLOPS"``, ``"300 W"``.
    kind : str
        One of the keys of :data:`UNITS`: ``frequency`` (Hz), ``bytes``, ``bandwidth`` (bytes/s),
        ``flops`` (FLOP/s; ``OPS`` spellings count the same), ``power`` (W).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        With a message naming the allowed units when the text is not a number and one of them.
    """
    allowed = UNITS[kind]
    match = _FIGURE.match(text) if isinstance(text, str) else None
    if not match or match.group(2) not in allowed:
        raise ValueError(
            f"{text!r} is not a {kind} figure; allowed: '<number> <unit>' with unit one of "
            + ", ".join(allowed)
        )
    return float(match.group(1).replace(",", "").replace("_", "")) * allowed[match.group(2)]


def half_unit(text, kind):
    """Half a unit in the last written digit of a figure, in base units (its rounding margin).

    ``"92 TFLOPS"`` -> 0.5e12, ``"2.9 TB/s"`` -> 0.05e12: a value within this margin of the
    figure equals it at the precision it was published with.
    """
    number = _FIGURE.match(text).group(1).replace(",", "").replace("_", "")
    decimals = len(number.split(".")[1]) if "." in number and "e" not in number.lower() else 0
    return 0.5 * 10**-decimals * parse_quantity("1 " + _FIGURE.match(text).group(2), kind)
