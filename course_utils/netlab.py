"""Machines joined by network links of a chosen bandwidth, on one Linux machine (network namespaces).

A :class:`Network` gives each of ``hosts`` "machines" its own network namespace (its own interfaces,
addresses and ports), joins them through a bridge in a hub namespace with one veth pair per host, and
limits each link to ``rate`` in both directions with a token-bucket filter (``tc qdisc ... tbf``).
Hosts get addresses from the benchmarking range 198.18.0.0/15 (RFC 2544), never a private or public
one, and the host's own network is never touched: every interface lives in a namespace of its own.

A process runs on host ``i`` under ``ip netns exec`` (:meth:`Network.exec_prefix`, which
:func:`course_utils.cluster.run` takes as ``prefix``). :meth:`Network.counters` reads each link's
byte counters, and :meth:`Network.bandwidth` measures a link with a TCP stream.

A :class:`Network` is a context manager that deletes every namespace it created (and with them
every link) on success, error, timeout and Ctrl-C, and when Python exits; it refuses to start when
a namespace it would create already exists, and says how to remove it (:func:`remove`). Creating
namespaces needs root on Linux with ``ip`` and ``tc`` (Debian's ``iproute2``): :func:`unavailable`
says why they cannot be used here, or returns ``None``.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from course_utils import processes

PREFIX = "dtc"                  # namespaces: dtc-hub, dtc-0, dtc-1, ...
SUBNET = "198.18.0"             # host i gets 198.18.0.(i + 1)/24
PORT = 2222                     # every host has its own ports: all tasks can use the same one
_RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)?bit$")
_SCALE = {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}
_STREAM = "course_utils._tcp_stream"  # the two ends of Network.bandwidth's TCP stream


class NetlabError(RuntimeError):
    """The network could not be created or used; the message says what to do."""


def _tools() -> dict:
    return {name: shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") for name in ("ip", "tc")}


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, or ``None`` when they can."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are a Linux feature (this is {sys.platform})"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (run as root, or in a container or VM where you are)"
    missing = [name for name, path in _tools().items() if path is None]
    if missing:
        return f"{' and '.join(missing)} not found: install Debian's iproute2 (apt-get install iproute2)"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    with processes.interrupts_held():  # a Ctrl-C between add and delete would leave the probe behind
        made = subprocess.run([_tools()["ip"], "netns", "add", probe], capture_output=True, text=True,
                              start_new_session=True)
        if made.returncode == 0:
            subprocess.run([_tools()["ip"], "netns", "delete", probe], capture_output=True, start_new_session=True)
    return None if made.returncode == 0 else f"`ip netns add` failed here: {made.stderr.strip()}"


def existing(prefix: str = PREFIX) -> list[str]:
    """The network namespaces whose names start with ``prefix-``."""
    ip = _tools()["ip"]
    if ip is None:
        return []
    listed = subprocess.run([ip, "netns", "list"], capture_output=True, text=True).stdout
    return sorted(name for name in (line.split()[0] for line in listed.splitlines() if line.strip())
                  if name.startswith(f"{prefix}-"))


def remove(prefix: str = PREFIX) -> list[str]:
    """Delete every namespace named ``prefix-*`` (left by a run that was killed); return their names."""
    names = existing(prefix)
    for name in names:
        subprocess.run([_tools()["ip"], "netns", "delete", name], capture_output=True)
    return names


def rate_bits(rate) -> float | None:
    """``"100mbit"``, ``"1gbit"`` or a number of bit/s as bit/s; ``None`` (no limit) stays ``None``."""
    if rate is None:
        return None
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        return float(rate)
    found = _RATE.match(str(rate).strip().lower())
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"rate {rate!r}: give bit/s as a number, or a string such as '100mbit' or '1gbit', "
                         "or None for no limit")
    return float(found.group(1)) * _SCALE[found.group(2)]


def describe_rate(rate) -> str:
    """``"100 Mbit/s"``, ``"1 Gbit/s"``, ``"unlimited"``."""
    bits = rate_bits(rate)
    if bits is None:
        return "unlimited"
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits:g} bit/s"


def bytes_sent() -> int:
    """Bytes this process's network namespace has sent on all its interfaces but loopback (Linux; 0 elsewhere)."""
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError:
        return 0
    fields = [line.split(":", 1) for line in lines]
    return sum(int(stats.split()[8]) for name, stats in fields if name.strip() != "lo")


