"""Several Slurm nodes on this one machine: each ``slurmd`` in a network namespace of its own
(:mod:`course_utils.netlab`: its own address from 198.18.0.0/15, its own ports) and a UTS namespace of
its own (its own host name), ``slurmctld`` in the hub namespace that joins them, at ``CONTROLLER``.

Names resolve the way a cluster's DNS would make them: each daemon starts in a mount namespace of its own
where the cluster directory's ``hosts`` file is bind-mounted over ``/etc/hosts``, so every daemon, job step
and task, whatever node it is on, finds ``c9``, ``c10`` and the controller at their addresses; the
machine's own ``/etc/hosts`` is never touched. (``nsenter --net`` rather than ``ip netns exec``, which
would also remount ``/sys`` for the namespace and hide the cgroup file systems ``slurmd`` reads.) The
namespaces' prefix is written in the cluster's directory (``netns``) first, so that the janitor can
remove them too if the process that made them dies.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from course_utils import netlab

CONTROLLER = "slurmctl"
NODE_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")


class Nodes:
    """The namespaces, addresses and hosts file of a multi-node local cluster (a context manager)."""

    def __init__(self, names: list[str], directory: Path):
        bad = [n for n in names if not NODE_NAME.fullmatch(n)]
        if bad or len(set(names)) != len(names) or not 2 <= len(names) <= 16:
            raise ValueError(f"nodes {names}: give 2 to 16 different host names of lower-case letters, digits "
                             "and '-', starting with a letter (e.g. ['c9', 'c10'])")
        self.names, self.directory = list(names), directory
        self.network = netlab.Network(len(names), prefix="s" + secrets.token_hex(2))
        self.address = dict(zip(names, self.network.addresses))
        self.controller_address = f"{netlab.SUBNET}.254"

    def __enter__(self) -> Nodes:
        (self.directory / "netns").write_text(self.network.prefix + "\n")  # for the janitor, first
        hosts = "127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in self.address.items())
        (self.directory / "hosts").write_text(hosts + f"{self.controller_address} {CONTROLLER}\n")
        for name in self.names:
            (self.directory / f"spool-{name}").mkdir()
        try:
            self.network.create()
            self.network.add_hub_address(self.controller_address)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.network.close()
        remove(self.directory)

    def conf_lines(self, cpus_per_node: int) -> tuple[dict, list[str]]:
        """``slurm.conf`` settings and node lines: the controller on the hub, each node at its address."""
        settings = {"SlurmctldHost": f"{CONTROLLER}({self.controller_address})",
                    "SlurmdSpoolDir": self.directory / "spool-%n", "SlurmdPidFile": self.directory / "slurmd-%n.pid"}
        lines = [f"NodeName={n} NodeAddr={a} NodeHostname={n} CPUs={cpus_per_node} State=UNKNOWN"
                 for n, a in self.address.items()]
        return settings, [*lines, f"PartitionName=course Nodes={','.join(self.names)} Default=YES "
                                  "MaxTime=INFINITE State=UP"]

    def controller_prefix(self) -> list[str]:
        """Runs a program as the controller's host (``slurmctld`` checks its host name): the hub namespace,
        and a UTS namespace named ``CONTROLLER``; the Slurm commands the notebook runs go there too."""
        return self._as(self.network.hub, CONTROLLER)

    def node_prefix(self, name: str) -> list[str]:
        """Runs a program as node ``name``: its network namespace, and a UTS namespace with its host name."""
        return self._as(self.network.namespaces[self.names.index(name)], name)

    def _as(self, namespace: str, host: str) -> list[str]:
        """In ``namespace``'s network, with ``host`` as host name and the cluster's hosts file."""
        setup = f'mount --bind {self.directory / "hosts"} /etc/hosts && hostname {host} && exec "$@"'
        return ["nsenter", f"--net=/run/netns/{namespace}", "unshare", "--mount", "--uts", "sh", "-c", setup, "sh"]


def remove(directory: Path) -> list[str]:
    """Delete the namespaces of the prefix named in ``directory``/netns (what :class:`Nodes` made, or a part
    of it); return their names."""
    listed = directory / "netns"
    if not listed.exists():
        return []
    prefix = listed.read_text().strip()
    names = netlab.remove(prefix)
    listed.unlink()
    return names
