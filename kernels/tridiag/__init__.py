"""The tridiagonal workload: the Austin-Berndt-Moulton partition method, FP64, with CUDA streams.

``system`` (storage convention, test systems, checks), ``partition`` (the method in numpy: the reference),
``reduced`` (stage 2 on the device, in numpy; levels, memory account), ``partition.cu`` + ``device_solver``
(the kernels; ``solve_device`` on CuPy data) + ``cuda_solver`` (host to host, transfers chunked over
streams), ``gtsv2`` and ``baselines`` (what it is compared with), ``workload`` (the interface the pipeline
drives), ``__main__`` (the CLI).
"""
