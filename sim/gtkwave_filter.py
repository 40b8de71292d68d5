"""GTKWave translate filter process: show BF16 and FP32 bit patterns as numbers.

GTKWave's *Translate Filter Process* protocol: GTKWave starts the program once, writes one
value per line on its standard input, as the trace's data format prints it (hex here), and
reads exactly one line back per value on the program's standard output; the program must
flush after each line or GTKWave hangs. The save files that :mod:`systolica.sim.waves`
generates attach this filter to every BF16 and FP32 lane, through a small launcher script
per kind (GTKWave runs a path, without arguments).

Run as ``python gtkwave_filter.py bf16`` or ``python gtkwave_filter.py fp32``. The file uses
the standard library alone, so GTKWave starts it quickly and it does not import the rest of
Systolica.

Output: the shortest decimal that reads back to the same BF16/FP32 value (``1.5``,
``-0.000122``, ``3.39e+38``), ``-0`` for negative zero, ``+Inf``/``-Inf``, ``NaN`` for the
canonical quiet NaN (``0x7FC0`` / ``0x7FC00000``) and ``NaN(0x...)`` for any other NaN. A
value with X or Z bits, or anything that is not hex, is echoed back unchanged.
"""

import struct
import sys

#: Bits per kind of lane.
WIDTHS = {"bf16": 16, "fp32": 32}
#: The canonical quiet NaN of each kind (what the tile produces for every NaN result).
CANONICAL_NAN = {"bf16": 0x7FC0, "fp32": 0x7FC00000}


def _fp32_from_bits(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _fp32_bits(value):
    """FP32 bits of ``value`` rounded to nearest even (Python floats are FP64)."""
    return struct.unpack("<I", struct.pack("<f", value))[0]


def _bf16_bits(value):
    """BF16 bits of ``value``: FP64 -> FP32 -> BF16, each round-to-nearest-even.

    The double rounding is exact for the short decimals this module prints, which are the only
    values it rounds (it checks that they read back to the original bits).
    """
    bits = _fp32_bits(value)
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


def decode(text, kind):
    """Return the decimal rendering of one hex value of a ``kind`` lane (str).

    Parameters
    ----------
    text : str
        The value as GTKWave writes it: hex digits (upper or lower case), possibly with X or Z
        digits. Longer values keep their low ``WIDTHS[kind]`` bits.
    kind : {"bf16", "fp32"}

    Raises
    ------
    ValueError
        If ``kind`` is not ``"bf16"`` or ``"fp32"``.
    """
    if kind not in WIDTHS:
        raise ValueError(f"kind must be 'bf16' or 'fp32', not {kind!r}")
    value_text = text.strip()
    try:
        bits = int(value_text, 16)
    except ValueError:
        return value_text
    width = WIDTHS[kind]
    bits &= (1 << width) - 1
    fp32 = bits << 16 if kind == "bf16" else bits
    value = _fp32_from_bits(fp32)
    if value != value:
        return "NaN" if bits == CANONICAL_NAN[kind] else f"NaN(0x{bits:0{width // 4}X})"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if bits >> (width - 1) else "0"
    round_trip = _bf16_bits if kind == "bf16" else _fp32_bits
    for digits in range(1, 10):
        short = f"{value:.{digits}g}"
        if round_trip(float(short)) == bits:
            return short
    return repr(value)  # not reached: 9 significant digits always read back for FP32


def main(argv=None, stdin=None, stdout=None):
    """Filter ``stdin`` to ``stdout`` line by line until end of input; returns 0.

    Exits with status 2 and a one-line message if the argument is not ``bf16`` or ``fp32``.
    """
    argv = sys.argv[1:] if argv is None else argv
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if len(argv) != 1 or argv[0] not in WIDTHS:
        print("usage: gtkwave_filter.py bf16|fp32 (reads hex values, one a line)",
              file=sys.stderr)
        return 2
    for line in stdin:
        stdout.write(decode(line, argv[0]) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
