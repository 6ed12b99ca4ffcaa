"""The shipped notebooks (``*.ipynb``): package data, read through :func:`importlib.resources.files`
(``launchtune.notebooks``); ``launchtune notebooks`` executes them."""
