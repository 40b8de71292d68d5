"""GTKWave translate filter process: show float operand and FP32 bit patterns as numbers.

GTKWave's *Translate Filter Process* protocol: GTKWave starts the program once, writes one
value per line on its standard input, as the trace's data format prints it (hex here), and
reads exactly one line back per value on the program's standard output; the program must
flush after each line or GTKWave hangs. The save files that :mod:`systolica.sim.waves.gtkwave`
generates attach this filter to every float operand lane (BF16, FP16, FP8 e4m3 / e5m2 / e3m4
/ e4m3fn) and FP32 lane, through a small launcher script per kind (GTKWave runs a path,
without arguments).

Run as ``python gtkwave_filter.py KIND`` with KIND one of :data:`WIDTHS`. The kinds of
the tile's own types use the standard library alone, so GTKWave starts them quickly; the MX
kinds (:data:`X4`, ``e8m0``) import ``systolica.golden.mx`` (numpy, ml_dtypes) once at start,
to split x4 words by its ``unpack_x4`` and to decode elements and scales with ml_dtypes.

MX kinds: an x4 word (NeuronCore-v4's ``nc_matmul_mx`` operand lane) shows its four elements
lane 0 first (bits 7..0 of an FP8 word, 3..0 of an MXFP4 one), separated by `` | ``:
``x4-e4m3fn`` and ``x4-e5m2`` (32-bit words, each element as its FP8 kind below),
``x4-e2m1`` (MXFP4: 16-bit words of four e2m1 values, 0 to 6, no Inf or NaN) and ``x4``
(type unknown: the four bytes in hex). ``e8m0`` shows a block scale as its value ``2^e``
(``2^-127`` .. ``2^127``) and ``NaN`` for 0xFF.

Output: the shortest decimal that reads back to the same value of the lane's type (``1.5``,
``-0.000122``, ``3.39e+38``), ``-0`` for negative zero, ``+Inf``/``-Inf``, ``NaN`` for the
canonical quiet NaN (``0x7FC0`` / ``0x7FC00000``) and ``NaN(0x...)`` for any other NaN
(every NaN of an FP16 or FP8 type, whose NaNs the tile does not produce). A
value with X or Z bits, or anything that is not hex, is echoed back unchanged.
"""

import math
import struct
import sys

#: Fields of the narrow float kinds: (exponent bits, fraction bits, bias, has Inf); the same
#: as ``systolica.golden.formats.FORMATS`` (a unit test compares them).
NARROW = {"fp16": (5, 10, 15, True), "e4m3": (4, 3, 7, True), "e5m2": (5, 2, 15, True),
          "e3m4": (3, 4, 3, True), "e4m3fn": (4, 3, 7, False)}
#: The x4-word kinds: bits per word (FP8 words 32, MXFP4 16), and each one's element type
#: (a short name of ``systolica.golden.mx.MX_TYPES``; a unit test compares them), or None
#: for ``x4``, the bytes in hex.
X4 = {"x4-e4m3fn": (32, "e4m3fn"), "x4-e5m2": (32, "e5m2"), "x4-e2m1": (16, "e2m1"),
      "x4": (32, None)}
#: Bits per kind of lane.
WIDTHS = {"bf16": 16, "fp32": 32, **{k: 1 + e + m for k, (e, m, _, _) in NARROW.items()},
          **{k: bits for k, (bits, _) in X4.items()}, "e8m0": 8}
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


def _narrow(bits, kind):
    """(value, gap) of a narrow-float bit pattern: its value (float; NaN, +-Inf) and the
    distance to its neighbours (any decimal closer than half of it reads back to it)."""
    ebits, mbits, bias, has_inf = NARROW[kind]
    sign = -1.0 if bits >> (ebits + mbits) else 1.0
    e, f = (bits >> mbits) & ((1 << ebits) - 1), bits & ((1 << mbits) - 1)
    top = (1 << ebits) - 1
    if e == top and (f if has_inf else f == (1 << mbits) - 1):
        return math.nan, 0.0
    if e == top and has_inf:
        return sign * math.inf, 0.0
    scale = max(e, 1) - bias - mbits
    # At the bottom of a binade (fraction 0) the neighbour below is half as far.
    gap = math.ldexp(1.0, scale - 1 if e > 1 and f == 0 else scale)
    return sign * math.ldexp(f | (1 << mbits) if e else f, scale), gap


