"""The generated gRPC contract (``tigress.fetcher.v1``): written by ``make proto`` only.

Everything in this package except this file comes from ``proto/tigress/fetcher/v1/fetcher.proto``;
never edit it by hand (``tests/fetcher/test_proto_codegen.py`` fails when it is stale).
"""
