"""Which domains a job's pods go to, in rank order (pure).

A job of n alike pods goes to one domain of its level that holds all n now: the one with
the least room left over (the tightest fit keeps large domains for large jobs), ties by
name. If none holds it now, Required waits in the domain with the most room (a busy
cluster), and Preferred takes the fewest domains that hold it now (the largest first,
then the tightest that holds the rest). No domain that could ever hold it (its nodes'
allocatable, running nothing else) means NoDomainFits, said at once, naming the level,
what the job needs and the largest domain. Domains given up after a gang timeout
(`tried`) are not chosen again while another could hold the job.

Pods are pinned in index order: the first `pods` indexes to the first domain, and so
on, so neighbouring ranks share a domain (RANK = index x processes per pod + local rank).
An elastic job that grows keeps its domains and adds pods to the last while it has room
(`grown`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from multigpu_operator.api.placement import Placement, PlacementPolicy, level_name
from multigpu_operator.policy.kube.quantity import format_quantity
from multigpu_operator.policy.placement.domains import Domain

Assignment = tuple[tuple[str, int], ...]  # (domain, pods) in rank order


@dataclass(frozen=True)
class Choice:
    domains: Assignment = ()
    never: str = ""  # why no domain can ever hold the job (NoDomainFits)
    waits: str = ""  # why the chosen domains do not hold it now ("" when they do)
    tried: tuple[str, ...] = ()  # the domains given up, once this choice is made
    note: str = ""  # an elastic job that grew out of its domain (Preferred)


def choose(
    placement: Placement,
    pods: int,
    per_pod: Decimal,
    resource: str,
    domains: Sequence[Domain],
    tried: Sequence[str] = (),
) -> Choice:
    """The domains for a job of `pods` pods asking for `per_pod` of `resource` each."""
    level = level_name(placement.topology_key)
    if not domains:
        return Choice(never=f"no node it may use has the label {placement.topology_key}")
    fitting = [d for d in domains if d.ever >= pods]
    preferred = placement.policy is PlacementPolicy.PREFERRED
    if not fitting and not preferred:
        return Choice(never=_never(level, pods, per_pod, resource, domains))
    kept = tuple(t for t in tried if any(d.name == t for d in domains))
    untried = [d for d in fitting if d.name not in kept]
    # Every domain that could hold it was tried: any of them again, and the tried ones
    # stay recorded, so that the job no longer moves before its gang timeout.
    exhausted = bool(fitting) and not untried
    if exhausted:
        untried = fitting
    skip = () if exhausted else kept
    room = _room(placement.exclusive)
    holds = [d for d in untried if room(d) >= pods]
    if holds:
        best = min(holds, key=lambda d: (room(d), d.name))
        return Choice(((best.name, pods),), tried=kept)
    if preferred:
        spread, left = _fewest([d for d in domains if d.name not in skip], pods, room)
        if not left:
            return Choice(spread, tried=kept)
        if not untried:  # not even spread over every domain now: wait where it could run
            spread, _ = _fewest(domains, pods, lambda d: d.ever)
            total = sum(room(d) for d in domains)
            return Choice(spread, waits=f"the {level}s have room for {total} pods now", tried=kept)
    best = min(untried, key=lambda d: (-room(d), d.name))
    waits = f"no {level} has room for {pods} pods now; waiting in {level} {best.name}"
    return Choice(((best.name, pods),), waits=f"{waits} (room for {room(best)})", tried=kept)


def grown(
    placement: Placement,
    assigned: Assignment,
    pods: int,
    domains: Sequence[Domain],
) -> Choice:
    """An elastic job's domains at `pods` pods: fewer pods leave the last domains first;
    more go to the last domain while it has room (its room counts the job's own pods
    as taken), then Preferred adds the fewest domains that hold the rest and Required
    waits in its domain."""
    have = sum(n for _, n in assigned)
    level = level_name(placement.topology_key)
    if pods <= have:
        kept: list[tuple[str, int]] = []
        for name, n in assigned:
            if pods > 0:
                kept.append((name, min(n, pods)))
            pods -= n
        return Choice(tuple(kept))
    by_name = {d.name: d for d in domains}
    extra = pods - have
    *before, (last, count) = assigned
    room = by_name[last].now if last in by_name else 0
    if extra <= room:
        return Choice((*before, (last, count + extra)))
    stay = (*before, (last, count + room))
    left = extra - room
    if placement.policy is PlacementPolicy.REQUIRED:
        msg = f"{level} {last} has room for {room} more pods now; {left} wait there (Required)"
        return Choice((*before, (last, count + extra)), waits=msg)
    used = {name for name, _ in assigned}
    spread, short = _fewest([d for d in domains if d.name not in used], left, lambda d: d.now)
    if short:  # no room for them elsewhere either: they wait in the last domain
        stay = (*before, (last, count + room + short))
    names = ", ".join(name for name, _ in spread)
    moved = f"{level} {last} is full: {left - short} pods go to {level} {names} (Preferred)"
    waits = f"{short} pods wait in {level} {last}, which has no room now" if short else ""
    return Choice((*stay, *spread), waits=waits, note=moved if spread else "")


def _room(exclusive: bool) -> Callable[[Domain], int]:
    """The job's pods a domain holds now: an exclusive job needs one no other job uses,
    and no job goes to one another job holds exclusively."""
    if exclusive:
        return lambda d: 0 if d.busy else d.now
    return lambda d: 0 if d.exclusive else d.now


def _fewest(
    domains: Sequence[Domain], pods: int, size: Callable[[Domain], int]
) -> tuple[Assignment, int]:
    return fewest({d.name: size(d) for d in domains}, pods)


def fewest(
    rooms: Mapping[str, int], pods: int, tie: Callable[[str], str] = str
) -> tuple[Assignment, int]:
    """The fewest of the named rooms holding `pods`: the largest first, the last the
    tightest that holds the rest (ties by `tie` of the name, the name itself unless
    given); and how many pods they leave without room."""
    chosen: list[tuple[str, int]] = []
    left = pods
    pool = sorted((n for n, size in rooms.items() if size > 0), key=lambda n: (-rooms[n], tie(n)))
    while left and pool:
        holds = [n for n in pool if rooms[n] >= left]
        pick = min(holds, key=lambda n: (rooms[n], tie(n))) if holds else pool[0]
        take = min(rooms[pick], left)
        chosen.append((pick, take))
        left -= take
        pool.remove(pick)
    return tuple(chosen), left


def _never(
    level: str, pods: int, per_pod: Decimal, resource: str, domains: Sequence[Domain]
) -> str:
    largest = max(domains, key=lambda d: (d.resource_total, d.ever))
    if per_pod > 0:
        need = format_quantity(per_pod * pods, binary=False)
        have = format_quantity(largest.resource_total, binary=False)
        msg = f"needs {need} {resource} in one {level}; the largest {level} has {have}"
        if largest.resource_total >= per_pod * pods:  # enough GPUs, on too small nodes
            msg += f", which holds {largest.ever} of its {pods} pods"
        return msg
    return f"needs {pods} pods in one {level}; the largest {level} holds {largest.ever}"
