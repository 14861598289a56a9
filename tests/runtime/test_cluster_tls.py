"""Mutual TLS between nodes on loopback, with certificates made in the test by
deploy/make-certs.sh (the openssl CLI): a TLS cluster runs its episodes; a node whose
certificate is not the cluster CA's is refused with a clear message (by its own check, and by
the coordinator when it trusts another CA); unauthenticated peers (plain TCP with a BASP header
announcing 4 GiB, TLS without a certificate, TLS with a foreign one) are dropped in the
handshake and cost the coordinator no memory; plaintext off loopback is refused."""
import os
import socket
import ssl
import subprocess
import time

from cafagent_testlib import REPO, free_port
from test_cluster_faults import assert_one_record_each, plan_dir, write_config

# A BASP client handshake header (CAF 0.17: operation, 2 padding bytes, flags, payload length
# big-endian, operation data, source and destination actor) announcing 4 GiB - 1 of payload.
HUGE_HEADER = bytes([1, 0, 0, 0]) + (0xFFFFFFFF).to_bytes(4, "big") + bytes(24)


def make_certs(directory, *names):
    subprocess.run([str(REPO / "deploy" / "make-certs.sh"), str(directory), *names], check=True,
                   capture_output=True, timeout=60)
    return directory


def tls_config(base, out, certs, name, ca=None):
    out.write_text(base.read_text().replace(
        "[cluster]\n", f'[cluster]\ntls_cert = "{certs / (name + ".pem")}"\ntls_key = "{certs / (name + ".key")}"\n'
                       f'tls_ca = "{ca or certs / "ca.pem"}"\n', 1))
    return out


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_tls_cluster_runs_episodes_and_refuses_foreign_certificates(nodes, caf_agent, tmp_path):
    certs = make_certs(tmp_path / "certs", "coordinator", "pool", "rollout")
    other = make_certs(tmp_path / "other", "intruder")
    base = write_config(tmp_path)
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord_cfg = tls_config(base, tmp_path / "coordinator.toml", certs, "coordinator")
    coord = nodes("--role", "coordinator", "--config", str(coord_cfg), "--port", str(port), "--episodes", "30",
                  name="coordinator")
    coord.wait_for("listening on")
    # Signed by another CA, checked against the cluster's: refused before connecting.
    bad = tls_config(base, tmp_path / "bad.toml", other, "intruder", ca=certs / "ca.pem")
    res = subprocess.run([str(caf_agent), "--role", "rollout", "--config", str(bad), "--coordinator", addr],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "does not verify against cluster.tls_ca" in res.stderr, res.stderr
    # Trusting its own CA: it connects, and the coordinator refuses it in the handshake.
    foreign = tls_config(base, tmp_path / "foreign.toml", other, "intruder")
    res = subprocess.run([str(caf_agent), "--role", "rollout", "--config", str(foreign), "--coordinator", addr],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "TLS: the coordinator refused this node's certificate" in res.stderr, res.stderr
    # A plaintext node cannot join a TLS coordinator either.
    res = subprocess.run([str(caf_agent), "--role", "rollout", "--config", str(base), "--coordinator", addr],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "registered" not in coord.log(), coord.log()
    nodes("--role", "gpu-pool", "--config", str(tls_config(base, tmp_path / "pool.toml", certs, "pool")),
          "--coordinator", addr, name="pool")
    nodes("--role", "rollout", "--config", str(tls_config(base, tmp_path / "rollout.toml", certs, "rollout")),
          "--coordinator", addr, name="rollout")
    assert coord.proc.wait(timeout=120) == 0, coord.log()
    assert_one_record_each(plan_dir(coord.log()), 30)
    assert coord.log().count("registered: role=") == 2, coord.log()


def test_unauthenticated_peers_are_dropped_and_cost_no_memory(nodes, tmp_path):
    certs = make_certs(tmp_path / "certs", "coordinator", "pool", "rollout")
    other = make_certs(tmp_path / "other", "intruder")
    base = write_config(tmp_path)
    port = free_port()
    coord = nodes("--role", "coordinator", "--config", str(tls_config(base, tmp_path / "c.toml", certs, "coordinator")),
                  "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    time.sleep(0.5)
    baseline = rss_kb(coord.proc.pid)

    def plain():
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(HUGE_HEADER)
            s.settimeout(5)
            try:
                while s.recv(4096):
                    pass
            except (ConnectionError, socket.timeout):
                pass

    def over_tls(cert=None):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        if cert:
            ctx.load_cert_chain(str(other / f"{cert}.pem"), str(other / f"{cert}.key"))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                with ctx.wrap_socket(raw) as s:
                    s.sendall(HUGE_HEADER)
                    s.settimeout(5)
                    while s.recv(4096):
                        pass
        except (ssl.SSLError, ConnectionError, socket.timeout, OSError):
            pass  # refused: what must happen

    for _ in range(5):
        plain()
        over_tls()
        over_tls("intruder")
    time.sleep(0.5)
    assert coord.proc.poll() is None, coord.log()
    grown_mb = (rss_kb(coord.proc.pid) - baseline) / 1024
    assert grown_mb < 50, f"the coordinator grew {grown_mb:.0f} MB from unauthenticated peers"
    assert "registered" not in coord.log()


def test_plaintext_off_loopback_is_refused(caf_agent, tmp_path):
    cfg = write_config(tmp_path)
    cfg.write_text(cfg.read_text().replace("[cluster]\n", '[cluster]\nlisten_host = "0.0.0.0"\n', 1))
    res = subprocess.run([str(caf_agent), "--role", "coordinator", "--config", str(cfg), "--port", "0"],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "cluster.listen_host '0.0.0.0' is not a loopback address and TLS is off" in res.stderr, res.stderr
    res = subprocess.run([str(caf_agent), "--role", "rollout", "--config", str(cfg), "--coordinator", "10.1.2.3:4242"],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "coordinator address '10.1.2.3:4242' is not a loopback address" in res.stderr, res.stderr
    partial = write_config(tmp_path)
    partial.write_text(partial.read_text().replace("[cluster]\n", '[cluster]\ntls_cert = "x.pem"\n', 1))
    res = subprocess.run([str(caf_agent), "--role", "coordinator", "--config", str(partial)],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2 and "tls_key" in res.stderr, res.stderr
