"""ATP executors: where a suite's runs are made when not in the ``atp test`` process
(:mod:`atp.core.executor`). ``dask`` makes them on a Dask cluster's workers (docs/cluster.md)."""
