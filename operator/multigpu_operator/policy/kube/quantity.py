"""Kubernetes resource quantities ("500m", "2Gi", "16", "1e3") as exact decimals (pure).

The same grammar as apimachinery's resource.Quantity and the kubernetes client's
`kubernetes.utils.quantity.parse_quantity`, which the pure layers cannot use: importing
it loads the whole API client (tests/unit/policy/test_policy_quantity.py holds the two equal).
"""

from __future__ import annotations

import re
from decimal import Decimal

# Powers of ten (SI) and of two (IEC) of each suffix.
_DECIMAL_SUFFIXES = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+)|(?P<binary>[KMGTPE]i)|(?P<decimal>[numkMGTPE]?))$"
)


def parse_quantity(value: object) -> Decimal:
    """The quantity's value; raises ValueError if it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        return number.scaleb(int(match["exponent"]))
    if match["binary"]:
        return number * Decimal(2 ** _BINARY_SUFFIXES[match["binary"]])
    return number.scaleb(_DECIMAL_SUFFIXES[match["decimal"]])


def format_quantity(value: Decimal, *, binary: bool = False) -> str:
    """A short form of `value` for messages: fractions in thousandths ("500m", CPU),
    whole numbers as they are or, with `binary` (bytes), in the largest binary unit
    they are a whole number of ("80Gi")."""
    if value != value.to_integral_value():
        millis = value * 1000
        if millis == millis.to_integral_value():
            return f"{int(millis)}m"
        return str(value.normalize())
    whole = int(value)
    if binary and whole:
        for suffix, power in sorted(_BINARY_SUFFIXES.items(), key=lambda kv: -kv[1]):
            if whole % 2**power == 0:
                return f"{whole // 2**power}{suffix}"
    return str(whole)
