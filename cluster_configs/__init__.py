"""The shipped cluster configs (``slurm.yaml``) and sweep specs (``sweeps/*.yaml``): package data, read
through :func:`importlib.resources.files` (``launchtune.cluster_configs``)."""
