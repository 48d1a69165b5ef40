"""One physical GPU handed to two processes of a pod (time-slicing, MPS): refused at start-up
by its UUID. No GPU here: the UUIDs are given, the exchange between local ranks is real."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from multigpu_train import shared_gpus
from multigpu_train.errors import SetupError
from multigpu_train.world import World

A, B = "GPU-1b2c3d4e-0000-0000-0000-000000000001", "GPU-1b2c3d4e-0000-0000-0000-000000000002"


@pytest.mark.parametrize(
    ("uuids", "expected"),
    [
        ({0: A, 1: B}, None),
        ({0: A}, None),
        ({0: A, 1: B, 2: A}, f"local ranks 0 and 2 are the same GPU (UUID {A})"),
        ({1: B, 0: B}, f"local ranks 0 and 1 are the same GPU (UUID {B})"),
    ],
)
def test_a_duplicate_uuid_is_named(uuids: dict[int, str], expected: str | None) -> None:
    found = shared_gpus.duplicate(uuids, "local ranks")
    if expected is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(expected)
        assert "time-slicing or MPS" in found


def run_local_ranks(directory: Path, uuids: list[str]) -> list[str | None]:
    """Each local rank in a thread, as the processes of a pod would run it."""
    errors: list[str | None] = [None] * len(uuids)

    def rank(r: int) -> None:
        try:
            shared_gpus.check_local_ranks(directory, r, len(uuids), uuids[r], wait_s=20)
        except SetupError as err:
            errors[r] = str(err)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(uuids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_local_ranks_on_one_gpu_all_fail_with_the_message(tmp_path: Path) -> None:
    errors = run_local_ranks(tmp_path, [A, B, A])
    assert all(e is not None and "local ranks 0 and 2 are the same GPU" in e for e in errors)


def test_local_ranks_on_their_own_gpus_pass(tmp_path: Path) -> None:
    assert run_local_ranks(tmp_path, [A, B]) == [None, None]


def test_a_rank_that_never_comes_is_not_waited_for_long(tmp_path: Path) -> None:
    shared_gpus.check_local_ranks(tmp_path, 0, 2, A, wait_s=0.2)


def test_each_round_of_a_job_has_its_own_directory() -> None:
    world = World(0, 2, 0, "job-0.job", 29500, "job", "", 1, True)
    one = shared_gpus.exchange_directory(world, {"TORCHELASTIC_RUN_ID": "uid/1"})
    assert one.name == "mgj-gpus-uid_1-1"
    restarted = World(0, 2, 0, "job-0.job", 29500, "job", "", 2, True)
    assert shared_gpus.exchange_directory(restarted, {"TORCHELASTIC_RUN_ID": "uid/1"}) != one
