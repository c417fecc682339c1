"""Benchmarks: ``python -m benchmarks {losses,masking,mlm_head,pretrain,threads,train} [options]``.

Each submodule has a ``main(argv)`` that prints a table; results are recorded
in docs/benchmarks.md. Benchmarks are never part of the test suite.
"""
