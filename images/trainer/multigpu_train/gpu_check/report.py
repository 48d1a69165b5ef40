"""What gpu-check prints as it goes, kept also as JSON for collecting from a machine."""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from multigpu_train.gpu_check.runs import Outcome


def show(label: str, text: str) -> None:
    print(f"{label:<48} {text}", flush=True)


class Report:
    """Prints each line, remembers whether anything failed, and rewrites ``path`` (JSON)
    after every entry: a check cut short still leaves what it did."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.failed = 0
        self.started = time.time()
        self.entries: list[dict[str, Any]] = []
        self.status: int | None = None

    def _add(self, **entry: Any) -> None:
        self.entries.append(entry)
        self._write()

    def line(self, kind: str, text: str) -> None:
        print(text if kind != "plan" else f"plan: {text}", flush=True)
        self._add(kind=kind, text=text)

    def fail_text(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)
        self._add(kind="error", text=text)

    def run(self, outcome: Outcome) -> None:
        verdict = "ok" if outcome.ok else "FAILED"
        show(f"run  {outcome.name}", f"{verdict} ({outcome.seconds:.0f} s) {outcome.detail}")
        self.failed += not outcome.ok
        self._add(
            kind="run",
            name=outcome.name,
            ok=outcome.ok,
            seconds=round(outcome.seconds, 1),
            text=outcome.detail,
        )

    def figure(self, label: str, measured: Callable[[], str]) -> None:
        try:
            text, ok = measured(), True
        except Exception:
            text, ok = "FAILED\n" + traceback.format_exc(), False
            self.failed += 1
        show(label, text)
        self._add(kind="figure", name=label, ok=ok, text=text)

    def skip(self, name: str, why: str) -> None:
        show(f"skip {name}", why)
        self._add(kind="skipped", name=name, text=why)

    def finish(self, status: int) -> None:
        self.status = status
        self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        document = {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "seconds": round(time.time() - self.started, 1),
            "exit_status": self.status,
            "failed": self.failed,
            "entries": self.entries,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(document, indent=1) + "\n")
        tmp.replace(self.path)
