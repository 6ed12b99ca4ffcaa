"""``launchtune sweep SPEC.yaml``: plan, measure on the cluster, merge, train, re-measure, report."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..flags import integer, names, number, whole
from ..store.spec import DEFAULT_BUDGET, LIMITS

EPILOG = """\
examples:
  launchtune sweep default                                        # the shipped default spec, results/default/
  launchtune sweep SPEC.yaml --samples 50 --out /tmp/try          # a quick look
  launchtune sweep SPEC.yaml --cluster slurm                      # one SLURM job per GPU class
  launchtune sweep SPEC.yaml --gpu-class v100 --force             # redo only the v100 partition
  launchtune sweep SPEC.yaml --allow-workload mypkg.wl:make       # a spec naming your own code
  launchtune sweep SPEC.yaml --strategy evolve                    # a search at the default --budget
  launchtune sweep SPEC.yaml --strategy evolve --budget 100       # a cheaper one (more often short)
  launchtune sweep SPEC.yaml --strategy evolve --remeasure         # and its pick timed against the default
  launchtune sweep SPEC.yaml --gpu-class h200 --strategy transfer --budget 20 \\
      --prior results/h100_sweep --out results/h200_transfer             # start from another class's data

A rerun of the same command skips finished shards (resume after a crash); a search's rerun replays what its
strategy was answered and measures only the rest of its budget. Output folder layout:
shards/gpu_class=<C>/shard-<batch>.parquet, merged/, models/, figures/, report.json, report.md,
tuning_table.json. Without --out, results go to results/<spec name>/ ($LAUNCHTUNE_RESULTS overrides results/).

environment: LAUNCHTUNE_WAIT_S=SECONDS, the longest wait on the cluster (default: an hour local, a day on
SLURM); LAUNCHTUNE_GONE_S=SECONDS, how long a local sweep waits for a class whose workers all died to get one
back before it ends with one line (default 30).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a sweep spec end to end",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "spec",
        type=Path,
        help="a sweep spec YAML, or the name of a shipped one (default, cfd_inlet_paper, ...: launchtune "
        "examples lists them)",
    )
    p.add_argument(
        "--cluster",
        default="local",
        help="'local' (default: one worker per visible GPU, else one CPU worker), 'slurm' "
        "(cluster_configs/slurm.yaml) or a cluster config YAML",
    )
    p.add_argument("--out", type=Path, help="sweep folder (default: results/<spec name>)")
    p.add_argument("--samples", type=whole, help="random samples per GPU class (overrides the spec)")
    p.add_argument("--gpu-class", type=names, help="only these classes, comma-separated (e.g. v100,h100)")
    p.add_argument(
        "--force",
        action="store_true",
        help="re-measure: with --gpu-class only those partitions, else the whole folder afresh",
    )
    p.add_argument("--seed", type=whole, help="sampling and training seed (overrides the spec)")
    p.add_argument(
        "--max-minutes",
        type=number(0, 10**7, open_below=True),
        help="stop measuring after this long and go on with what is measured (rerun to finish)",
    )
    p.add_argument(
        "--workers-per-class",
        type=integer(1, LIMITS["workers_per_class"]),
        default=1,
        help="SLURM: jobs per GPU class (default 1); local: CPU workers where no GPU is visible "
        "(with GPUs the local cluster runs one worker per GPU)",
    )
    p.add_argument(
        "--allow-workload",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="let the spec's workload be this module:factory, code the workers import and run (repeatable; "
        "installed 'launchtune.workloads' entry points and the registered names need no flag)",
    )
    p.add_argument(
        "--strategy",
        help="search instead of a random sample: this strategy (launchtune strategies --list; "
        "default: evolve) chooses what each GPU class measures, within --budget (spec key search.strategy)",
    )
    p.add_argument(
        "--budget",
        type=whole,
        help=f"measurements per GPU class of a search (spec key search.budget; default {DEFAULT_BUDGET}: "
        "on the recorded CFD and convolution spaces every replayed seed of the default strategy then came "
        "within 5%% of the optimum; a smaller space is measured whole)",
    )
    p.add_argument(
        "--prior",
        action="append",
        metavar="PATH",
        help="recorded data for the search to start from (transfer): a sweep folder of other classes, a "
        "Kernel Tuner cache, or a folder of them (repeatable; spec key search.prior)",
    )
    p.add_argument(
        "--train-models",
        action=argparse.BooleanOptionalAction,
        help="train surrogate models on the measured rows (spec key train_models; default: a sweep without "
        "--strategy does, a search does not: its rows are its strategy's choice, not a sample)",
    )
    p.add_argument(
        "--remeasure",
        action=argparse.BooleanOptionalAction,
        help="re-measure the pick and the runners-up against the default, in validate.rounds interleaved "
        "rounds (spec key remeasure; default: a sweep without --strategy does, a search does not). Without "
        "models the pick is the fastest configuration measured",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..paths import results_root
    from ..sweep.plan import plan_sweep
    from ..sweep.run import run_plan

    plan = plan_sweep(
        args.spec,
        cluster=args.cluster,
        out=args.out,
        samples=args.samples,
        gpu_classes=args.gpu_class,
        force=args.force,
        seed=args.seed,
        max_minutes=args.max_minutes,
        workers_per_class=args.workers_per_class,
        allow_workload=args.allow_workload,
        strategy=args.strategy,
        budget=args.budget,
        prior=args.prior,
        train_models=args.train_models,
        remeasure=args.remeasure,
    )
    spec = plan.spec
    print(
        f"sweep {spec.name}: {spec.workload}/{spec.case}/{spec.size} -> {plan.out}"
        f"  (results root {results_root()})",
        flush=True,
    )
    run_plan(plan)
    return 0
