"""Where work runs. ``open_cluster`` yields a connected ``distributed.Client`` whose workers each carry a Dask
resource named after their GPU class (``{"h100": 1}``), so a task submitted with ``resources={cls: 1}`` only runs
on that class's workers. Kinds: ``local`` (``pipeline.cluster.local``) and ``slurm`` (``pipeline.cluster.slurm``).
"""
