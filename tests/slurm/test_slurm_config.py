"""The SLURM config, its checks, the dry-run job scripts and the per-sweep credentials: no SLURM needed."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from launchtune.kernels.device import CLASS_SPEC_ENV, CLASS_SPECS, class_spec
from launchtune.pipeline.cluster.security import is_private, sweep_credentials
from launchtune.pipeline.cluster.slurm import dry_run_scripts
from launchtune.pipeline.cluster.slurm_config import (
    job_options,
    lifetime_args,
    load_slurm_config,
    site_class_exports,
    walltime_seconds,
)
from launchtune.pipeline.errors import UserError
from tests.pipeline.conftest import run_cli_here

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "cluster_configs" / "slurm.yaml"


def test_shipped_config_has_every_class_with_device_facts_from_the_spec_table():
    config = load_slurm_config(SHIPPED)
    assert list(config.classes) == ["c2075", "p100", "v100", "a100", "h100", "h200"]
    assert config.tls is True and config.dashboard.startswith("127.0.0.1:")
    for cls, job in config.classes.items():
        assert job.gres == "gpu:1" and job.partition and job.setup
        assert job.device["peak_fp64_gflops"] == CLASS_SPECS[cls].peak_fp64_gflops
        assert job.device["bandwidth_gbs"] == CLASS_SPECS[cls].bandwidth_gbs
    # per-class entries override the defaults
    assert config.classes["c2075"].walltime == "04:00:00" and config.classes["v100"].walltime == "02:00:00"
    assert any("cuda/8.0" in line for line in config.classes["c2075"].setup)


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("30", 1800),
        ("30:15", 1815),
        ("02:00:00", 7200),
        ("1-00", 86400),
        ("1-02:30", 95400),
        ("2-00:00:10", 172810),
    ],
)
def test_walltime_formats(text, seconds):
    assert walltime_seconds(text) == seconds


def test_lifetime_leaves_a_margin_before_walltime_and_none_for_short_jobs():
    args = lifetime_args(7200)
    life = int(args[args.index("--lifetime") + 1].rstrip("s"))
    stagger = int(args[args.index("--lifetime-stagger") + 1].rstrip("s"))
    assert 0 < life + stagger < 7200
    assert lifetime_args(300) == []


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


GOOD = {"classes": {"v100": {"partition": "gpu-v100"}}}


@pytest.mark.parametrize(
    "patch,field",
    [
        ({"classes": {"v100": {"partition": "p", "walltime": "two hours"}}}, "classes.v100.walltime"),
        ({"classes": {"v100": {"partition": "p", "memory": "lots"}}}, "classes.v100.memory"),
        ({"classes": {"v100": {"partition": "p", "cores": 0}}}, "classes.v100.cores"),
        ({"classes": {"v100": {"partition": "p", "setup": "module load cuda"}}}, "classes.v100.setup"),
        ({"classes": {"v100": {"partion": "p"}}}, "classes.v100: unknown key 'partion'"),
        ({"classes": {"v100": {}}}, "classes.v100"),
        ({"classes": {"l40s": {"partition": "p"}}}, "classes.l40s.device"),
        (
            {
                "classes": {
                    "l40s": {
                        "partition": "p",
                        "device": {"peak_fp64_gflops": -1, "bandwidth_gbs": 1, "memory_gb": 1},
                    }
                }
            },
            "classes.l40s.device.peak",
        ),
        ({"classes": {"V100!": {"partition": "p"}}}, "classes.V100!"),
        ({"classes": {}}, "classes"),
        ({**GOOD, "scheduler": {"tls": "yes"}}, "scheduler.tls"),
        ({**GOOD, "scheduler": {"dashboard": "everywhere"}}, "scheduler.dashboard"),
        ({**GOOD, "defaults": {"gpus": 2}}, "defaults: unknown key 'gpus'"),
        ({**GOOD, "clases": {}}, "unknown key 'clases'"),
    ],
)
def test_bad_config_names_file_and_field(tmp_path, patch, field):
    path = _write(tmp_path, patch)
    with pytest.raises(UserError) as err:
        load_slurm_config(path)
    message = str(err.value)
    assert message.startswith("site.yaml") and field in message, message
    assert "\n" not in message


def test_new_class_with_device_facts_and_unknown_gpu_class(tmp_path):
    path = _write(
        tmp_path,
        {
            "classes": {
                "l40s": {
                    "partition": "ada",
                    "device": {"peak_fp64_gflops": 1414, "bandwidth_gbs": 864, "memory_gb": 48},
                }
            }
        },
    )
    config = load_slurm_config(path)
    assert config.classes["l40s"].device["bandwidth_gbs"] == 864
    with pytest.raises(UserError, match="^--gpu-class: GPU class 'v100' has no entry in .*site.yaml"):
        config.select(["v100"])
    with pytest.raises(
        UserError, match="^spec.yaml: gpu_classes: GPU class 'v100' has no entry in .*site.yaml"
    ):
        config.select(["v100"], "spec.yaml: gpu_classes")


def test_a_site_class_device_facts_reach_the_worker_rows(tmp_path, monkeypatch):
    """The job of a class the registry lacks exports its device: facts; class_spec on the worker (which
    describe_device asks for every row's spec figures) reads them back."""
    facts = {"peak_fp64_gflops": 1414, "bandwidth_gbs": 864, "memory_gb": 48}
    path = _write(tmp_path, {"classes": {"l40s": {"partition": "ada", "device": facts}}})
    (job,) = load_slurm_config(path).select(["l40s"])
    (line,) = site_class_exports(job)
    assert job_options(job, job_name="x", log_directory=None)["job_script_prologue"][-1] == line
    shell = f"{line}; printf %s ${CLASS_SPEC_ENV}"
    value = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=True)
    monkeypatch.setenv(CLASS_SPEC_ENV, value.stdout)
    spec = class_spec("l40s")
    assert (spec.peak_fp64_gflops, spec.bandwidth_gbs, spec.memory_gb) == (1414, 864, 48)
    assert site_class_exports(load_slurm_config(_write(tmp_path, GOOD)).select(["v100"])[0]) == []
    monkeypatch.setenv(CLASS_SPEC_ENV, "{not json")
    with pytest.raises(ValueError, match="LAUNCHTUNE_CLASS_SPEC"):
        class_spec("l40s")


