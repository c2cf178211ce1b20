"""The ufunc of NumPy's array API with each scalar op's meaning (``munet/ops/_scalar.py``), by name,
for the backends whose arrays speak that API: the cpu (NumPy) renders formulas with them, and cuda
evaluates complex formulas with CuPy's ufuncs of the same names. Scalar ops that are not one ufunc
(integer division with PyTorch's checks, ``frexp``'s two parts, the float64 special functions) are
each backend's own."""

UFUNC_NAMES = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "true_divide", "pow": "power",
    "atan2": "arctan2", "hypot": "hypot", "copysign": "copysign",
    "maximum": "maximum", "minimum": "minimum", "fmax": "fmax", "fmin": "fmin",
    "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal", "eq": "equal", "ne": "not_equal",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor",
    "logical_not": "logical_not",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor", "bitwise_not": "invert",
    "shift_left": "left_shift", "shift_right": "right_shift",
    "neg": "negative", "abs": "absolute",
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2", "log10": "log10",
    "log1p": "log1p", "sqrt": "sqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
    "floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
    "signbit": "signbit", "isnan": "isnan", "isinf": "isinf", "nextafter": "nextafter",
}  # fmt: skip
