"""The tridiagonal workload: the Austin-Berndt-Moulton partition method, FP64, with CUDA streams.

``system`` (storage convention, test systems, checks), ``partition`` (the method in numpy: the reference),
``partition.cu`` + ``cuda_solver`` (the GPU version, transfers chunked over streams), ``gtsv2`` and
``baselines`` (what it is compared with), ``workload`` (the interface the pipeline drives), ``__main__`` (the
CLI).
"""