def test_dry_run_script_routes_class_and_passes_only_credential_paths():
    ((job, script),) = dry_run_scripts(SHIPPED, ["h100"])
    assert job.gpu_class == "h100"
    assert (
        "#SBATCH -p h100" in script and "#SBATCH --gres=gpu:1" in script and "#SBATCH -t 01:00:00" in script
    )
    assert "--resources h100=1" in script and "--name h100-N" in script and "--no-dashboard" in script
    assert "tls://<scheduler-address>" in script and "--tls-key <workdir>/credentials/sweep-key.pem" in script
    assert "BEGIN" not in script  # no key material in a script that `scontrol show job` reveals
    assert "--lifetime" in script


def test_credentials_are_private_while_the_sweep_runs_and_gone_after(tmp_path):
    workdir = tmp_path / "sweep"
    with sweep_credentials(workdir) as creds:
        assert stat.S_IMODE(creds.directory.stat().st_mode) == 0o700
        for f in creds.files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600 and is_private(f)
        assert "PRIVATE KEY" in creds.key_file.read_text()
        worker = creds.security.get_tls_config_for_role("worker")
        assert worker["key"] == str(creds.key_file) and worker["ca_file"] == str(creds.cert_file)
        assert creds.security.require_encryption
    assert not creds.directory.exists()
    with pytest.raises(RuntimeError), sweep_credentials(workdir) as creds:
        raise RuntimeError("a sweep that fails")
    assert not creds.directory.exists()


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``launchtune ARGS`` in this process: the tests read what it prints and its exit code."""
    return run_cli_here(*args, timeout=120)


def test_cluster_command_dry_run_prints_the_job_script():
    result = _cli("cluster", "--dry-run", "--gpu-class", "v100")
    assert result.returncode == 0, result.stderr
    assert "#SBATCH -p v100" in result.stdout and "--resources v100=1" in result.stdout
    assert "c2075" not in result.stdout  # only the class asked for


def test_cluster_command_bad_config_is_one_line_exit_2(tmp_path):
    path = _write(tmp_path, {"classes": {"v100": {"partition": "p", "walltime": "soon"}}})
    result = _cli("cluster", str(path))
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "site.yaml: classes.v100.walltime" in lines[0], result.stderr
    assert result.stdout == ""
