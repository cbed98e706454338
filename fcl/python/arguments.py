"""Python values as an entry point's arguments: checked against the FCL parameter types, each
mismatch a TypeError or ValueError that names the function and the parameter.

Arrays must have the parameter's dtype exactly (int32, float64, bool): converting an int64 array
behind the caller's back would copy it and could change its values. Python sequences and
scalars are converted when every value fits.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from fcl import records
from fcl.il import ir
from fcl.il.ranges import INT_MAX

DTYPES: dict[str, np.dtype] = {kind: np.dtype(t) for kind, t in ir.NUMPY_TYPES.items()}


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str      # int, double or bool; or a type variable, as `'a`
    array: bool    # an array of `kind` rather than one
    sequence: bool = False  # a sequence of `kind`s (fcl.runtime.streams), streamed from the host
    # An array of records: its fields' base types, nested as the pairs are (`kind` shows them).
    record: object = None

    @property
    def polymorphic(self) -> bool:
        return self.record is None and self.kind.startswith("'")

    def record_dtypes(self):
        """The numpy dtypes of an array of records' fields, nested as the pairs are."""
        return _nested(self.record, lambda kind: DTYPES[kind].type)

    def __str__(self) -> str:
        if self.sequence:
            return f"Seq {self.kind}"
        return f"[{self.kind}]" if self.array else self.kind


def _nested(shape, leaf):
    return (_nested(shape[0], leaf), _nested(shape[1], leaf)) if isinstance(shape, tuple) \
        else leaf(shape)


def argument(function: str, param: Parameter, value) -> tuple[object, str]:
    """A Python value for `param` of `function` as the numpy value the back ends take (a 1-D
    array of the parameter's dtype, or a numpy scalar), with its FCL kind (int, double or bool:
    what a type variable stands for here); or a TypeError/ValueError naming the parameter. A
    pyopencl array stays one (fcl.python.opencl uses it in place)."""
    where = f"{function}: parameter `{param.name}` is {param}"
    if param.sequence:
        return _sequence(where, param, value)
    if param.record is not None:
        return _records(where, param, value), param.kind
    kind = _kind_of(where, param, value) if param.polymorphic else param.kind
    return _argument(where, param, kind, value), kind


def _records(where: str, param: Parameter, value) -> tuple:
    """An array of records as its fields' arrays, in field order (fcl.records): from a numpy
    structured array (its fields in order, nested or not) or a tuple of arrays, flat or nested
    as the pairs are."""
    kinds = records.leaves(param.record, param.record)
    if isinstance(value, np.ndarray) and value.dtype.names is not None:
        fields = _structured_fields(value)
        if len(fields) != len(kinds):
            raise TypeError(f"{where}, {len(kinds)} fields; got a structured array of "
                            f"{len(fields)}: {', '.join(str(f.dtype) for f in fields)}")
    elif isinstance(value, tuple):
        fields = _flattened(value, param.record) if len(value) != len(kinds) else list(value)
        if len(fields) != len(kinds):
            raise TypeError(f"{where}: a tuple of {len(kinds)} arrays (or nested as the pairs "
                            f"are); got {len(value)} items")
    else:
        raise TypeError(f"{where}: a structured array of {len(kinds)} fields, or a tuple of "
                        f"{len(kinds)} arrays; got {type(value).__name__}")
    arrays = tuple(_argument(f"{where}, field {k + 1}", Parameter(param.name, kind, True), kind,
                             field) for k, (kind, field) in enumerate(zip(kinds, fields)))
    lengths = {len(a) for a in arrays if not is_device_array(a)} | \
        {a.size for a in arrays if is_device_array(a)}
    if len(lengths) > 1:
        raise ValueError(f"{where}; its fields have different lengths: "
                         f"{', '.join(str(len(a)) for a in arrays)}")
    return arrays


def _structured_fields(value: np.ndarray) -> list:
    found: list[np.ndarray] = []
    for name in value.dtype.names or ():
        field = value[name]
        found += _structured_fields(field) if field.dtype.names is not None else [field]
    return found


def _flattened(value, shape) -> list:
    if isinstance(shape, tuple) and isinstance(value, tuple) and len(value) == 2:
        return _flattened(value[0], shape[0]) + _flattened(value[1], shape[1])
    return [value]


def _sequence(where: str, param: Parameter, value) -> tuple[object, str]:
    """A sequence argument: a 1-D numpy array (a memmap is read as chunks need it), a Python
    sequence of values, or an iterable of 1-D arrays (drawn from as chunks need them; each is
    checked when it is drawn)."""
    if is_device_array(value):
        raise TypeError(f"{where}, streamed from the host; got a pyopencl array (pass "
                        "`.get()`, or make the parameter an array)")
    if isinstance(value, (np.ndarray, list, tuple, range)):
        array_param = Parameter(param.name, param.kind, True)
        kind = _kind_of(where, array_param, value) if param.polymorphic else param.kind
        if isinstance(value, np.ndarray):
            if value.dtype != DTYPES[kind] or value.ndim != 1:
                raise TypeError(f"{where}, a 1-D array of {DTYPES[kind]}; got an array of "
                                f"{value.dtype} with shape {value.shape}")
            return value, kind
        return _argument(where, array_param, kind, value), kind
    try:
        pieces = iter(value)
    except TypeError:
        raise TypeError(f"{where}: a 1-D array, or an iterable of them; got "
                        f"{type(value).__name__}") from None
    if not param.polymorphic:
        return pieces, param.kind
    first = next(pieces, None)  # the first piece says what a type variable stands for
    if first is None:
        raise TypeError(f"{where}; an empty iterator does not say what {param.kind} is (give "
                        "the function a signature with a concrete type)")
    kind = _kind_of(where, Parameter(param.name, param.kind, True), first)
    return itertools.chain([first], pieces), kind


