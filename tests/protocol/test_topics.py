from __future__ import annotations

import pytest

from adaptedge.protocol import ProtocolError
from adaptedge.protocol import topics as T


def test_build_and_parse() -> None:
    name = T.request_topic("dev-1")
    assert name == "adaptedge/v1/dev-1/req"
    parsed = T.parse(name)
    assert (parsed.prefix, parsed.device, parsed.channel) == ("adaptedge", "dev-1", "req")
    assert T.parse(T.reply_topic("x", prefix="a/b"), prefix="a/b").channel == "resp"
    assert T.telemetry_topic("w") == "adaptedge/v1/w/telemetry"


def test_wildcards_and_shared() -> None:
    assert T.wildcard("req") == "adaptedge/v1/+/req"
    assert T.shared("workers", T.wildcard("req")) == "$share/workers/adaptedge/v1/+/req"


@pytest.mark.parametrize("device", ["", "a/b", "+", "#", "$SYS", "a\x00"])
def test_bad_device_ids(device: str) -> None:
    with pytest.raises(ProtocolError) as info:
        T.request_topic(device)
    assert info.value.code == "bad_topic"


@pytest.mark.parametrize("name", ["other/v1/d/req", "adaptedge/v2/d/req", "adaptedge/v1/d/x",
                                  "adaptedge/v1/d/resp/extra", "adaptedge/v1/d/req/a/b",
                                      "adaptedge/v1/d/req/+", "adaptedge/v1//req"])
def test_parse_rejects_foreign_topics(name: str) -> None:
    with pytest.raises(ProtocolError):
        T.parse(name)
