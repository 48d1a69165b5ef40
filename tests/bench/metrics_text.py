"""What the benchmarks read from /metrics texts (the operator's, the API server's): how
much a series grew between two scrapes, by the labels asked for. Parsed with
prometheus_client's own parser."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.parser import text_string_to_metric_families


def growth(before: str, after: str, name: str, by: Sequence[str] = ()) -> dict[str, float]:
    """How much the samples named `name` grew from `before` to `after`, summed by the
    values of the labels `by`, joined by spaces ("" when `by` is empty); only those that
    grew."""
    grown: dict[str, float] = {}
    for text, sign in ((after, 1), (before, -1)):
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    key = " ".join(sample.labels.get(label, "") for label in by)
                    grown[key] = grown.get(key, 0.0) + sign * sample.value
    return {k: v for k, v in grown.items() if v}


def mean_growth(
    before: str, after: str, histogram: str, by: Sequence[str] = ()
) -> dict[str, float]:
    """A histogram's mean over the observations made between the two scrapes, by `by`."""
    sums = growth(before, after, f"{histogram}_sum", by)
    counts = growth(before, after, f"{histogram}_count", by)
    return {k: sums.get(k, 0.0) / n for k, n in counts.items()}
