"""Multi-process cluster on loopback: join, inspect, lose a node, shut down."""
import signal
import socket
import subprocess
import threading
import time

from cafagent_testlib import free_port


def run(binary, *args, timeout=20):
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)


def test_nodes_register_and_a_killed_node_is_reported_down(caf_agent, nodes):
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    rollout = nodes("--role", "rollout", "--coordinator", addr, name="rollout")
    pool = nodes("--role", "gpu-pool", "--coordinator", addr, name="gpu-pool")
    rollout.wait_for("joined")
    pool.wait_for("joined")
    coord.wait_for(f"node rollout@")
    coord.wait_for(f"node gpu-pool@")

    view = run(caf_agent, "--role", "inspector", "--coordinator", addr)
    assert view.returncode == 0, view.stderr
    assert "2 nodes (2 up)" in view.stdout
    assert f"gpu-pool@" in view.stdout and "rollout@" in view.stdout

    killed_at = time.monotonic()
    pool.proc.send_signal(signal.SIGKILL)
    pool.proc.wait()
    seen_at = coord.wait_for(f"gpu-pool@", timeout=1) and coord.wait_for(" down (", timeout=5)
    assert seen_at - killed_at < 5.0

    view = run(caf_agent, "--role", "inspector", "--coordinator", addr)
    assert "(1 up)" in view.stdout
    assert "down" in view.stdout

    assert rollout.stop(signal.SIGTERM) == 0
    coord.wait_for(" left (SIGTERM)")
    assert coord.stop(signal.SIGTERM) == 0
    assert "shutting down (SIGTERM)" in coord.log()


def test_member_started_before_the_coordinator_joins_once_it_listens(caf_agent, nodes, tmp_path):
    """Nodes and the coordinator are launched together: a member whose coordinator is not
    listening yet retries for cluster.connect_timeout_ms instead of exiting."""
    port = free_port()
    addr = f"127.0.0.1:{port}"
    config = tmp_path / "slow_start.toml"
    config.write_text("[cluster]\nconnect_timeout_ms = 20000\n")
    pool = nodes("--role", "gpu-pool", "--config", str(config), "--coordinator", addr, name="gpu-pool")
    time.sleep(1.5)  # several refused attempts
    assert pool.proc.poll() is None, pool.log()
    coord = nodes("--role", "coordinator", "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    pool.wait_for("joined", timeout=10)
    coord.wait_for("node gpu-pool@")
    assert pool.stop(signal.SIGTERM) == 0
    assert coord.stop(signal.SIGTERM) == 0


def test_stopped_node_goes_stale_then_recovers(caf_agent, nodes):
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--port", str(port))
    coord.wait_for("listening on")
    learner = nodes("--role", "learner", "--coordinator", addr)
    learner.wait_for("joined")
    learner.proc.send_signal(signal.SIGSTOP)
    try:
        coord.wait_for(" stale (no heartbeat", timeout=8)
    finally:
        learner.proc.send_signal(signal.SIGCONT)
    coord.wait_for(" up (heartbeat resumed)", timeout=8)
    assert learner.stop(signal.SIGTERM) == 0
    assert coord.stop(signal.SIGINT) == 0


def test_coordinator_port_in_use_is_a_clear_error(caf_agent, nodes):
    port = free_port()
    first = nodes("--role", "coordinator", "--port", str(port))
    first.wait_for("listening on")
    second = run(caf_agent, "--role", "coordinator", "--port", str(port))
    assert second.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1


def test_unreachable_coordinator_is_a_clear_error(caf_agent):
    port = free_port()
    started = time.monotonic()
    res = run(caf_agent, "--role", "rollout", "--coordinator", f"127.0.0.1:{port}")
    assert res.returncode == 2
    assert f"cannot reach coordinator at 127.0.0.1:{port}" in res.stderr
    assert "attempt(s) over" in res.stderr  # it retried for cluster.connect_timeout_ms (5 s)
    assert time.monotonic() - started < 10


def test_peer_that_is_not_a_coordinator_does_not_hang(caf_agent, tmp_path):
    """A server that accepts and says nothing (or garbage): a one-line error, no hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    conns = []

    def serve():
        while True:
            try:
                c, _ = server.accept()
            except OSError:
                return
            c.sendall(b"HTTP/1.1 200 OK\r\n\r\nnot a caf-agent coordinator\n" * 4)
            conns.append(c)

    threading.Thread(target=serve, daemon=True).start()
    config = tmp_path / "fast.toml"
    config.write_text("[cluster]\nconnect_timeout_ms = 1500\n")
    started = time.monotonic()
    res = run(caf_agent, "--role", "gpu-pool", "--config", str(config),
              "--coordinator", f"127.0.0.1:{port}")
    server.close()
    assert res.returncode == 2
    assert "127.0.0.1:%d" % port in res.stderr
    assert time.monotonic() - started < 10


def test_bad_command_lines_and_configs(caf_agent, tmp_path):
    res = run(caf_agent, "--role", "wizard")
    assert res.returncode == 2 and "unknown role 'wizard'" in res.stderr
    res = run(caf_agent)
    assert res.returncode == 2 and "--role" in res.stderr
    res = run(caf_agent, "--role", "local", "--config", str(tmp_path / "missing.toml"))
    assert res.returncode == 2 and "missing.toml" in res.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[gpu_pool]\nslots = 'eight'\nflavour = 1\n")
    res = run(caf_agent, "--role", "local", "--config", str(bad))
    assert res.returncode == 2
    assert "gpu_pool.slots" in res.stderr and "gpu_pool.flavour" in res.stderr
    res = run(caf_agent, "--role", "rollout", "--coordinator", "nocolon")
    assert res.returncode == 2 and "HOST:PORT" in res.stderr
    res = run(caf_agent, "--help")
    assert res.returncode == 0 and "--role" in res.stdout


def test_local_role_starts_every_role_and_exits_cleanly(caf_agent):
    res = run(caf_agent, "--role", "local", "--exit-after-start", timeout=120)
    assert res.returncode == 0, res.stderr
    for role in ("gpu-pool", "inference", "learner", "rollout"):
        assert f"started {role}:" in res.stderr
        assert f"node local/{role}@" in res.stderr
    assert "shut down cleanly" in res.stderr
