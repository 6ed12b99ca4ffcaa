"""``launchtune strategies``: run search strategies on recorded data and score their picks.

One run prints one JSON line (strategy, budget, seed, config, time, optimum, ...). ``--compare`` runs
every strategy at several budgets and seeds and writes a table (CSV and markdown) and a figure of mean
picked/optimum against budget. ``--export`` turns a Kernel Tuner cache into our Parquet dataset form.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from launchtune.kernels.workload import SEED_MAX

from .. import flags
from ..errors import UserError
from ..flags import integer
from ..paths import results_root
from ..store.spec import DEFAULT_BUDGET, LIMITS

if TYPE_CHECKING:  # the datasets' module (pandas, pyarrow) is imported where a command first needs it
    from ..store.datasets import Dataset

# Bounds of the flags that size work: far above any run we make, far below what would never end.
MAX_BUDGET = LIMITS[
    "search.budget"
]  # a sweep's search has the same bound; over the space: ``Session.capped``
MAX_SEEDS = 100_000
MAX_REPEATS = 10_000  # replayed repeats per measurement (a spec's ``repeats`` has the same bound)
MAX_WORKERS = 1024

EPILOG = """\
examples (HUB=data/benchmark_hub/convolution, the Benchmark Hub's caches in part, shipped here):
  launchtune strategies --dataset $HUB/A100.json.gz --budget 100
  launchtune strategies --dataset results/cfd/merged --strategy random_mlp --budget 500 --seeds 5
  launchtune strategies --dataset $HUB --strategy transfer --budget 20
  launchtune strategies --dataset data/cfd/h100/sweep_paper/merged \\
      --dataset data/cfd/h200/sweep_paper/merged --strategy transfer --gpu h200 --budget 5
  launchtune strategies --dataset $HUB --compare --out results/hub_strategies
  launchtune strategies --dataset $HUB/A100.json.gz --export a100.parquet
  launchtune strategies --list

A dataset is a Kernel Tuner cache (.json/.json.gz), our sweep Parquet (file or directory; one dataset per
gpu_class), or a directory of caches (one per GPU); --dataset may be given several times to join sources (one
sweep folder per GPU class). With several GPUs, each is tuned in turn, and `transfer` trains on the others
(leave-one-GPU-out). `time` is the recorded time of the pick (ms); `optimum` the best
recorded time; what the strategy saw while searching were noisy replays drawn from the recorded repeats.
"""


def _strategy_groups() -> str:
    """The strategy names, grouped (ours; Kernel Tuner's where installed), wrapped to the help's width."""
    import textwrap

    from ..strategies import DEFAULT, strategy_names
    from ..strategies.kernel_tuner_baseline import PREFIX

    names = strategy_names()
    ours = [f"default (= {DEFAULT})" if n == "default" else n for n in names if not n.startswith(PREFIX)]
    kt = [n for n in names if n.startswith(PREFIX)]

    def wrap(items: list[str]) -> str:
        return textwrap.fill(", ".join(items), width=100, initial_indent="    ", subsequent_indent="    ")

    text = "strategies (--strategy NAME; --list prints one per line):\n  ours:\n" + wrap(ours) + "\n"
    if kt:
        text += "  Kernel Tuner's, run in its simulation mode (the extra 'kt'):\n" + wrap(kt) + "\n"
    else:
        text += f"  Kernel Tuner's ({PREFIX}<name>): install the extra 'kt' to list them\n"
    return text


class _ListStrategies(argparse.Action):
    """``--list``: print the strategy names and exit, before ``--dataset`` is asked for (as ``--version``)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from ..strategies import strategy_names

        print("\n".join(strategy_names()))
        parser.exit(0)


def _budgets(text: str) -> list[int]:
    one = integer(1, MAX_BUDGET)
    values = [one(v.strip()) for v in text.split(",") if v.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated budgets, got {text!r}")
    return values


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from ..strategies import DEFAULT, strategy_names

    p = subparsers.add_parser(
        "strategies",
        help="run and compare search strategies on recorded data (replay)",
        description=__doc__,
        epilog=_strategy_groups() + "\n" + EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list", action=_ListStrategies, help="print the strategy names, one per line, and exit")
    p.add_argument(
        "--dataset",
        required=True,
        action="append",
        help="cache file, Parquet file/directory, or directory of caches; repeat it to join several sources "
        "(the GPUs of all of them; names must differ)",
    )
    p.add_argument(
        "--strategy",
        default="default",
        choices=strategy_names(),
        metavar="NAME",
        help=f"search strategy (default: %(default)s = {DEFAULT}, the one we recommend without other GPUs' "
        "data; transfer needs a directory of several GPUs; kt:<name> runs Kernel Tuner's strategy <name> "
        "in its simulation mode, with the extra 'kt' installed)",
    )
    p.add_argument(
        "--budget",
        type=integer(1, MAX_BUDGET),
        default=DEFAULT_BUDGET,
        help="measurements each run may spend (default: %(default)s, a live search's default)",
    )
    p.add_argument(
        "--seeds", type=integer(1, MAX_SEEDS), default=1, help="runs with seeds 0..K-1 (default: %(default)s)"
    )
    p.add_argument(
        "--seed",
        type=integer(0, SEED_MAX),
        default=None,
        help="run only this seed (reproduces one JSON line)",
    )
    p.add_argument("--gpu", default=None, help="tune only the dataset of this GPU (name as printed in 'gpu')")
    p.add_argument(
        "--repeats",
        type=integer(1, MAX_REPEATS),
        default=7,
        help="replayed repeats per measurement (median; default 7)",
    )
    p.add_argument(
        "--compare", action="store_true", help="run every strategy at --budgets; write table and figure"
    )
    p.add_argument(
        "--budgets",
        type=_budgets,
        default=[20, 50, 100, 200],
        help="budgets for --compare (default: 20,50,100,200)",
    )
    p.add_argument(
        "--strategies",
        type=flags.names,
        default=None,
        help="comma-separated strategies for --compare (default: all)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="folder for --compare outputs (default: results/strategies, under $LAUNCHTUNE_RESULTS if set)",
    )
    p.add_argument(
        "--workers",
        type=integer(1, MAX_WORKERS),
        default=None,
        help="processes for --compare (default: CPU count)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="measurements in flight at once, as a live search over K workers: answers arrive out of order, "
        "each after its recorded time (default: %(default)s, one at a time)",
    )
    p.add_argument(
        "--export",
        default=None,
        metavar="PARQUET",
        help="write the dataset as our Parquet form and exit (imports a Kernel Tuner cache)",
    )
    p.add_argument(
        "--objective",
        type=flags.objective,
        default=None,
        metavar="NAME:max|min",
        help="the objective of a Kernel Tuner cache whose direction is not known (time and energy are lower "
        "is better, GFLOP/s and GB/s higher): e.g. 'score:max'",
    )
    p.set_defaults(func=run)


def json_line(record: dict) -> str:
    """One JSON line: a number that is not finite (a ratio overflowed, a time missing) is ``null``, since
    ``Infinity`` and ``NaN`` are not JSON and a reader of the line would choke on them."""

    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(record), allow_nan=False)


def _load(paths: list[str], objective=None) -> list:
    """Every dataset of every ``--dataset`` path, in order; two datasets of one name are refused (which one
    would ``--gpu`` or transfer mean?)."""
    from ..store.datasets import align_params, load_datasets

    datasets: list[Dataset] = []
    where: dict[str, str] = {}
    for path in paths:
        for d in load_datasets(path, objective):
            if d.name in where:
                raise UserError(
                    f"{path}: GPU {d.name!r} is also in {where[d.name]}; each GPU may come from one source"
                )
            where[d.name] = path
            datasets.append(d)
    return align_params(datasets)


def _select(datasets: list, gpu: str | None, path: str) -> list:
    if gpu is None:
        return datasets
    chosen = [d for d in datasets if d.name == gpu]
    if not chosen:
        raise UserError(f"{path}: no GPU {gpu!r} (has: {', '.join(d.name for d in datasets)})")
    return chosen


def run(args: argparse.Namespace) -> int:
    from ..store.datasets import write_parquet
    from ..strategies import NEEDS_PRIOR

    if args.parallel < 1:
        raise UserError("--parallel: must be at least 1")
    if args.parallel > 1 and args.compare:
        raise UserError("--parallel: runs one strategy (--strategy), not --compare")
    from ..store.ownership import refuse_inside_project_folder

    for named, what in ((args.export, "dataset (--export)"), (args.out, "comparison (--out)")):
        if named:
            refuse_inside_project_folder(named, what)  # before anything is read or written
    datasets = _load(args.dataset, args.objective)
    where = ", ".join(args.dataset)
    if args.export:
        if len(datasets) != 1:
            raise UserError(f"{where}: --export takes one dataset, found {len(datasets)} (use --gpu)")
        out = write_parquet(datasets[0], args.export)
        print(json.dumps({"exported": str(out), **datasets[0].summary()}))
        return 0
    if args.compare:
        return _compare(args, datasets)
    targets = _select(datasets, args.gpu, where)
    from ..strategies.evaluate import run_one

    seeds = [args.seed] if args.seed is not None else list(range(args.seeds))
    resolved = args.strategy
    for d in targets:
        prior = [o for o in datasets if o is not d] if resolved in NEEDS_PRIOR else []
        for seed in seeds:
            record = run_one(
                d, args.strategy, args.budget, seed, prior, repeats=args.repeats, parallel=args.parallel
            )
            if "space" in record and seed == seeds[0]:
                print(
                    f"note: --budget {args.budget} is more than the {record['space']} distinct candidates of "
                    f"{d.name}: the whole space was measured",
                    file=sys.stderr,
                )
            print(json_line(record), flush=True)
    return 0


def _compare(args: argparse.Namespace, datasets: list) -> int:
    from launchtune.kernels.progress import Progress

    from ..strategies import STRATEGIES, strategy_names
    from ..strategies.evaluate import compare, markdown, write_outputs

    names = args.strategies or list(STRATEGIES)
    known = strategy_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        hint = " (Kernel Tuner's need: pip install -e .[kt])" if unknown[0].startswith("kt:") else ""
        raise UserError(
            f"--strategies: unknown strategy {unknown[0]!r}{hint} (choose from {', '.join(known)})"
        )
    where = ", ".join(args.dataset)
    targets = _select(datasets, args.gpu, where)
    out = Path(args.out) if args.out else results_root() / "strategies"

    # a line at least every 10 s with an estimate of the time left (a comparison takes minutes on a CPU)
    meter = Progress(lambda line: print(line, file=sys.stderr, flush=True))

    def progress(done: int, total: int) -> None:
        meter.update(done / total, f"{done}/{total} runs")

    runs = compare(
        datasets, names, args.budgets, args.seeds, workers=args.workers, progress=progress, targets=targets
    )
    if runs.empty:
        raise UserError(f"{where}: no strategy could run at budgets {args.budgets}")
    labels = [Path(p).parent.name if Path(p).name == "merged" else Path(p).name for p in args.dataset]
    title = " + ".join(labels)
    table, both = write_outputs(runs.assign(config=runs["config"].map(json.dumps)), out, title)
    print(markdown(table))
    print(markdown(both))
    print(
        json.dumps(
            {"written": [str(out / n) for n in ("runs.csv", "table.csv", "table.md", "ratio_vs_budget.png")]}
        )
    )
    return 0
