"""The training processes of a FakeCluster's pods, as the operator reads them
(controller/progress_board.py's Reader): what each (pod IP, port) serves, set by a test
as the simulated kubelet sets the pods' phases. A process not served, or frozen, does
not answer, as a SIGSTOPped one would not."""

from __future__ import annotations

from dataclasses import dataclass, field

from multigpu_operator.policy import training


@dataclass
class FakeProcesses:
    served: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    frozen: set[tuple[str, int]] = field(default_factory=set)
    reads: list[tuple[str, int]] = field(default_factory=list)

    async def read(self, ip: str, port: int) -> dict[str, float] | None:
        self.reads.append((ip, port))
        if (ip, port) in self.frozen:
            return None
        gauges = self.served.get((ip, port))
        return dict(gauges) if gauges is not None else None

    async def close(self) -> None:
        pass

    def at_step(self, ip: str, port: int, step: int, **gauges: float) -> None:
        """The process has done `step` steps (and serves these other gauges)."""
        names = {
            "total_steps": training.TOTAL_STEPS,
            "epoch": training.EPOCH,
            "samples_per_second": training.SAMPLES_PER_SECOND,
            "step_seconds": training.STEP_SECONDS,
            "checkpointing": training.CHECKPOINTING,
            "resumed_step": training.RESUMED_STEP,
        }
        served = self.served.setdefault((ip, port), {})
        served[training.STEP] = step
        served.update({names[k]: v for k, v in gauges.items()})
