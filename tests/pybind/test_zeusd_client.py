"""zeus_cpp.utils.zeusd against our real zeusd (simulated A100s, a fake RAPL package), over a
Unix socket and TCP, with and without tokens; and against hostile peers (a socket that never
answers, a daemon whose /discover is malformed)."""

from __future__ import annotations

import dataclasses
import time
import urllib.parse

import pytest

import zeus_cpp.utils.zeusd as zeusd_module
from zeus_cpp.exception import (
    ZeusdAuthError,
    ZeusdCapabilityError,
    ZeusdConnectionError,
    ZeusdError,
)
from zeus_cpp.utils.zeusd import (
    CpuDramPower,
    CpuEnergyResult,
    GpuInfo,
    ZeusdClient,
    ZeusdConfig,
    require_capabilities,
)
from zeusd_daemon import SilentSocket, StubServer, daemons, discover_body, reply  # noqa: F401

# The daemon's simulated A100 (src/device/simulated_gpu.cpp).
A100 = "NVIDIA A100-SXM4-80GB"
MIN_POWER_MW, MAX_POWER_MW = 100_000, 400_000


# ---- ZeusdConfig ---------------------------------------------------------------------------------


def test_config_constructors_and_urls() -> None:
    tcp = ZeusdConfig.tcp("node1", 4938, token="t", gpu_indices=[0], cpu_indices=[])
    assert (tcp.host_port, tcp.socket_path, tcp.token) == ("node1:4938", None, "t")
    assert (tcp.gpu_indices, tcp.cpu_indices) == ([0], [])
    assert tcp.endpoint == "node1:4938"
    assert tcp.url("/discover") == "http://node1:4938/discover"
    uds = ZeusdConfig.uds("/run/zeusd/zeusd.sock")
    assert uds.endpoint == "/run/zeusd/zeusd.sock"
    assert uds.url("/time") == "http://localhost/time"
    with pytest.raises(dataclasses.FrozenInstanceError):
        uds.token = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="neither socket_path nor host_port"):
        ZeusdConfig().endpoint


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    assert ZeusdConfig.from_env() is None
    monkeypatch.setenv("ZEUSD_HOST_PORT", "10.0.0.1:4938")
    monkeypatch.setenv("ZEUSD_TOKEN", "secret")
    assert ZeusdConfig.from_env() == ZeusdConfig(host_port="10.0.0.1:4938", token="secret")
    monkeypatch.setenv("ZEUSD_SOCK_PATH", "/tmp/z.sock")  # wins
    assert ZeusdConfig.from_env() == ZeusdConfig(socket_path="/tmp/z.sock", token="secret")


@pytest.mark.parametrize("host_port", ["localhost", "host:", ":4938", "host:99999", "host:x1"])
def test_a_malformed_host_port_is_a_value_error(host_port: str) -> None:
    with pytest.raises(ValueError, match="is not host:port"):
        ZeusdClient(ZeusdConfig(host_port=host_port))


def test_no_configuration_is_a_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ZeusdConnectionError, match="No Zeusd connection configured"):
        ZeusdClient()


def test_no_daemon_is_a_connection_error(tmp_path) -> None:
    with pytest.raises(ZeusdConnectionError, match="Cannot reach Zeusd at"):
        ZeusdClient(ZeusdConfig.uds(str(tmp_path / "absent.sock")))


# ---- Discovery and every route -----------------------------------------------------------------


@pytest.mark.parametrize("tcp", [False, True], ids=["uds", "tcp"])
def test_discovery(daemons, tcp: bool) -> None:
    daemon = daemons(tcp=tcp)
    client = ZeusdClient(daemon.config())
    assert client.endpoint == daemon.config().endpoint
    assert client.gpu_ids == [0, 1]
    assert client.gpus[0] == GpuInfo(0, A100, client.gpus[0].pci_address, True)
    assert client.gpus[0].pci_address.count(":") == 2
    assert client.cpu_ids == [0] and client.dram_available == [True]
    assert client.auth_required is False and client.auth_error is None
    assert client.granted_scopes == frozenset()
    assert [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu] == [True] * 3
    require_capabilities(client, read_gpu=True, control_gpu=True, read_cpu=True,
                         gpu_ids=[0, 1], cpu_ids=[0])  # fmt: skip