class Network:
    """``hosts`` network namespaces joined by links of ``rate`` (``None``: as fast as this machine moves bytes)."""

    def __init__(self, hosts: int = 2, *, rate=None, prefix: str = PREFIX, port: int = PORT):
        if not isinstance(hosts, int) or not 1 <= hosts <= 250:
            raise ValueError(f"hosts must be a whole number from 1 to 250, not {hosts!r}")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,5}", prefix):
            raise ValueError(f"prefix {prefix!r}: use 1-6 lower-case letters or digits, starting with a letter "
                             "(interface names are limited to 15 characters)")
        self.hosts, self.prefix, self.port = hosts, prefix, port
        self.rate = rate_bits(rate)
        self.hub = f"{prefix}-hub"
        self.namespaces = [f"{prefix}-{i}" for i in range(hosts)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(hosts)]
        self.created: list[str] = []

    # -- life cycle ---------------------------------------------------------------------------------
    def __enter__(self) -> Network:
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ip(self, *args, netns: str | None = None) -> str:
        return self._run(_tools()["ip"], *args, netns=netns)

    def _tc(self, *args, netns: str) -> str:
        return self._run(_tools()["tc"], *args, netns=netns)

    @staticmethod
    def _run(tool, *args, netns=None) -> str:
        command = [tool, *(["-n", netns] if netns else []), *map(str, args)]
        # its own session: Jupyter's interrupt goes to the kernel's process group, and `ip` must not die half-way
        done = subprocess.run(command, capture_output=True, text=True, start_new_session=True)
        if done.returncode != 0:
            raise NetlabError(f"`{' '.join(command)}` failed: {done.stderr.strip()}")
        return done.stdout

    def create(self) -> None:
        """Create the namespaces, the bridge and the links (called by ``with``)."""
        reason = unavailable()
        if reason:
            raise NetlabError(f"Cannot create the network: {reason}.")
        taken = [name for name in (self.hub, *self.namespaces) if name in existing(self.prefix)]
        if taken:
            raise NetlabError(f"Namespaces {', '.join(taken)} already exist (left by an earlier run that was "
                              f"killed?). Remove them with `course_utils.netlab.remove({self.prefix!r})` or "
                              f"`ip netns delete NAME`, or choose another prefix.")
        atexit.register(self.close)
        try:
            for name in (self.hub, *self.namespaces):
                with processes.interrupts_held():  # created means recorded, so close() deletes it
                    self._ip("netns", "add", name)
                    self.created.append(name)
                self._ip("link", "set", "lo", "up", netns=name)
            self._ip("link", "add", "br0", "type", "bridge", netns=self.hub)
            self._ip("link", "set", "br0", "up", netns=self.hub)
            for i, (name, address) in enumerate(zip(self.namespaces, self.addresses)):
                # Both ends are created inside namespaces: nothing ever appears in the host's own network.
                self._ip("link", "add", "eth0", "netns", name, "type", "veth", "peer", "name", f"h{i}",
                         "netns", self.hub)
                self._ip("link", "set", f"h{i}", "master", "br0", netns=self.hub)
                self._ip("link", "set", f"h{i}", "up", netns=self.hub)
                self._ip("addr", "add", f"{address}/24", "dev", "eth0", netns=name)
                self._ip("link", "set", "eth0", "up", netns=name)
            self.set_rate(self.rate)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Delete every namespace this network created, and with them its links (safe to call twice)."""
        with processes.interrupts_held():  # every one is deleted, even if Ctrl-C comes meanwhile
            while self.created:
                subprocess.run([_tools()["ip"], "netns", "delete", self.created[-1]], capture_output=True,
                               start_new_session=True)
                self.created.pop()
        atexit.unregister(self.close)

    def add_hub_address(self, address: str) -> None:
        """Give the hub's bridge an address of the hosts' subnet: a process run in the hub namespace (a
        controller serving every host) is then reachable from each of them."""
        self._ip("addr", "add", f"{address}/24", "dev", "br0", netns=self.hub)

    # -- links --------------------------------------------------------------------------------------
    def links(self):
        """Each link's two ends: (namespace, interface), host side then hub side."""
        return [((name, "eth0"), (self.hub, f"h{i}")) for i, name in enumerate(self.namespaces)]

    def set_rate(self, rate) -> None:
        """Limit every link to ``rate`` in both directions (``None``: remove the limit)."""
        bits = rate_bits(rate)
        for end in (end for link in self.links() for end in link):
            netns, device = end
            if bits is not None:  # the bucket holds 1 ms of traffic (at least 32 KB); packets wait up to 50 ms
                burst = max(32_000, int(bits / 8 / 1000))  # replace: one atomic change, never a moment unlimited
                self._tc("qdisc", "replace", "dev", device, "root", "tbf", "rate", f"{int(bits)}bit",
                         "burst", burst, "latency", "50ms", netns=netns)
            elif " tbf " in self._tc("qdisc", "show", "dev", device, netns=netns):
                self._tc("qdisc", "del", "dev", device, "root", netns=netns)
        self.rate = bits

    def qdiscs(self) -> list[str]:
        """What ``tc qdisc show`` says for both ends of every link (to print in a notebook)."""
        return [f"{netns} {device}: " + self._tc("qdisc", "show", "dev", device, netns=netns).strip()
                for link in self.links() for netns, device in link]

    # -- using it -----------------------------------------------------------------------------------
    def exec_prefix(self, host: int) -> list[str]:
        """The command that runs a program on ``host`` (``ip netns exec`` sets the namespace, then execs)."""
        return [_tools()["ip"], "netns", "exec", self.namespaces[host]]

    def hub_prefix(self) -> list[str]:
        """The command that runs a program in the hub namespace (where :meth:`add_hub_address` serves)."""
        return [_tools()["ip"], "netns", "exec", self.hub]

    def task_prefix(self, task_type: str, index: int) -> list[str]:
        """``cluster.run(prefix=...)``: worker ``i`` runs on host ``i``."""
        if task_type != "worker":
            raise ValueError(f"This network places workers only (worker i on host i), not {task_type!r}")
        return self.exec_prefix(index)

    def cluster(self, workers: int | None = None) -> dict:
        """A ``TF_CONFIG`` cluster with worker ``i`` at host ``i``'s address, all on the same port."""
        workers = self.hosts if workers is None else workers
        if not 1 <= workers <= self.hosts:
            raise ValueError(f"workers must be from 1 to {self.hosts} (the network has {self.hosts} hosts)")
        return {"worker": [f"{self.addresses[i]}:{self.port}" for i in range(workers)]}

    def counters(self) -> dict[str, dict[str, int]]:
        """Bytes and packets received and sent so far by each host on its link:
        ``{namespace: {"rx": .., "tx": .., "rx_packets": .., "tx_packets": ..}}`` (bytes / packets: the mean
        frame the interface saw, which segmentation offload makes larger than the MTU)."""
        found = {}
        for name in self.namespaces:
            stats = json.loads(self._ip("-j", "-s", "link", "show", "dev", "eth0", netns=name))[0]["stats64"]
            found[name] = {"rx": stats["rx"]["bytes"], "tx": stats["tx"]["bytes"],
                           "rx_packets": stats["rx"]["packets"], "tx_packets": stats["tx"]["packets"]}
        return found

    def offload(self, host: int = 0) -> dict[str, int]:
        """Host ``host``'s ``eth0``: its MTU and the largest frame the kernel may hand it whole (``gso_max_size``:
        generic segmentation offload, the TCP segments cut into MTU-sized frames later, or never on a veth)."""
        info = json.loads(self._ip("-d", "-j", "link", "show", "dev", "eth0", netns=self.namespaces[host]))[0]
        return {"mtu": info["mtu"], "gso_max_size": info.get("gso_max_size", 0)}

    def bandwidth(self, src: int = 0, dst: int = 1, seconds: float = 2.0) -> float:
        """Bytes per second that one TCP stream moves from host ``src`` to host ``dst``, measured."""
        lines: queue.Queue = queue.Queue()
        log = Path(tempfile.mkdtemp(prefix="netlab-")) / "receiver.log"
        receiver, reader = processes.start(
            [*self.exec_prefix(dst), sys.executable, "-m", _STREAM, "receive", self.addresses[dst], self.port],
            env=dict(os.environ), log_path=log, lines=lines)
        try:
            _, line = lines.get(timeout=30)
            if line != "listening":  # its log goes with its directory below: quote it
                reader.join(timeout=5)
                raise NetlabError(f"The receiver on host {dst} failed; its output:\n{log.read_text(errors='replace')}")
            _send(self.exec_prefix(src), self.addresses[dst], self.port, seconds)
            _, line = lines.get(timeout=30)
            received, elapsed = map(float, line.split())
        except queue.Empty as err:
            raise NetlabError(f"The receiver on host {dst} reported nothing within 30 s") from err
        finally:
            processes.stop([receiver], grace=2.0)
            reader.join(timeout=5)
            shutil.rmtree(log.parent, ignore_errors=True)
        return received / elapsed


def _send(prefix: list[str], host: str, port: int, seconds: float) -> int:
    done = subprocess.run([*prefix, sys.executable, "-m", _STREAM, "send", host, str(port), str(seconds)],
                          capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise NetlabError(f"The sender failed: {done.stderr.strip()[-500:]}")
    return int(done.stdout.split()[0])
