"""Python values as TOML text: fit()'s training settings become a spec's [train] table, which
the engine reads with the spec's own checks (an error names the key, as it does in a file)."""
import json
import math
import numbers


def value(v, name):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        text = repr(f)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return inline_table(v, name)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(e, f"{name}[{i}]") for i, e in enumerate(v)) + "]"
    raise TypeError(f"{name}: {type(v).__name__} is not a setting (expected a number, a bool, a "
                    "str, a list or a dict)")


def key(k, name):
    if not isinstance(k, str):
        raise TypeError(f"{name}: key {k!r} is not a str")
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def inline_table(d, name):
    return "{ " + ", ".join(f"{key(k, name)} = {value(v, f'{name}.{k}')}"
                            for k, v in d.items()) + " }"


def train_table(settings):
    """A [train] table of the settings that are not None, or "" where there are none."""
    lines = [f"{key(k, 'train')} = {value(v, k)}" for k, v in settings.items() if v is not None]
    return "[train]\n" + "\n".join(lines) + "\n" if lines else ""
