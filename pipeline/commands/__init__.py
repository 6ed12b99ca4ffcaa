"""One module per `launchtune` command: parse the arguments, call one subsystem.

The only place where imports sit inside functions by design (besides CuPy and matplotlib): a command imports
its subsystem when it runs, so `launchtune --help` and a mistyped argument answer at once instead of
after Dask, scikit-learn and pyarrow have loaded (about 2 s).
"""