def decode(text, kind):
    """Return the decimal rendering of one hex value of a ``kind`` lane (str).

    Parameters
    ----------
    text : str
        The value as GTKWave writes it: hex digits (upper or lower case), possibly with X or Z
        digits. Longer values keep their low ``WIDTHS[kind]`` bits.
    kind : str
        A key of :data:`WIDTHS`: ``"bf16"``, ``"fp32"``, ``"fp16"``, ``"e4m3"``, ...

    Raises
    ------
    ValueError
        If ``kind`` is not a key of :data:`WIDTHS`.
    """
    if kind not in WIDTHS:
        raise ValueError(f"kind must be one of {', '.join(WIDTHS)}, not {kind!r}")
    value_text = text.strip()
    try:
        bits = int(value_text, 16)
    except ValueError:
        return value_text
    width = WIDTHS[kind]
    bits &= (1 << width) - 1
    if kind in X4 or kind == "e8m0":
        return _decode_mx(bits, kind)
    gap = None
    if kind in NARROW:
        value, gap = _narrow(bits, kind)
    else:
        value = _fp32_from_bits(bits << 16 if kind == "bf16" else bits)
    if value != value:
        if bits == CANONICAL_NAN.get(kind):
            return "NaN"
        return f"NaN(0x{bits:0{(width + 3) // 4}X})"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if bits >> (width - 1) else "0"
    if gap is not None and value == int(value):
        return str(int(value))          # FP16 / FP8 integers exactly (240, 448, 57344)
    for digits in range(1, 10):
        short = f"{value:.{digits}g}"
        if gap is not None:
            if abs(float(short) - value) < gap / 2:
                return short
        elif (_bf16_bits if kind == "bf16" else _fp32_bits)(float(short)) == bits:
            return short
    return repr(value)  # not reached: 9 significant digits always read back for FP32


def _decode_mx(bits, kind):
    """An x4 word's four elements, or an E8M0 scale, of ``bits`` (int) as text."""
    import math

    import numpy as np

    from systolica.golden import mx

    if kind == "e8m0":
        value = float(np.array([bits], np.uint8).view(mx.E8M0)[0])
        return "NaN" if value != value else f"2^{math.frexp(value)[1] - 1}"
    width, element = X4[kind]
    types = {name: dtype for dtype, (name, _, _) in mx.MX_TYPES.items()}
    words = np.array([bits], np.uint16 if width == 16 else np.uint32)
    if element is None:   # the bytes of an FP8 word, through the same split
        codes = mx.unpack_x4(words, types["e4m3fn"])[0].view(np.uint8)
        return " | ".join(f"{int(code):02X}" for code in codes)
    values = mx.unpack_x4(words, types[element])[0]
    if element in NARROW:
        return " | ".join(decode(f"{int(code):02X}", element) for code in values.view(np.uint8))
    # e2m1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, every one finite and short
    shown = []
    for value in values.astype(np.float64):
        if value == 0:
            shown.append("-0" if math.copysign(1.0, value) < 0 else "0")
        else:
            shown.append(str(int(value)) if value == int(value) else f"{value:g}")
    return " | ".join(shown)


def main(argv=None, stdin=None, stdout=None):
    """Filter ``stdin`` to ``stdout`` line by line until end of input; returns 0.

    Exits with status 2 and a one-line message if the argument is not a kind.
    """
    argv = sys.argv[1:] if argv is None else argv
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    if len(argv) != 1 or argv[0] not in WIDTHS:
        print(f"usage: gtkwave_filter.py {'|'.join(WIDTHS)} (reads hex values, one a line)",
              file=sys.stderr)
        return 2
    for line in stdin:
        stdout.write(decode(line, argv[0]) + "\n")
        stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
