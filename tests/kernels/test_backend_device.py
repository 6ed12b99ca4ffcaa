import numpy as np
import pytest

from launchtune.kernels.backend import BackendError, get_backend
from launchtune.kernels.device import describe_device, gpu_class_of, measure_copy_bandwidth


def test_numpy_backend_and_bad_name():
    b = get_backend("numpy")
    assert b.xp is np and not b.is_gpu
    with pytest.raises(BackendError, match="unknown backend 'cuda'"):
        get_backend("cuda")


@pytest.mark.parametrize(
    "name,cls",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla C2075", "c2075"),
        ("NVIDIA GeForce RTX 2080 Ti", "nvidia-geforce-rtx-2080-ti"),
    ],
)
def test_gpu_class_of(name, cls):
    assert gpu_class_of(name) == cls


def test_cpu_device_facts_and_bandwidth():
    b = get_backend("numpy")
    facts = describe_device(b)
    assert facts["gpu_class"] == "cpu" and facts["backend"] == "numpy"
    bw = measure_copy_bandwidth(b, nbytes=1 << 22, repeats=3)
    assert 0.1 < bw < 10_000


@pytest.mark.gpu
def test_gpu_device_facts():
    b = get_backend("cupy")
    facts = describe_device(b)
    assert facts["sm_count"] > 0 and facts["cupy_version"]
    assert measure_copy_bandwidth(b, nbytes=1 << 28) > 100
