"""The math of the non-tensor engines: ALU operators (VectorE, GpSimd, ScalarE's
``tensor_scalar``), reductions and activation functions, all in float32.

NKI names an operator by passing a function (``nl.add``, ``np.add``, ``nl.exp``...); the
tables here map both the ``nki.language`` functions (registered by name) and the numpy ones
to float32 implementations. numpy's float32 arithmetic rounds each operation once (RNE); its
transcendental functions (exp, log, tanh, sin...) are accurate to a few ULP, which is the
model's approximation of ScalarE's function units (``docs/nki.md``, "Numerics").
"""

import math

import numpy as np

_F = np.float32


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (_F(1) / (_F(1) + np.exp(-x))).astype(np.float32)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x):
    return (_F(0.5) * x * (_F(1) + _erf(x.astype(np.float64) / math.sqrt(2)).astype(_F)))


def _gelu_tanh(x):
    c = _F(math.sqrt(2 / math.pi))
    return _F(0.5) * x * (_F(1) + np.tanh(c * (x + _F(0.044715) * x * x * x)))


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _F(1) / np.sqrt(x)


def _recip(x):
    with np.errstate(divide="ignore"):
        return _F(1) / x


def _softplus(x):
    with np.errstate(over="ignore"):
        return np.logaddexp(_F(0), x).astype(_F)


#: Activation function name -> float32 function (ScalarE).
ACTIVATIONS = {
    "copy": lambda x: x, "identity": lambda x: x, "exp": np.exp, "log": np.log,
    "tanh": np.tanh, "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, _F(0)),
    "gelu": _gelu, "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(_F(1.702) * x),
    "silu": lambda x: x * _sigmoid(x), "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)), "sqrt": np.sqrt, "rsqrt": _rsqrt,
    "reciprocal": _recip, "square": np.square, "abs": np.abs, "sign": np.sign,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "arctan": np.arctan,
    "erf": lambda x: _erf(x.astype(np.float64)).astype(_F), "negative": np.negative,
    "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
}


def _cmp(f):
    return lambda a, b: f(a, b).astype(_F)


def _bits(f):
    return lambda a, b: f(a.astype(np.int64), b.astype(np.int64))


#: Binary operator name -> function of two float32 arrays (bit operators on integers).
ALU = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "fmod": np.fmod,
    "mod": np.mod, "equal": _cmp(np.equal), "not_equal": _cmp(np.not_equal),
    "greater": _cmp(np.greater), "greater_equal": _cmp(np.greater_equal),
    "less": _cmp(np.less), "less_equal": _cmp(np.less_equal),
    "logical_and": _cmp(np.logical_and), "logical_or": _cmp(np.logical_or),
    "logical_xor": _cmp(np.logical_xor), "bitwise_and": _bits(np.bitwise_and),
    "bitwise_or": _bits(np.bitwise_or), "bitwise_xor": _bits(np.bitwise_xor),
    "left_shift": _bits(np.left_shift), "right_shift": _bits(np.right_shift),
    "bypass": lambda a, b: a, "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
}
ALU["max"], ALU["min"] = ALU["maximum"], ALU["minimum"]
BITWISE = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}

#: Reduction name -> numpy reduction (float32, numpy's order: pairwise for add).
REDUCTIONS = {"add": np.add.reduce, "multiply": np.multiply.reduce,
              "maximum": np.maximum.reduce, "minimum": np.minimum.reduce}
for _alias, _name in (("sum", "add"), ("max", "maximum"), ("min", "minimum"),
                      ("prod", "multiply")):
    REDUCTIONS[_alias] = REDUCTIONS[_name]

_NUMPY = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply",
          np.divide: "divide", np.true_divide: "divide", np.maximum: "maximum",
          np.minimum: "minimum", np.power: "power", np.equal: "equal",
          np.not_equal: "not_equal", np.greater: "greater", np.greater_equal: "greater_equal",
          np.less: "less", np.less_equal: "less_equal", np.bitwise_and: "bitwise_and",
          np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor", np.exp: "exp",
          np.log: "log", np.tanh: "tanh", np.sqrt: "sqrt", np.square: "square",
          np.abs: "abs", np.sin: "sin", np.cos: "cos", np.negative: "negative",
          np.max: "maximum", np.min: "minimum", np.sum: "add", np.amax: "maximum",
          np.amin: "minimum", np.prod: "multiply", np.fmod: "fmod", np.mod: "mod",
          np.sign: "sign", np.arctan: "arctan", np.reciprocal: "reciprocal"}


def op_name(op):
    """The table name of an NKI operator argument: an ``nki.language`` function (its
    ``_nki_op`` name), a numpy function, or a name; None if it is none of them."""
    if isinstance(op, str):
        return op
    name = getattr(op, "_nki_op", None)
    if name is not None:
        return name
    try:
        return _NUMPY.get(op)
    except TypeError:
        return None
