"""What the tests and the benchmarks share: real servers on loopback and the corpus.

Neither ``tests`` nor ``bench`` imports the other; both import this package. It is not
shipped (``pyproject.toml`` packages only ``fetcher`` and ``gateway``).
"""