def _kind_of(where: str, param: Parameter, value) -> str:
    """The FCL kind a polymorphic parameter takes from its argument's dtype."""
    if param.array and (isinstance(value, np.ndarray) or is_device_array(value)):
        dtype = value.dtype
    elif param.array and isinstance(value, (list, tuple, range)):
        dtype = np.asarray(value).dtype
        dtype = np.dtype(np.int32) if dtype.kind == "i" else dtype
    else:
        dtype = np.asarray(value).dtype if isinstance(value, (bool, int, float, np.generic)) \
            else None
        dtype = np.dtype(np.int32) if dtype is not None and dtype.kind == "i" else dtype
    for kind, known in DTYPES.items():
        if dtype == known:
            return kind
    what = f"{type(value).__name__}" if dtype is None else f"{dtype}"
    raise TypeError(f"{where}, {param.kind} being int, double, float or bool (int32, float64, "
                    f"float32 or bool); got {what}")


def _argument(where: str, param: Parameter, kind: str, value):
    dtype = DTYPES[kind]
    if param.array:
        if is_device_array(value):
            if value.dtype != dtype or value.ndim != 1:
                raise TypeError(f"{where}, a 1-D array of {dtype}; got a pyopencl array of "
                                f"{value.dtype} with shape {value.shape}")
            return value
        if isinstance(value, np.ndarray):
            if value.dtype != dtype:
                raise TypeError(f"{where}, an array of {dtype}; got an array of {value.dtype} "
                                f"(convert it with .astype(np.{dtype}))")
            array = value
        elif isinstance(value, (list, tuple, range)):
            array = _from_sequence(where, value, dtype)
        else:
            raise TypeError(f"{where}, an array of {dtype}; got {type(value).__name__}")
        if array.ndim != 1:
            raise ValueError(f"{where}, a 1-D array; got shape {array.shape}")
        if len(array) > INT_MAX:
            raise ValueError(f"{where}; FCL arrays hold at most {INT_MAX} elements, not "
                             f"{len(array)}")
        return np.ascontiguousarray(array)
    return _scalar(where, kind, value)


def _from_sequence(where: str, value, dtype: np.dtype) -> np.ndarray:
    """A Python sequence as an array of `dtype`, when every element converts exactly."""
    if dtype == np.float64 and isinstance(value, (list, tuple)) \
            and not all(_exact_double(v) for v in value):
        # numpy would round them: [1.0, 2**53 + 1] is already an array of doubles.
        raise ValueError(f"{where}; the sequence holds values that are not exactly doubles")
    found = np.asarray(value)
    if found.size == 0:
        return np.zeros(found.shape, dtype)
    if dtype == np.float32:
        return _floats(where, found)
    fits = {np.dtype(np.bool_): "b", np.dtype(np.int32): "bi", np.dtype(np.float64): "bif"}
    if found.dtype.kind not in fits[dtype] or (dtype == np.int32 and found.dtype.kind == "b"):
        raise TypeError(f"{where}; got a sequence of {found.dtype}")
    array = found.astype(dtype)
    # Back to the sequence's own dtype: comparing across dtypes would convert (an int64 of 2**53
    # + 1 becomes the double 2**53, equal to the converted value).
    if not np.array_equal(array.astype(found.dtype), found):
        what = "that are not exactly doubles" if dtype == np.float64 else \
            f"outside {dtype}'s range"
        raise ValueError(f"{where}; the sequence holds values {what}")
    return array


def _floats(where: str, found: np.ndarray) -> np.ndarray:
    """A sequence of numbers as floats, each rounded to the nearest (as C's `float x = 0.1`)."""
    if found.dtype.kind not in "if":
        raise TypeError(f"{where}; got a sequence of {found.dtype}")
    with np.errstate(over="ignore"):
        array = found.astype(np.float32)
    if np.any(np.isinf(array) & ~np.isinf(found)):
        raise ValueError(f"{where}; the sequence holds values beyond the range of a float")
    return array


def _exact_double(v) -> bool:
    """Whether a sequence's element is no int, or one a double holds exactly."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
        return True
    try:
        return int(float(v)) == int(v)
    except OverflowError:
        return False


def _scalar(where: str, kind: str, value):
    is_bool = isinstance(value, (bool, np.bool_))
    is_int = isinstance(value, (int, np.integer)) and not is_bool
    if kind == "bool":
        if not is_bool:
            raise TypeError(f"{where}; got {type(value).__name__}")
        return np.bool_(value)
    if kind == "int":
        if not is_int:
            raise TypeError(f"{where}; got {type(value).__name__}")
        if not -2**31 <= int(value) < 2**31:
            raise ValueError(f"{where}, a 32-bit int; {value} is out of its range")
        return np.int32(value)
    if not (is_int or isinstance(value, (float, np.floating))):
        raise TypeError(f"{where}; got {type(value).__name__}")
    if kind == "float":  # rounded to the nearest float, as C's `float x = 0.1`
        with np.errstate(over="ignore"):
            single = np.float32(value)
        if np.isinf(single) and not np.isinf(value):
            raise ValueError(f"{where}; {value} is beyond the range of a float")
        return single
    if is_int:  # an int converts when it is exactly a double (as sequences do)
        try:
            converted = np.float64(int(value))
        except OverflowError:
            raise ValueError(f"{where}; {value} is beyond the range of a double") from None
        if int(converted) != int(value):
            raise ValueError(f"{where}; {value} is not exactly a double (the nearest is "
                             f"{int(converted)})")
        return converted
    return np.float64(value)


def is_device_array(value) -> bool:
    module = type(value).__module__
    return module.startswith("pyopencl") and hasattr(value, "base_data")
