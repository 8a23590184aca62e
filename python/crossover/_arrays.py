"""Arrays into the engine's layout: float32 C-contiguous samples, int32 labels or float32
targets. Arrays already so are passed through untouched (the engine reads them where they are);
anything else is converted once, and a warning says so (Python shows it once per call site)."""
import warnings

import numpy as np


class ConversionWarning(UserWarning):
    """An array was copied to the layout the engine reads (float32, C-contiguous)."""


def _to_numpy(a, name):
    if hasattr(a, "detach") and hasattr(a, "numpy"):  # a torch.Tensor
        return a.detach().cpu().numpy()
    if hasattr(a, "to_numpy"):  # a pandas DataFrame or Series
        return a.to_numpy()
    if isinstance(a, np.ndarray):
        return a
    try:
        return np.asarray(a)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: not an array ({type(a).__name__}): {e}") from None


def _converted(a, dtype, name, what):
    if a.dtype == dtype and a.flags.c_contiguous:
        return a
    why = []
    if a.dtype != dtype:
        why.append(f"{a.dtype} to {np.dtype(dtype).name}")
    if not a.flags.c_contiguous:
        why.append("to C order")
    warnings.warn(f"{name}: {what} copied once ({', '.join(why)}); pass a C-contiguous "
                  f"{np.dtype(dtype).name} array to train on it in place",
                  ConversionWarning, stacklevel=4)
    return np.ascontiguousarray(a, dtype=dtype)


def samples(x, name):
    """Samples as a float32 C-contiguous array of at least two dimensions."""
    a = _to_numpy(x, name)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise TypeError(f"{name}: an array of numbers expected (got dtype {a.dtype})")
    if a.ndim == 1:
        raise ValueError(f"{name}: shape {a.shape}: one dimension (expected (samples, features); "
                         "a single feature is x.reshape(-1, 1))")
    return _converted(a, np.float32, name, "samples")


def labels(y, classes, name):
    """Class labels as int32 (targets as float32 for a regression, classes 0), one per sample."""
    a = _to_numpy(y, name)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise TypeError(f"{name}: an array of numbers expected (got dtype {a.dtype})")
    if classes == 0:
        return _converted(a, np.float32, name, "targets")
    if a.dtype != np.int32:
        if not np.issubdtype(a.dtype, np.integer) and a.dtype != bool:
            finite = a[np.isfinite(a)] if np.issubdtype(a.dtype, np.floating) else a
            if finite.size != a.size or np.any(finite != np.floor(finite)):
                bad = int(np.flatnonzero(~np.isfinite(a) | (a != np.floor(a)))[0]) \
                    if np.issubdtype(a.dtype, np.floating) else 0
                raise ValueError(f"{name}: sample {bad} has label {a.flat[bad]!r} (expected an "
                                 f"integer class in [0, {classes - 1}])")
        if a.size and (a.min() < 0 or a.max() >= classes):
            bad = int(np.flatnonzero((a < 0) | (a >= classes))[0])
            raise ValueError(f"{name}: sample {bad} has label {a.flat[bad]} (expected a class in "
                             f"[0, {classes - 1}]: the model has {classes} classes)")
    return _converted(a, np.int32, name, "labels")
