"""The ``atp`` command line."""
