"""Client of the zeusd daemon, with the reference's names (``zeus.utils.zeusd``).

:class:`ZeusdConfig` says where a daemon is (Unix socket or ``host:port``) and which token to
send; :class:`ZeusdClient` discovers what it offers on construction (``GET /discover``, then
``GET /auth/whoami`` when it requires tokens) and has one typed method per route
(docs/zeusd.md); :func:`require_capabilities` checks up front that a daemon grants what a caller
needs::

    from zeus_cpp.utils.zeusd import ZeusdClient, ZeusdConfig

    client = ZeusdClient(ZeusdConfig.uds("/run/zeusd/zeusd.sock"))
    client.gpu_ids                   # [0, 1]
    client.get_gpu_power().power_mw  # {0: 75000, 1: 120000}

Success is exactly HTTP 200; any other answer raises
``ZeusdError("Failed to <operation>: <body>")`` as in the reference. The HTTP transport is the
C++ device layer's own zeusd client (``_zeus._ZeusdTransport``), so that the package needs no
HTTP library of its own (the reference uses httpx): a daemon that cannot be reached, or does
not answer within the timeout (5 s), raises :class:`ZeusdConnectionError`.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from zeus_cpp import _zeus
from zeus_cpp.exception import (
    ZeusdAuthError,
    ZeusdCapabilityError,
    ZeusdConnectionError,
    ZeusdError,
)

logger = logging.getLogger(__name__)

# Connect/read/write timeout of each request, the reference client's. Read at each client's
# construction (tests shorten it).
DEFAULT_TIMEOUT_S = 5.0

__all__ = [
    "CpuDramPower",
    "CpuEnergyResult",
    "CpuInfo",
    "CpuPowerSnapshot",
    "GpuInfo",
    "GpuPowerSnapshot",
    "ZeusdAuthError",
    "ZeusdCapabilityError",
    "ZeusdClient",
    "ZeusdConfig",
    "ZeusdConnectionError",
    "require_capabilities",
]


@dataclass(frozen=True)
class GpuInfo:
    """A GPU as ``/discover`` lists it (``id`` is the index the daemon's routes take)."""

    id: int
    name: str
    pci_address: str
    cumulative_energy_available: bool


@dataclass(frozen=True)
class CpuInfo:
    """A CPU package (RAPL package index) as ``/discover`` lists it."""

    id: int
    dram_available: bool


@dataclass(frozen=True)
class GpuPowerSnapshot:
    """``GET /gpu/get_power``: the daemon's Unix time in ms and each GPU's power in mW."""

    timestamp_ms: int
    power_mw: Dict[int, int]


@dataclass(frozen=True)
class CpuDramPower:
    """One CPU package's power in mW (``dram_mw`` None without a DRAM zone)."""

    cpu_mw: int
    dram_mw: Optional[int]


@dataclass(frozen=True)
class CpuPowerSnapshot:
    """``GET /cpu/get_power``: the daemon's Unix time in ms and each package's power."""

    timestamp_ms: int
    power_mw: Dict[int, CpuDramPower]


@dataclass(frozen=True)
class CpuEnergyResult:
    """One package's cumulative energy in µJ (None when not asked for or not available)."""

    cpu_energy_uj: Optional[int]
    dram_energy_uj: Optional[int]


def _split_host_port(host_port: str) -> Tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"; ValueError saying what is wrong."""
    host, sep, port_text = host_port.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(
            f"zeusd host_port {host_port!r} is not host:port (e.g. 127.0.0.1:4938); fix "
            "ZEUSD_HOST_PORT or the ZeusdConfig, or use ZeusdConfig.uds() for a Unix socket"
        )
    return host, int(port_text)


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a zeusd daemon is and how to authenticate to it.

    Build one with :meth:`tcp`, :meth:`uds` or :meth:`from_env`. ``socket_path`` wins when both
    it and ``host_port`` are set. ``gpu_indices``/``cpu_indices`` are read only by
    :class:`~zeus_cpp.monitor.power_streaming.PowerStreamingClient` (None: every device; ``[]``:
    none).
    """

    host_port: Optional[str] = None
    socket_path: Optional[str] = None
    token: Optional[str] = None
    gpu_indices: Optional[List[int]] = None
    cpu_indices: Optional[List[int]] = None

    @classmethod
    def tcp(cls, host: str, port: int, *, token: Optional[str] = None,
            gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":  # fmt: skip
        """A daemon listening on TCP ``host:port``."""
        return cls(host_port=f"{host}:{port}", token=token, gpu_indices=gpu_indices,
                   cpu_indices=cpu_indices)  # fmt: skip

    @classmethod
    def uds(cls, socket_path: str, *, token: Optional[str] = None,
            gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":  # fmt: skip
        """A daemon on the Unix socket ``socket_path``."""
        return cls(socket_path=socket_path, token=token, gpu_indices=gpu_indices,
                   cpu_indices=cpu_indices)  # fmt: skip

    @classmethod
    def from_env(cls) -> Optional["ZeusdConfig"]:
        """From ``ZEUSD_SOCK_PATH`` (wins) or ``ZEUSD_HOST_PORT``, with ``ZEUSD_TOKEN``; None
        when neither is set."""
        token = os.environ.get("ZEUSD_TOKEN")
        socket_path = os.environ.get("ZEUSD_SOCK_PATH")
        if socket_path is not None:
            return cls.uds(socket_path=socket_path, token=token)
        host_port = os.environ.get("ZEUSD_HOST_PORT")
        if host_port is not None:
            return cls(host_port=host_port, token=token)
        return None

    @property
    def _is_uds(self) -> bool:
        return self.socket_path is not None

    def _transport_args(self) -> Dict[str, Any]:
        """The keyword arguments of the native transports for this daemon."""
        if self._is_uds:
            return {"socket_path": self.socket_path, "token": self.token or None}
        if self.host_port is None:
            raise ValueError("ZeusdConfig has neither socket_path nor host_port set.")
        host, port = _split_host_port(self.host_port)
        return {"host": host, "port": port, "token": self.token or None}

    def make_client(self, timeout_s: Optional[float] = None) -> Any:
        """A new keep-alive connection to the daemon, carrying the token (the reference returns
        an ``httpx.Client``; this is zeus_cpp's transport, whose ``request(method,
        path_and_query)`` returns ``(status, body bytes)``)."""
        timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        return _zeus._ZeusdTransport(timeout_s=timeout, **self._transport_args())

    def url(self, path: str) -> str:
        """The URL of ``path``: ``http://localhost<path>`` over a Unix socket, else
        ``http://<host_port><path>``."""
        if self._is_uds:
            return f"http://localhost{path}"
        return f"http://{self.host_port}{path}"

    @property
    def endpoint(self) -> str:
        """The socket path or ``host:port``, naming this daemon in messages and readings."""
        if self.socket_path is not None:
            return self.socket_path
        if self.host_port is not None:
            return self.host_port
        raise ValueError("ZeusdConfig has neither socket_path nor host_port set.")


