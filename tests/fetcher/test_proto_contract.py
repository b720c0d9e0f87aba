"""The wire contract keeps the reason vocabulary whole: one enum value per word, no more."""

from __future__ import annotations

from fetcher.reasons import Reason
from fetcher.v1 import fetcher_pb2


def test_proto_reason_enum_matches_the_vocabulary_one_to_one() -> None:
    names = [fetcher_pb2.Reason.Name(number) for number in fetcher_pb2.Reason.values()]
    wire = [name for name in names if name != "REASON_UNSPECIFIED"]
    assert wire == ["REASON_" + reason.name for reason in Reason]


def test_proto_reason_values_follow_the_vocabulary_order_from_one() -> None:
    assert fetcher_pb2.Reason.Value("REASON_UNSPECIFIED") == 0
    for number, reason in enumerate(Reason, start=1):
        assert fetcher_pb2.Reason.Value("REASON_" + reason.name) == number


def test_service_is_versioned_under_tigress_fetcher_v1() -> None:
    service = fetcher_pb2.DESCRIPTOR.services_by_name["FetcherService"]
    assert service.full_name == "tigress.fetcher.v1.FetcherService"
    assert [method.name for method in service.methods] == ["Read", "ReadStream"]
    assert service.methods_by_name["ReadStream"].server_streaming
