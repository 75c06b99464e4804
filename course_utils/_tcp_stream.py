"""The two ends of :meth:`course_utils.netlab.Network.bandwidth`'s TCP stream, each run in a host's namespace.

``python -m course_utils._tcp_stream receive HOST PORT``: print ``listening``, accept one connection,
count its bytes, then print ``BYTES SECONDS``. ``... send HOST PORT SECONDS``: send zeros for that long,
then print the bytes sent.
"""

import socket
import sys
import time


def _receive(host: str, port: int) -> None:
    with socket.create_server((host, port)) as server:
        print("listening", flush=True)
        conn, _ = server.accept()
        total, start = 0, time.perf_counter()
        with conn:
            while chunk := conn.recv(1 << 20):
                total += len(chunk)
        print(total, time.perf_counter() - start, flush=True)


def _send_for(host: str, port: int, seconds: float) -> None:
    sent, chunk = 0, b"\0" * (1 << 20)
    with socket.create_connection((host, port), timeout=10) as conn:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            conn.sendall(chunk)
            sent += len(chunk)
    print(sent)


if __name__ == "__main__":
    if sys.argv[1] == "receive":
        _receive(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "send":
        _send_for(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
