"""Load time and peak memory of one dataset in several layouts: three tables vs one flat table.

``python -m training.bench.load_spec [--data data/real/online-retail-2010] [--repeat 3]``

Writes the H&M-layout dataset ``--data`` into a temporary directory as plain CSV files and as one
flat order-lines table (:mod:`training.bench.flat_table`; CSV, CSV.gz, Parquet and a spreadsheet,
the last with openpyxl of the dev extra), then loads each layout with
:func:`training.data.load.load_tables` in a fresh process per run and prints, side by side, the
median load time and the most resident memory the load added to the process (Linux: the peak is
reset after the imports, see :func:`reset_peak`). All layouts give the same tables
(tests/unit/test_spec_flat.py).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from models.schema import ARTICLES_CSV, CUSTOMERS_CSV, TRANSACTIONS_CSV
from training.bench.flat_table import FORMATS, write_flat
from training.data.common import data_file

REAL = Path("data/real/online-retail-2010")


def status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``: the peak) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak() -> None:
    """Start the peak resident memory (``VmHWM``) afresh: write 5 to ``clear_refs`` (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def child(data: Path) -> None:
    """Load ``data`` once; print the seconds and the memory (MiB) before and at the peak as JSON."""
    from training.data.load import load_tables

    base = status_mib("VmRSS")
    reset_peak()
    start = time.perf_counter()
    tables = load_tables(data, progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "base_mib": base, "peak_mib": status_mib("VmHWM"),
                      "rows": len(tables.transactions)}))


def layouts(source: Path, work: Path) -> dict[str, Path]:
    """The layouts to compare, written under ``work`` (the source itself when gzipped): name -> directory."""
    plain = work / "three-csv"
    plain.mkdir()
    for name in (CUSTOMERS_CSV, ARTICLES_CSV, TRANSACTIONS_CSV):
        path = data_file(source, name)
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as src, open(plain / name, "wb") as dst:
            shutil.copyfileobj(src, dst)
    found = {"three tables, CSV": plain}
    if data_file(source, TRANSACTIONS_CSV).suffix == ".gz":
        found = {"three tables, CSV.gz": source, **found}
    for file_format in FORMATS:
        if file_format == "xlsx" and importlib.util.find_spec("openpyxl") is None:
            print("flat, xlsx: skipped (writing a workbook needs openpyxl: pip install -e '.[dev]')")
            continue
        found[f"flat, {file_format}"] = write_flat(plain, work / f"flat-{file_format}", file_format)
    return found


def measure(data: Path, repeat: int) -> dict[str, float]:
    """Median seconds and the most memory added over ``repeat`` fresh processes."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-m", "training.bench.load_spec", "--child", str(data)],
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {"seconds": statistics.median(r["seconds"] for r in runs),
            "added_mib": max(r["peak_mib"] - r["base_mib"] for r in runs), "rows": runs[0]["rows"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.bench.load_spec",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REAL, help="H&M-layout dataset (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per layout (median time)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="relserve-load-spec-") as tmp:
        found = layouts(args.data, Path(tmp))
        print(f"{'layout':<22}{'files MiB':>10}{'load s':>9}{'peak added MiB':>16}{'lines':>10}")
        for name, directory in found.items():
            size = sum(p.stat().st_size for p in directory.iterdir() if p.name != "relserve.toml") / 2**20
            m = measure(directory, args.repeat)
            print(f"{name:<22}{size:>10.1f}{m['seconds']:>9.2f}{m['added_mib']:>16.0f}{m['rows']:>10,}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
