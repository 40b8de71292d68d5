"""The activation functions' error against float64, in ULP of float32, on 2,000,001 points
of [-20, 20] (positive points for log and rsqrt): ``python -m systolica.nki.accuracy``.
docs/nki.md, "Numerics", quotes its output."""

import numpy as np

from ._ops import ACTIVATIONS

REFERENCES = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "silu": lambda v: v / (1 + np.exp(-v)),
    "rsqrt": lambda v: 1 / np.sqrt(v), "sqrt": np.sqrt,
}


def max_ulp(name, points=2_000_001):
    """Largest |model - float64| of function ``name`` in ULP of the float32 result."""
    x = np.linspace(-20, 20, points, dtype=np.float32)
    if name in ("log", "rsqrt", "sqrt"):
        x = x[x > 0]
    got = ACTIVATIONS[name](x).astype(np.float64)
    ref = REFERENCES[name](x.astype(np.float64))
    ok = np.isfinite(ref) & (np.abs(ref) > 1e-30)
    spacing = np.spacing(np.abs(ref[ok]).astype(np.float32)).astype(np.float64)
    return float(np.max(np.abs(got[ok] - ref[ok]) / spacing))


if __name__ == "__main__":
    for fn in REFERENCES:
        print(f"{fn:8s} {max_ulp(fn):.2f} ULP")
