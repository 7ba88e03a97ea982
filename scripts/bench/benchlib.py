"""Helpers the benchmark scripts in this folder share (stdlib only).

Import as `from benchlib import free_port, wait_listening, stop, nginx_conf` from a
script run as `python3 scripts/bench/NAME.py` (its folder is on sys.path).
"""
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_listening(port, proc, timeout=15.0):
    """Waits until 127.0.0.1:`port` accepts a connection; raises if `proc`
    exits first or `timeout` seconds pass."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start listening")


def stop(proc, timeout=5.0):
    """SIGTERM, then SIGKILL after `timeout` seconds; reaps the process."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def nginx_conf(workers, port, work, root):
    """The nginx configuration the bench scripts run: `workers` worker
    processes serving `root` on 127.0.0.1:`port`, in the foreground, every
    path inside `work`, no access log. nginx's defaults otherwise (no
    sendfile); skq bench's own peer configuration is in
    crates/skq-bench/src/peers.rs."""
    return f"""daemon off;
master_process on;
worker_processes {workers};
pid {work}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path {work}/tmp-body;
    proxy_temp_path {work}/tmp-proxy;
    fastcgi_temp_path {work}/tmp-fastcgi;
    uwsgi_temp_path {work}/tmp-uwsgi;
    scgi_temp_path {work}/tmp-scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {root}; }}
    }}
}}
"""
