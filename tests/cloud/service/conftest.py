"""Fixtures of the cloud service tests: a private mosquitto and, for the regression tests, a
``CloudService`` serving a bundle with a connected device uplink."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from adaptedge.cloud.service.worker import CloudService
from adaptedge.edge.mqtt_uplink import MqttUplink
from adaptedge.simulator.brokers import MosquittoBroker

Served = Callable[[Path], AbstractContextManager[tuple[CloudService, MqttUplink]]]


@pytest.fixture()
def broker() -> Iterator[MosquittoBroker]:
    with MosquittoBroker() as b:
        yield b


@pytest.fixture()
def served(broker: MosquittoBroker) -> Served:
    """``with served(bundle) as (service, uplink)``: ``bundle`` served by a ``CloudService``
    on the test's broker, and device ``dev1``'s uplink connected and subscribed; the service
    stops on leaving."""

    @contextmanager
    def serve(bundle: Path) -> Iterator[tuple[CloudService, MqttUplink]]:
        service = CloudService(bundle, broker.url, client_id="reg-worker", share="off",
                               stats_every_s=60.0)
        service.start()
        try:
            with MqttUplink(broker.url, "dev1") as uplink:
                assert uplink.wait_connected(5.0)
                time.sleep(0.2)  # the reply subscription rides on the CONNACK's callback
                yield service, uplink
        finally:
            service.stop()

    return serve
