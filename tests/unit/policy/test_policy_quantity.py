"""Resource quantities as exact decimals, equal to the kubernetes client's own parser
(pure)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

from multigpu_operator.policy.kube.quantity import format_quantity, parse_quantity

QUANTITIES = [
    "0",
    "8",
    "16",
    "500m",
    "1.5",
    ".5",
    "2Ki",
    "128Mi",
    "80Gi",
    "1Ti",
    "1.5Gi",
    "1k",
    "3M",
    "2G",
    "1T",
    "4P",
    "1E",
    "2Ei",
    "100n",
    "250u",
    "1e3",
    "1E3",
    "2.5e-3",
    "+4",
]


@pytest.mark.parametrize("text", QUANTITIES)
def test_the_same_value_as_the_kubernetes_client(text: str) -> None:
    assert parse_quantity(text) == client_parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(8, Decimal(8)), (0.5, Decimal("0.5")), ("16", Decimal(16))],
)
def test_numbers_as_yaml_gives_them(value: object, expected: Decimal) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("text", ["", "Gi", "1.2.3", "1Gb", "one", "1 Gi", "1ki", "1e", True])
def test_not_a_quantity(text: object) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("value", "binary", "text"),
    [
        (Decimal(16), False, "16"),
        (Decimal("0.5"), False, "500m"),
        (Decimal("0.0005"), False, "0.0005"),
        (Decimal(2**40), True, "1Ti"),
        (Decimal(80 * 2**30), True, "80Gi"),
        (Decimal(1500), True, "1500"),
        (Decimal(2048), False, "2048"),
        (Decimal(0), True, "0"),
    ],
)
def test_format(value: Decimal, binary: bool, text: str) -> None:
    assert format_quantity(value, binary=binary) == text
