"""The SLURM scaler's decisions, without a cluster (launchtune.pipeline.cluster.scaling)."""

from launchtune.pipeline.cluster.scaling import jobs_to_add, release_idle


def test_jobs_follow_demand_up_to_the_per_class_cap():
    jobs = {"v100": 0, "h100": 1, "a100": 3}
    demand = {"v100": 5, "h100": 1, "a100": 10}
    assert jobs_to_add(jobs, demand, workers_per_class=2) == {"v100": 2}


def test_a_class_no_task_needs_gets_no_job_and_is_never_shrunk_below_its_running_jobs():
    assert jobs_to_add({"v100": 0, "h100": 2}, {"v100": 0, "h100": 1}, workers_per_class=4) == {}


def test_idle_classes_are_released_only_after_the_delay():
    idle: dict[str, float] = {}
    jobs, demand = {"v100": 1, "h100": 1}, {"v100": 0, "h100": 3}
    assert release_idle(jobs, demand, idle, now=100.0, release_after_s=60) == []
    assert idle == {"v100": 100.0}
    assert release_idle(jobs, demand, idle, now=159.0, release_after_s=60) == []
    assert release_idle(jobs, demand, idle, now=160.0, release_after_s=60) == ["v100"]


def test_new_demand_or_no_jobs_resets_the_idle_clock():
    idle = {"v100": 10.0, "h100": 10.0}
    release_idle({"v100": 1, "h100": 0}, {"v100": 2, "h100": 0}, idle, now=500.0, release_after_s=60)
    assert idle == {}
