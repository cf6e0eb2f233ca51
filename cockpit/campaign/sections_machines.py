"""The ``machines:`` section: how to reach each machine of a multi-package campaign (D12).

Each entry names the SSH destination (a host, ``user@host`` or an alias of the OpenSSH
client config), the campaign folder there, and optionally the port, the OpenSSH
client config file (``ssh -F``) and the cockpit command on that machine. The checks
across sections: every stage's ``machine`` has an entry, and the entries are the
machines 1..``package.count``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cockpit.campaign.checker import Checker, kind_of
from cockpit.campaign.model import Machine, Package, Stage
from cockpit.campaign.yamlread import KeyPath

MACHINE_KEYS = ("ssh", "path", "port", "ssh_config", "cockpit")


def read_machines(check: Checker, value: Any, path: KeyPath) -> dict[int, Machine]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        check.err(path, f"machines must be a mapping (number: {{ssh, path}}), not {kind_of(value)}")
        return {}
    out: dict[int, Machine] = {}
    for key, entry in value.items():
        number = key
        if isinstance(key, str) and key.isdigit():
            number = int(key)
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            check.err(path + (key,), f"machine {key!r}: a machine is a number from 1", key=True)
            continue
        where = path + (key,)
        fields = check.mapping(entry, where, MACHINE_KEYS, ("ssh", "path"),
                               what=f"machine {number}")
        if fields is None:
            continue
        ssh = check.string(fields.get("ssh"), where + ("ssh",), "ssh destination") \
            if "ssh" in fields else None
        folder = check.string(fields.get("path"), where + ("path",), "campaign folder") \
            if "path" in fields else None
        if ssh is not None and ssh.startswith("-"):
            check.err(where + ("ssh",), f"ssh destination {ssh!r} may not start with '-'")
            ssh = None
        port = None
        if "port" in fields:
            port = check.integer(fields["port"], where + ("port",), "port")
            if port is not None and port > 65535:
                check.err(where + ("port",), f"port {port} is above 65535")
                port = None
        config = None
        if fields.get("ssh_config") is not None:
            config = check.string(fields["ssh_config"], where + ("ssh_config",), "ssh_config")
        command = "cockpit"
        if fields.get("cockpit") is not None:
            command = check.string(fields["cockpit"], where + ("cockpit",),
                                   "cockpit command") or "cockpit"
        if ssh is None or folder is None:
            continue
        out[number] = Machine(number, ssh, folder, port, config, command)
    return out


def check_machines(check: Checker, machines: dict[int, Machine], stages: Sequence[Stage],
                   package: Package | None, raw_stages: Any) -> None:
    """With a ``machines:`` section: every stage's machine has an entry, and the entries
    are the package's machines (1..count)."""
    if not machines:
        return
    if package is not None and sorted(machines) != list(range(1, package.count + 1)):
        listed = ", ".join(str(n) for n in sorted(machines))
        check.err(("machines",), f"machines lists {listed} but the package count is "
                  f"{package.count} (one entry per machine, 1..{package.count})")
    for index, stage in enumerate(stages):
        if stage.machine not in machines:
            where: KeyPath = ("stages", index, "machine")
            if not (isinstance(raw_stages, list) and index < len(raw_stages)
                    and isinstance(raw_stages[index], dict) and "machine" in raw_stages[index]):
                where = ("stages", index)
            check.err(where, f"stage {stage.id!r} runs on machine {stage.machine}, which has "
                      "no entry under machines:")
