"""Diagrams of the network notebook 05b builds on one machine (:class:`course_utils.netlab.Network`): its network
namespaces, the veth pairs joining them to a bridge, and the rate limits on both ends of every link. Each returns
the Figure; :mod:`course_utils.diagrams` re-exports it, so the lessons call ``diagrams.network_links()``; the
drawing kit is :mod:`course_utils._drawing`.
"""

from __future__ import annotations

from course_utils._drawing import FONT, _box, _canvas, _check, _finish, _plural

MAX_HOSTS = 4  # more columns than this leave no room for an interface's address


def network_links(hosts: int = 2, rate: str | None = "100 Mbit/s", prefix: str = "dtc", subnet: str = "198.18.0",
                  port: int = 2222):
    """``hosts`` network namespaces (``prefix-0``, ...), each with one worker and an ``eth0`` at
    ``subnet.(i + 1)``, joined by a veth pair each to the bridge ``br0`` in the namespace ``prefix-hub``;
    a token-bucket filter (``tc ... tbf``) limits both ends of every pair to ``rate`` (``None``: no limit drawn).
    The defaults are what :class:`course_utils.netlab.Network` builds for notebook 05b.
    """
    n = _check("hosts", hosts, 1, MAX_HOSTS)
    _check("port", port, 1, 65535)
    limit = None if rate is None else str(rate)
    width, height = 8.0, 3.25
    fig, ax = _canvas(width, height)
    column = (width - 0.2) / n
    # the hub namespace, its bridge across the bottom
    _box(ax, 0.1, 0.62, width - 0.2, 0.9, "coordinator")
    ax.text(0.2, 0.74, f"{prefix}-hub", va="center", fontsize=FONT)
    _box(ax, 1.1, 0.66, width - 2.3, 0.2, "variable", "br0: a bridge (a virtual switch) joining every link",
         "br0: bridge", "br0")
    for i in range(n):
        x0 = 0.1 + i * column
        mid = x0 + column / 2
        # host i's namespace: its worker process and its end of the link
        _box(ax, x0 + 0.05, 1.95, column - 0.1, 0.95, "coordinator")
        ax.text(mid, 2.78, f"{prefix}-{i}: host {i}'s namespace", ha="center", va="center", fontsize=FONT)
        _box(ax, x0 + 0.15, 2.4, column - 0.3, 0.26, "forward", f"worker {i}: {subnet}.{i + 1}:{port}",
             f"worker {i}\n{subnet}.{i + 1}", f"worker {i}", f"w{i}")
        end_w = (column - 0.3) * (0.5 if limit else 1.0)
        _box(ax, x0 + 0.15, 2.0, end_w, 0.3, "backward", f"eth0 {subnet}.{i + 1}", "eth0")
        # the hub's end of the link
        _box(ax, x0 + 0.15, 1.18, end_w, 0.28, "backward", f"h{i}", f"h{i}")
        if limit:
            for y, h in ((2.0, 0.3), (1.18, 0.28)):
                _box(ax, x0 + 0.15 + end_w + 0.05, y, column - 0.35 - end_w, h, "fixed", f"tbf {limit}",
                     f"tbf\n{limit}", "tbf")
        ax.plot([x0 + 0.15 + end_w / 2] * 2, [1.46, 2.0], color="#555555", linewidth=2.2)  # the veth pair
        ax.text(x0 + 0.2 + end_w / 2, 1.73, "veth pair", va="center", fontsize=FONT)
        ax.plot([x0 + 0.15 + end_w / 2] * 2, [0.86, 1.18], color="#555555", linewidth=1)  # port on the bridge
    limited = (f"Grey: a token-bucket filter (tc qdisc … tbf rate {limit}) on both ends of every link."
               if limit else "No rate limit: the links run as fast as this machine moves bytes.")
    ax.text(0.1, 0.08, f"{limited} Addresses from 198.18.0.0/15, the\nbenchmarking range; every interface lives in a "
            "namespace, so this machine's own network is never touched.", va="bottom", fontsize=FONT)
    title = f"{_plural(n, 'host')} on one machine: namespaces, veth pairs, a bridge" + (
        f", links of {limit}" if limit else "")
    return _finish(fig, title, layout=False)
