"""The installed launchtune's version, owned here so the pipeline names it without importing the
``launchtune`` facade above it (which re-exports it as ``launchtune.__version__``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("launchtune")
except PackageNotFoundError:  # run from a checkout that was never pip-installed
    __version__ = "0.1.0+checkout"
