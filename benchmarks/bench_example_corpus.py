"""Benchmark: training the bundled example corpus (``scripts/make_example_corpus.py``).

Trains the whole grid (4 models x 3 contrast datasets x 8 seeds, two worker
processes with one torch thread each) into a temporary folder and prints its
wall time against the 10-minute ceiling of issue 14, the corpus size
against its 5 MB limit, the mean time per run by model, and the machine's
load average before and after (the machine is shared, which moves the time
by 2-4x). It then compares every run's metrics and predictions files byte
for byte with the bundled corpus: retraining must give the same files.

Run: ``nice -n 10 .venv/bin/python benchmarks/bench_example_corpus.py``
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import sys
import tempfile
from pathlib import Path

from deepecgkit.rundir.format import METRICS_FILENAME, PREDICTIONS_FILENAME

ROOT = Path(__file__).resolve().parent.parent
CEILING_S = 600.0
SIZE_LIMIT_BYTES = 5_000_000
MIB = 2**20


def _train(corpus, out: Path) -> tuple[float, str]:
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        seconds = corpus.train_corpus(out)
    return seconds, log.getvalue()


def _per_model_seconds(log: str) -> dict[str, float]:
    times: dict[str, list[float]] = {}
    for line in log.splitlines():
        if line.startswith("[") and line.endswith(" s)"):
            model = line.split("]")[1].split()[0]
            times.setdefault(model, []).append(float(line.rsplit("(", 1)[1].split()[0]))
    return {model: sum(values) / len(values) for model, values in times.items()}


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for name in (METRICS_FILENAME, PREDICTIONS_FILENAME)
        for path in sorted(root.glob(f"*/{name}"))
    }


def main() -> None:
    # the script's worker processes import it by name, so it goes on the path
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_example_corpus as corpus

    from deepecg_assets.resources import BUNDLED_CORPUS

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "corpus"
        load_before = os.getloadavg()
        seconds, log = _train(corpus, out)
        load_after = os.getloadavg()
        # the workers have exited: their CPU time is the children's
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime
        runs = len(corpus.grid_cells())
        files = [p for p in out.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        print(
            f"corpus grid: {runs} runs in {seconds:.0f} s "
            f"({seconds / CEILING_S:.2f} x the {CEILING_S / 60:.0f}-minute ceiling), "
            f"{corpus.DEFAULT_JOBS} workers x {corpus.THREADS_PER_WORKER} torch thread; "
            f"{cpu:.0f} s of worker CPU ({cpu / corpus.DEFAULT_JOBS / CEILING_S:.2f} x the "
            "ceiling if the workers had both cores to themselves)"
        )
        print(
            "load average (1, 5, 15 min) before "
            + ", ".join(f"{v:.1f}" for v in load_before)
            + "; after "
            + ", ".join(f"{v:.1f}" for v in load_after)
        )
        per_model = _per_model_seconds(log)
        print(
            "mean seconds per run: "
            + ", ".join(f"{model} {value:.1f}" for model, value in per_model.items())
        )
        print(
            f"size: {size / MIB:.2f} MiB in {len(files)} files "
            f"({size / SIZE_LIMIT_BYTES:.2f} x the 5 MB limit)"
        )
        trained, bundled = _files(out), _files(BUNDLED_CORPUS)
        differing = sorted(k for k in trained if trained[k] != bundled.get(k))
        print(
            f"against the bundled corpus: {len(trained)} metrics and prediction files, "
            f"{len(differing)} differ" + (f": {differing[:5]}" if differing else "")
        )


if __name__ == "__main__":
    main()
