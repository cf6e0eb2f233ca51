"""A real Prometheus server (and node_exporter) for the tests: Debian's packages, run
on 127.0.0.1 with a temporary config and store, ended by their pid. `.ci/run` installs
them when missing; elsewhere a test that needs them is skipped with the reason."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers.process import end

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def missing() -> str | None:
    """Why the real components cannot run here (None: they can)."""
    for tool in (PROMETHEUS, NODE_EXPORTER, PROMTOOL):
        if not Path(tool).exists():
            return f"{tool} is not installed (apt-get install prometheus prometheus-node-exporter)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
        return json.loads(response.read())


class Prometheus:
    """A Prometheus server scraping ``targets`` ({job: [host:port, ...]}) every
    ``interval`` seconds, with the rule file ``rules`` (evaluated every second)."""

    def __init__(self, folder: Path, targets: dict[str, list[str]], rules: Path,
                 interval: float) -> None:
        self.port = free_port()
        config = {
            "global": {"scrape_interval": f"{interval:g}s", "evaluation_interval": "1s",
                       "scrape_timeout": f"{interval:g}s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": hosts}]}
                               for job, hosts in targets.items()],
        }
        (folder / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.log = (folder / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:  # noqa: S310
                return bool(response.status == 200)
        except OSError:
            return False

    def targets_up(self) -> int:
        data = get(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
        return sum(1 for t in data if t["health"] == "up")

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result (a vector), evaluated at ``at`` (unix seconds; None:
        now); fails on a query Prometheus refuses."""
        params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
        reply = get(f"{self.url}/api/v1/query?" + urllib.parse.urlencode(params))
        assert reply["status"] == "success", (expr, reply)
        result: list[dict[str, Any]] = reply["data"]["result"]
        return result

    def value(self, expr: str, at: float | None = None) -> float | None:
        """The one value of a query, or None when it has no series (``at``: see query;
        two values asked at one ``at`` come from the same scrape)."""
        result = self.query(expr, at)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None

    def close(self) -> None:
        end(self.proc)
        self.log.close()


def node_exporter(folder: Path, textfiles: Path) -> tuple[subprocess.Popen[Any], int]:
    """node_exporter with only its textfile collector, reading ``textfiles``."""
    port = free_port()
    proc = subprocess.Popen(
        [NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
         f"--collector.textfile.directory={textfiles}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=(folder / "node_exporter.log").open("w"), stderr=subprocess.STDOUT)
    return proc, port
