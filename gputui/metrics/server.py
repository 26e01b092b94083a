"""The HTTP endpoint: ``--serve-metrics [HOST:]PORT`` (default 127.0.0.1:9400).

prometheus-client's own server answers each scrape on its own thread, in the
Prometheus text format or OpenMetrics (as the scraper's Accept header asks).
"""

from __future__ import annotations

import errno
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from gputui.errors import UserError
from gputui.metrics import DEFAULT_HOST
from gputui.metrics.live import LiveMetrics

OPTION = "--serve-metrics"


def parse_listen_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT`` to (host, port); UserError otherwise."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_HOST, text
    host = host.strip("[]") if host.startswith("[") else host
    if len(host) > 253:  # RFC 1035; a longer one is a paste gone wrong, and the resolver would choke on it
        raise UserError(f"{OPTION}: a host name has 253 characters at most, got one of {len(host)}")
    # isdigit() alone takes "²"
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535 or (sep and not host):
        raise UserError(f"{OPTION}: expected [HOST:]PORT with a port from 0 (any free one) to 65535, got {text!r}")
    return host, int(port_text)


@dataclass
class MetricsServer:
    live: LiveMetrics  # the observer to add to each session
    host: str
    port: int  # the bound port (the one asked for, or the one picked for port 0)
    _httpd: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def start_metrics_server(address: str, price_per_hour: float | None = None) -> MetricsServer:
    """Bind and serve now, so a port in use is a one-line error before the run starts."""
    from prometheus_client import CollectorRegistry, start_http_server

    from gputui.metrics.families import SnapshotCollector

    host, port = parse_listen_address(address)
    live = LiveMetrics(price_per_hour)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(live))
    try:
        httpd, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UserError(f"{OPTION}: port {port} on {host} is already in use (is another exporter running? pick another port)") from None
        raise UserError(f"{OPTION}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except (UnicodeError, ValueError):  # "a..b": an empty label, which the resolver's IDNA codec refuses
        raise UserError(f"{OPTION}: {host!r} is not a host name or address this machine can listen on") from None
    return MetricsServer(live=live, host=host, port=httpd.server_port, _httpd=httpd, _thread=thread)