def test_discovery_from_env(daemons, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = daemons()
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    monkeypatch.delenv("ZEUSD_TOKEN", raising=False)
    monkeypatch.setenv("ZEUSD_SOCK_PATH", str(daemon.socket_path))
    assert ZeusdClient().gpu_ids == [0, 1]


@pytest.mark.parametrize("tcp", [False, True], ids=["uds", "tcp"])
def test_every_gpu_route(daemons, tcp: bool) -> None:
    client = ZeusdClient(daemons(tcp=tcp).config())
    assert client.get_power_limit_constraints() == {
        0: (MIN_POWER_MW, MAX_POWER_MW), 1: (MIN_POWER_MW, MAX_POWER_MW)}  # fmt: skip
    assert client.get_power_limit_constraints([1]) == {1: (MIN_POWER_MW, MAX_POWER_MW)}

    client.set_power_limit([0], 250_000)
    client.set_power_limit([1], 300_000, block=True)
    assert client.get_power_limit() == {0: 250_000, 1: 300_000}
    assert client.get_power_limit([1]) == {1: 300_000}
    client.set_power_limit([0, 1], 200_000, block=False)
    deadline = time.monotonic() + 10
    while client.get_power_limit() != {0: 200_000, 1: 200_000} and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.get_power_limit() == {0: 200_000, 1: 200_000}

    client.set_persistence_mode([0], True)
    assert client.get_persistence_mode() == {0: True, 1: False}
    client.set_persistence_mode([0], False, block=True)
    assert client.get_persistence_mode([0]) == {0: False}

    client.set_gpu_locked_clocks([0], 210, 1005)
    client.reset_gpu_locked_clocks([0])
    client.set_mem_locked_clocks([1], 1593, 1593, block=True)
    client.reset_mem_locked_clocks([1], block=True)
    client.reset_locked_clocks([0, 1])

    energy = client.get_gpu_energy([0, 1])
    assert sorted(energy) == [0, 1] and all(isinstance(v, int) for v in energy.values())
    power = client.get_gpu_power()
    assert sorted(power.power_mw) == [0, 1] and all(v > 0 for v in power.power_mw.values())
    assert abs(power.timestamp_ms / 1000.0 - time.time()) < 5
    assert sorted(client.get_gpu_power([1]).power_mw) == [1]
    assert abs(client.get_time() - time.time()) < 5


def test_cpu_routes(daemons) -> None:
    client = ZeusdClient(daemons().config())
    assert client.get_cpu_energy() == {0: CpuEnergyResult(1_000_000, 5_000)}
    assert client.get_cpu_energy([0], cpu=True, dram=False) == {0: CpuEnergyResult(1_000_000, None)}
    assert client.get_cpu_energy(cpu=False) == {0: CpuEnergyResult(None, 5_000)}
    snapshot = client.get_cpu_power([0])
    assert snapshot.power_mw == {0: CpuDramPower(cpu_mw=0, dram_mw=0)}  # the counters stand still
    assert abs(snapshot.timestamp_ms / 1000.0 - time.time()) < 5


def test_a_refusal_is_a_zeusd_error_with_the_body(daemons) -> None:
    client = ZeusdClient(daemons().config())
    with pytest.raises(ZeusdError, match=r"^Failed to set_power_limit: GPU index 9 does not exist"):
        client.set_power_limit([9], 200_000)
    with pytest.raises(ZeusdError, match=r"^Failed to set_power_limit: .*outside"):
        client.set_power_limit([0], 50_000)
    with pytest.raises(ZeusdError, match=r"^Failed to set_gpu_locked_clocks: "):
        client.set_gpu_locked_clocks([0], 1005, 210)
    with pytest.raises(ZeusdError, match=r"^Failed to get_power_limit: .*GPU 5 not found"):
        client.get_power_limit([5])
    with pytest.raises(ZeusdError, match=r"^Failed to get_cpu_power: "):
        client.get_cpu_power([3])


# ---- Capabilities --------------------------------------------------------------------------------


def test_a_read_only_daemon(daemons) -> None:
    client = ZeusdClient(daemons(enable="gpu-read").config())
    assert [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu] == [
        True, False, False]  # fmt: skip
    assert client.cpu_ids == []
    require_capabilities(client, read_gpu=True, gpu_ids=[1])
    with pytest.raises(ZeusdCapabilityError) as error:
        require_capabilities(client, control_gpu=True, read_cpu=True, gpu_ids=[0, 4], cpu_ids=[0])
    message = str(error.value)
    assert message.startswith(f"Zeusd at {client.endpoint}: ")
    assert "API group 'gpu-control' is not enabled on this server" in message
    assert "API group 'cpu-read' is not enabled on this server" in message
    assert "GPU indices [4] not available (available: [0, 1])" in message
    assert "CPU indices [0] not available (available: [])" in message
    with pytest.raises(ZeusdError, match="^Failed to set_power_limit: "):
        client.set_power_limit([0], 200_000)


# ---- Tokens --------------------------------------------------------------------------------------


def test_auth_without_a_token(daemons) -> None:
    daemon = daemons(auth=True)
    client = ZeusdClient(daemon.config())
    assert client.auth_required is True
    assert "requires authentication but no token was provided" in client.auth_error
    assert [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu] == [False] * 3
    with pytest.raises(ZeusdAuthError, match="no token was provided"):
        require_capabilities(client, read_gpu=True)
    with pytest.raises(ZeusdError, match="^Failed to get_power_limit: .*Authentication required"):
        client.get_power_limit()
    assert client.get_time() > 0  # /time needs no token


def test_auth_with_a_scoped_token(daemons) -> None:
    daemon = daemons(auth=True)
    client = ZeusdClient(daemon.config(token=daemon.token("gpu-read", sub="bob")))
    assert client.auth_error is None
    assert client.granted_scopes == frozenset({"gpu-read"})
    assert client._whoami_sub == "bob"
    assert [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu] == [
        True, False, False]  # fmt: skip
    assert client.get_power_limit() == {0: MAX_POWER_MW, 1: MAX_POWER_MW}
    with pytest.raises(ZeusdCapabilityError, match=r"Token lacks required scope 'gpu-control' "
                                                   r"\(granted: \['gpu-read'\]\)"):  # fmt: skip
        require_capabilities(client, control_gpu=True)
    with pytest.raises(ZeusdError, match="^Failed to set_power_limit: .*lacks required scope"):
        client.set_power_limit([0], 200_000)


def test_auth_with_a_full_token_over_tcp(daemons) -> None:
    daemon = daemons(auth=True, tcp=True)
    token = daemon.token("gpu-control", "gpu-read", "cpu-read")
    client = ZeusdClient(daemon.config(token=token))
    assert [client.can_read_gpu, client.can_control_gpu, client.can_read_cpu] == [True] * 3
    require_capabilities(client, read_gpu=True, control_gpu=True, read_cpu=True)
    client.set_power_limit([1], 150_000)
    assert client.get_power_limit([1]) == {1: 150_000}


def test_auth_with_a_rejected_token(daemons) -> None:
    daemon = daemons(auth=True)
    client = ZeusdClient(daemon.config(token="not-a-jwt"))
    assert client.auth_error.startswith(f"Token rejected by Zeusd at {client.endpoint}: ")
    assert client.granted_scopes == frozenset()
    with pytest.raises(ZeusdAuthError, match="Token rejected"):
        require_capabilities(client)


# ---- Hostile peers -------------------------------------------------------------------------------


def test_a_peer_that_never_answers_times_out(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    silent = SilentSocket(tmp_path / "silent.sock")
    try:
        monkeypatch.setattr(zeusd_module, "DEFAULT_TIMEOUT_S", 0.5)
        start = time.monotonic()
        with pytest.raises(ZeusdConnectionError, match="Cannot reach Zeusd at"):
            ZeusdClient(ZeusdConfig.uds(str(silent.path)))
        assert time.monotonic() - start < 5
        start = time.monotonic()
        with pytest.raises(ZeusdConnectionError):
            ZeusdClient(ZeusdConfig.uds(str(silent.path)), timeout_s=0.3)
        assert time.monotonic() - start < 5
    finally:
        silent.close()


@pytest.mark.parametrize(
    "status, body, message",
    [
        (500, "boom", "returned HTTP 500 on /discover: boom"),
        (200, "not json", "cannot read"),
        (200, '{"gpus": [{"id": 0, "name": "old"}], "cpus": [], "enabled_api_groups": [], '
              '"auth_required": false}', "did not report 'pci_address' in /discover"),
        (200, '{"gpus": [], "cpus": []}', "did not report 'enabled_api_groups'"),
        (200, '[1, 2]', "cannot read"),
    ],
)
def test_a_malformed_discover_is_a_connection_error(status: int, body: str, message: str) -> None:
    stub = StubServer({"/discover": lambda handler: reply(handler, status, body)})
    try:
        with pytest.raises(ZeusdConnectionError, match=message):
            ZeusdClient(stub.config())
    finally:
        stub.close()


def test_a_whoami_failure_is_kept_as_the_auth_error() -> None:
    stub = StubServer({
        "/discover": lambda handler: reply(handler, 200, discover_body(auth_required=True)),
        "/auth/whoami": lambda handler: reply(handler, 500, "whoami broke"),
    })  # fmt: skip
    try:
        client = ZeusdClient(stub.config(token="t"))
        assert "(HTTP 500): whoami broke" in client.auth_error
        assert stub.requests == ["/discover", "/auth/whoami"]
    finally:
        stub.close()


def test_success_is_exactly_200() -> None:
    stub = StubServer({
        "/discover": lambda handler: reply(handler, 200, discover_body()),
        "/gpu/set_power_limit": lambda handler: reply(handler, 204, ""),
        "/gpu/get_power_limit": lambda handler: reply(handler, 200, "{broken"),
    })  # fmt: skip
    try:
        client = ZeusdClient(stub.config())
        with pytest.raises(ZeusdError, match="^Failed to set_power_limit: $"):
            client.set_power_limit([0, 1], 200_000, block=False)
        # The parameters in the reference's order (the transport percent-encodes the comma).
        assert urllib.parse.unquote(stub.requests[-1]) == (
            "/gpu/set_power_limit?gpu_ids=0,1&power_limit_mw=200000&block=false")
        with pytest.raises(ZeusdError, match="^Failed to get_power_limit: the reply is not JSON"):
            client.get_power_limit()
    finally:
        stub.close()


# ---- The reference's signatures -------------------------------------------------------------------

REFERENCE_METHODS = {
    "get_gpu_energy": ["gpu_ids"],
    "get_gpu_power": ["gpu_ids"],
    "set_power_limit": ["gpu_ids", "power_limit_mw", "block"],
    "set_persistence_mode": ["gpu_ids", "enabled", "block"],
    "get_persistence_mode": ["gpu_ids"],
    "get_power_limit": ["gpu_ids"],
    "get_power_limit_constraints": ["gpu_ids"],
    "set_gpu_locked_clocks": ["gpu_ids", "min_clock_mhz", "max_clock_mhz", "block"],
    "reset_gpu_locked_clocks": ["gpu_ids", "block"],
    "reset_locked_clocks": ["gpu_ids", "block"],
    "set_mem_locked_clocks": ["gpu_ids", "min_clock_mhz", "max_clock_mhz", "block"],
    "reset_mem_locked_clocks": ["gpu_ids", "block"],
    "get_cpu_energy": ["cpu_ids", "cpu", "dram"],
    "get_cpu_power": ["cpu_ids"],
    "get_time": [],
    "make_client": [],
    "url": ["path"],
}


def test_the_reference_signatures() -> None:
    import inspect

    for name, expected in REFERENCE_METHODS.items():
        parameters = list(inspect.signature(getattr(ZeusdClient, name)).parameters)[1:]
        assert parameters == expected, name
    assert list(inspect.signature(require_capabilities).parameters) == [
        "client", "read_gpu", "control_gpu", "read_cpu", "gpu_ids", "cpu_ids"]  # fmt: skip
    for constructor in (ZeusdConfig.tcp, ZeusdConfig.uds):
        assert list(inspect.signature(constructor).parameters)[-3:] == [
            "token", "gpu_indices", "cpu_indices"]  # fmt: skip
    assert [f.name for f in dataclasses.fields(ZeusdConfig)] == [
        "host_port", "socket_path", "token", "gpu_indices", "cpu_indices"]  # fmt: skip
    for attribute in ("endpoint", "gpus", "gpu_ids", "cpus", "cpu_ids", "dram_available",
                      "auth_required", "auth_error", "granted_scopes", "can_read_gpu",
                      "can_control_gpu", "can_read_cpu"):  # fmt: skip
        assert isinstance(getattr(ZeusdClient, attribute), property), attribute
    from zeus_cpp.monitor.power_streaming import PowerStreamingClient

    assert [(p.name, p.default) for p in inspect.signature(PowerStreamingClient).parameters.values()
            ] == [("servers", inspect.Parameter.empty), ("reconnect_delay_s", 1.0)]  # fmt: skip