def _ids(ids: List[int]) -> str:
    return ",".join(str(i) for i in ids)


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _query(params: Dict[str, str]) -> str:
    # Values are digits, commas and true/false: nothing to escape.
    return "&".join(f"{key}={value}" for key, value in params.items())


class ZeusdClient:
    """A connection to one zeusd daemon, with what it offers and a method per route.

    Args:
        config: The daemon; None reads :meth:`ZeusdConfig.from_env` (and raises
            :class:`ZeusdConnectionError` when neither variable is set).
        timeout_s: Each request's timeout (default 5 s, as the reference's).

    Raises:
        ZeusdConnectionError: The daemon cannot be reached, or ``/discover`` fails or lacks
            fields this client needs.
        ValueError: ``config`` has no endpoint, or a malformed ``host_port``.

    An authentication problem does not raise here: it is kept in :attr:`auth_error` (and
    logged), and :func:`require_capabilities` raises it.
    """

    def __init__(self, config: Optional[ZeusdConfig] = None, *, timeout_s: Optional[float] = None):
        if config is None:
            config = ZeusdConfig.from_env()
            if config is None:
                raise ZeusdConnectionError(
                    "No Zeusd connection configured. Set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, or "
                    "pass a ZeusdConfig."
                )
        self._config = config
        self._timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        self._client = config.make_client(self._timeout_s)
        endpoint = config.endpoint

        try:
            status, body = self._client.request("GET", "/discover")
        except ZeusdConnectionError as error:
            raise ZeusdConnectionError(f"Cannot reach Zeusd at {endpoint}: {error}") from error
        text = body.decode("utf-8", errors="replace")
        if status != 200:
            raise ZeusdConnectionError(
                f"Zeusd at {endpoint} returned HTTP {status} on /discover: {text}"
            )
        try:
            data = json.loads(text)
            self._gpus = [
                GpuInfo(
                    id=int(item["id"]),
                    name=item["name"],
                    pci_address=item["pci_address"],
                    cumulative_energy_available=bool(item["cumulative_energy_available"]),
                )
                for item in data["gpus"]
            ]
            self._cpus = [
                CpuInfo(id=int(item["id"]), dram_available=bool(item["dram_available"]))
                for item in data["cpus"]
            ]
            self._enabled_api_groups = set(data["enabled_api_groups"])
            self._auth_required = bool(data["auth_required"])
        except KeyError as error:
            raise ZeusdConnectionError(
                f"Zeusd at {endpoint} did not report {error} in /discover; the daemon is older "
                "than this version of Zeus. Upgrade zeusd."
            ) from error
        except (ValueError, TypeError) as error:
            raise ZeusdConnectionError(
                f"Zeusd at {endpoint} sent a /discover reply this client cannot read ({error}): "
                f"{text[:200]}"
            ) from error
        self._gpu_ids = [gpu.id for gpu in self._gpus]
        self._cpu_ids = [cpu.id for cpu in self._cpus]
        self._dram_available = [cpu.dram_available for cpu in self._cpus]

        self._auth_error: Optional[str] = None
        self._granted_scopes: FrozenSet[str] = frozenset()
        self._whoami_sub: Optional[str] = None
        self._whoami_exp: Optional[int] = None
        if self._auth_required:
            self._authenticate()

    def _authenticate(self) -> None:
        endpoint = self._config.endpoint
        if not self._config.token:
            self._auth_error = (
                f"Zeusd at {endpoint} requires authentication but no token was provided. Set "
                "the ZEUSD_TOKEN environment variable or pass token= in the config."
            )
        else:
            try:
                status, body = self._client.request("GET", "/auth/whoami")
            except ZeusdConnectionError as error:
                raise ZeusdConnectionError(f"Cannot reach Zeusd at {endpoint}: {error}") from error
            text = body.decode("utf-8", errors="replace")
            whoami: Any = None
            if status == 200:
                try:
                    whoami = json.loads(text)
                except ValueError:
                    whoami = None
            if status == 401:
                self._auth_error = f"Token rejected by Zeusd at {endpoint}: {text}"
            elif status != 200 or not isinstance(whoami, dict):
                self._auth_error = (
                    f"Unexpected response from /auth/whoami at {endpoint} (HTTP {status}): {text}"
                )
            else:
                self._granted_scopes = frozenset(whoami.get("scopes") or [])
                self._whoami_sub = whoami.get("sub")
                self._whoami_exp = whoami.get("exp")
                logger.info(
                    "Authenticated with Zeusd at %s as user '%s' (scopes: %s)",
                    endpoint,
                    self._whoami_sub,
                    sorted(self._granted_scopes),
                )
        if self._auth_error:
            logger.warning("Auth issue with Zeusd at %s: %s", endpoint, self._auth_error)

    # ---- What the daemon offers -------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The socket path or ``host:port`` of the daemon."""
        return self._config.endpoint

    @property
    def gpus(self) -> List[GpuInfo]:
        return list(self._gpus)

    @property
    def gpu_ids(self) -> List[int]:
        return list(self._gpu_ids)

    @property
    def cpus(self) -> List[CpuInfo]:
        return list(self._cpus)

    @property
    def cpu_ids(self) -> List[int]:
        return list(self._cpu_ids)

    @property
    def dram_available(self) -> List[bool]:
        """Whether each CPU package (in :attr:`cpu_ids` order) has DRAM energy."""
        return list(self._dram_available)

    @property
    def auth_required(self) -> bool:
        return self._auth_required

    @property
    def auth_error(self) -> Optional[str]:
        """Why authentication failed, or None (it succeeded, or is not required)."""
        return self._auth_error

    @property
    def granted_scopes(self) -> FrozenSet[str]:
        """The token's scopes (empty when auth is off or failed)."""
        return self._granted_scopes

    def _can(self, api_group: str, scope: str) -> bool:
        if api_group not in self._enabled_api_groups:
            return False
        return not (self._auth_required and scope not in self._granted_scopes)

    @property
    def can_read_gpu(self) -> bool:
        return self._can("gpu-read", "gpu-read")

    @property
    def can_control_gpu(self) -> bool:
        return self._can("gpu-control", "gpu-control")

    @property
    def can_read_cpu(self) -> bool:
        return self._can("cpu-read", "cpu-read")

    # ---- Requests ---------------------------------------------------------------------------

    def _call(self, method: str, path: str, params: Dict[str, str], operation: str) -> str:
        """The body of a 200 answer to `method` `path`?`params`; ZeusdError otherwise."""
        target = path + ("?" + _query(params) if params else "")
        status, body = self._client.request(method, target)
        text = body.decode("utf-8", errors="replace")
        if status != 200:
            raise ZeusdError(f"Failed to {operation}: {text}")
        return text

    def _get_json(self, path: str, params: Dict[str, str], operation: str) -> Any:
        text = self._call("GET", path, params, operation)
        try:
            return json.loads(text)
        except ValueError as error:
            raise ZeusdError(f"Failed to {operation}: the reply is not JSON ({error}): "
                             f"{text[:200]}") from error

    @staticmethod
    def _optional_ids(name: str, ids: Optional[List[int]]) -> Dict[str, str]:
        return {} if ids is None else {name: _ids(ids)}

    def get_gpu_energy(self, gpu_ids: List[int]) -> Dict[int, int]:
        """Cumulative energy in mJ of each GPU in `gpu_ids`."""
        data = self._get_json(
            "/gpu/get_cumulative_energy", {"gpu_ids": _ids(gpu_ids)}, "get_gpu_energy"
        )
        return {int(k): v["energy_mj"] for k, v in data.items()}

    def get_gpu_power(self, gpu_ids: Optional[List[int]] = None) -> GpuPowerSnapshot:
        """Instant power in mW of `gpu_ids` (None: every GPU)."""
        data = self._get_json(
            "/gpu/get_power", self._optional_ids("gpu_ids", gpu_ids), "get_gpu_power"
        )
        return GpuPowerSnapshot(
            timestamp_ms=data["timestamp_ms"],
            power_mw={int(k): v for k, v in data["power_mw"].items()},
        )

    def set_power_limit(self, gpu_ids: List[int], power_limit_mw: int, block: bool = True) -> None:
        """Sets the power limit (mW) of `gpu_ids`; `block=False` returns once queued."""
        params = {
            "gpu_ids": _ids(gpu_ids),
            "power_limit_mw": str(power_limit_mw),
            "block": _flag(block),
        }
        self._call("POST", "/gpu/set_power_limit", params, "set_power_limit")

    def set_persistence_mode(self, gpu_ids: List[int], enabled: bool, block: bool = True) -> None:
        params = {"gpu_ids": _ids(gpu_ids), "enabled": _flag(enabled), "block": _flag(block)}
        self._call("POST", "/gpu/set_persistence_mode", params, "set_persistence_mode")

    def get_persistence_mode(self, gpu_ids: Optional[List[int]] = None) -> Dict[int, bool]:
        data = self._get_json(
            "/gpu/get_persistence_mode",
            self._optional_ids("gpu_ids", gpu_ids),
            "get_persistence_mode",
        )
        return {int(k): v["enabled"] for k, v in data.items()}

    def get_power_limit(self, gpu_ids: Optional[List[int]] = None) -> Dict[int, int]:
        """The power limit in mW of `gpu_ids` (None: every GPU)."""
        data = self._get_json(
            "/gpu/get_power_limit", self._optional_ids("gpu_ids", gpu_ids), "get_power_limit"
        )
        return {int(k): v["power_limit_mw"] for k, v in data.items()}

    def get_power_limit_constraints(
        self, gpu_ids: Optional[List[int]] = None
    ) -> Dict[int, Tuple[int, int]]:
        """(min_mw, max_mw) of each GPU's power limit."""
        data = self._get_json(
            "/gpu/get_power_limit_constraints",
            self._optional_ids("gpu_ids", gpu_ids),
            "get_power_limit_constraints",
        )
        return {int(k): (v["min_power_limit_mw"], v["max_power_limit_mw"]) for k, v in data.items()}

    def _clocks(self, route: str, operation: str, gpu_ids: List[int], min_clock_mhz: int,
                max_clock_mhz: int, block: bool) -> None:
        params = {
            "gpu_ids": _ids(gpu_ids),
            "min_clock_mhz": str(min_clock_mhz),
            "max_clock_mhz": str(max_clock_mhz),
            "block": _flag(block),
        }
        self._call("POST", route, params, operation)

    def _reset(self, route: str, operation: str, gpu_ids: List[int], block: bool) -> None:
        self._call("POST", route, {"gpu_ids": _ids(gpu_ids), "block": _flag(block)}, operation)

    def set_gpu_locked_clocks(
        self, gpu_ids: List[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Locks the graphics clock of `gpu_ids` to [min, max] MHz."""
        self._clocks("/gpu/set_gpu_locked_clocks", "set_gpu_locked_clocks", gpu_ids,
                     min_clock_mhz, max_clock_mhz, block)  # fmt: skip

    def reset_gpu_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        self._reset("/gpu/reset_gpu_locked_clocks", "reset_gpu_locked_clocks", gpu_ids, block)

    def reset_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        """Resets every clock domain (the one reset AMD GPUs have)."""
        self._reset("/gpu/reset_locked_clocks", "reset_locked_clocks", gpu_ids, block)

    def set_mem_locked_clocks(
        self, gpu_ids: List[int], min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Locks the memory clock of `gpu_ids` to [min, max] MHz."""
        self._clocks("/gpu/set_mem_locked_clocks", "set_mem_locked_clocks", gpu_ids,
                     min_clock_mhz, max_clock_mhz, block)  # fmt: skip

    def reset_mem_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        self._reset("/gpu/reset_mem_locked_clocks", "reset_mem_locked_clocks", gpu_ids, block)

    def get_cpu_energy(
        self, cpu_ids: Optional[List[int]] = None, cpu: bool = True, dram: bool = True
    ) -> Dict[int, CpuEnergyResult]:
        """Cumulative package (`cpu`) and DRAM (`dram`) energy in µJ of `cpu_ids`."""
        params = {"cpu": _flag(cpu), "dram": _flag(dram)}
        params.update(self._optional_ids("cpu_ids", cpu_ids))
        data = self._get_json("/cpu/get_cumulative_energy", params, "get_cpu_energy")
        return {
            int(k): CpuEnergyResult(
                cpu_energy_uj=v.get("cpu_energy_uj"), dram_energy_uj=v.get("dram_energy_uj")
            )
            for k, v in data.items()
        }

    def get_cpu_power(self, cpu_ids: Optional[List[int]] = None) -> CpuPowerSnapshot:
        """Power in mW of `cpu_ids` (the daemon samples for one CPU poll period)."""
        data = self._get_json(
            "/cpu/get_power", self._optional_ids("cpu_ids", cpu_ids), "get_cpu_power"
        )
        return CpuPowerSnapshot(
            timestamp_ms=data["timestamp_ms"],
            power_mw={
                int(k): CpuDramPower(cpu_mw=v["cpu_mw"], dram_mw=v.get("dram_mw"))
                for k, v in data["power_mw"].items()
            },
        )

    def get_time(self) -> float:
        """The daemon's Unix time in seconds (``GET /time``)."""
        return self._get_json("/time", {}, "get_time")["timestamp_ms"] / 1000.0

    def make_client(self) -> Any:
        """A new connection to the same daemon with the same token (see
        :meth:`ZeusdConfig.make_client`)."""
        return self._config.make_client(self._timeout_s)

    def url(self, path: str) -> str:
        """The URL of `path` on this daemon (:meth:`ZeusdConfig.url`)."""
        return self._config.url(path)


def require_capabilities(
    client: ZeusdClient,
    *,
    read_gpu: bool = False,
    control_gpu: bool = False,
    read_cpu: bool = False,
    gpu_ids: Optional[List[int]] = None,
    cpu_ids: Optional[List[int]] = None,
) -> None:
    """Fails fast unless `client`'s daemon grants what the caller needs.

    Raises:
        ZeusdAuthError: Authentication failed (:attr:`ZeusdClient.auth_error`).
        ZeusdCapabilityError: A capability is missing (group not enabled, or the token lacks
            the scope), or an id in `gpu_ids`/`cpu_ids` does not exist; every reason in one
            message.
    """
    if client.auth_error:
        raise ZeusdAuthError(client.auth_error)
    reasons: List[str] = []
    for wanted, allowed, scope in (
        (read_gpu, client.can_read_gpu, "gpu-read"),
        (control_gpu, client.can_control_gpu, "gpu-control"),
        (read_cpu, client.can_read_cpu, "cpu-read"),
    ):
        if wanted and not allowed:
            reasons.append(_capability_reason(client, scope))
    for kind, wanted_ids, available in (
        ("GPU", gpu_ids, client.gpu_ids),
        ("CPU", cpu_ids, client.cpu_ids),
    ):
        if wanted_ids is None:
            continue
        missing = set(wanted_ids) - set(available)
        if missing:
            reasons.append(
                f"{kind} indices {sorted(missing)} not available (available: {sorted(available)})"
            )
    if reasons:
        raise ZeusdCapabilityError(f"Zeusd at {client.endpoint}: " + "; ".join(reasons))


def _capability_reason(client: ZeusdClient, scope: str) -> str:
    if scope not in client._enabled_api_groups:
        return f"API group '{scope}' is not enabled on this server"
    if client.auth_required and scope not in client.granted_scopes:
        return f"Token lacks required scope '{scope}' (granted: {sorted(client.granted_scopes)})"
    return f"'{scope}' is not available"
