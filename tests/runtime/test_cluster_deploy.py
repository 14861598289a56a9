"""deploy/: the Kubernetes manifest is checked offline (no kubectl: YAML parsed, each object's
required fields, selectors that match their pods, GPU requests, the certificates from a Secret,
the embedded config valid for caf-agent), and the Slurm batch script's commands (DRY_RUN with
loopback hosts) are started here: a TLS cluster that runs its episodes."""
import re
import shlex
import subprocess
import tomllib

import yaml

from cafagent_testlib import REPO, Node, free_port
from test_cluster_faults import assert_one_record_each, plan_dir, write_config

MANIFEST = REPO / "deploy" / "k8s" / "caf-agent.yaml"
SBATCH = REPO / "deploy" / "slurm" / "caf-agent.sbatch"

# What each kind needs to be accepted by the API server (the parts this manifest uses).
REQUIRED = {
    "Namespace": [("metadata", "name")],
    "ConfigMap": [("metadata", "name"), ("metadata", "namespace"), ("data",)],
    "Service": [("metadata", "name"), ("metadata", "namespace"), ("spec", "selector")],
    "StatefulSet": [("metadata", "name"), ("metadata", "namespace"), ("spec", "serviceName"), ("spec", "replicas"),
                    ("spec", "selector", "matchLabels"), ("spec", "template", "metadata", "labels"),
                    ("spec", "template", "spec", "containers")],
}
API = {"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "StatefulSet": "apps/v1"}


def get(doc, path):
    for key in path:
        assert isinstance(doc, dict) and key in doc, f"missing {'.'.join(path)}"
        doc = doc[key]
    return doc


def test_kubernetes_manifest_is_valid_offline(caf_agent, tmp_path):
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d is not None]
    by_kind = {}
    for d in docs:
        kind = d.get("kind")
        assert kind in REQUIRED, f"unexpected kind {kind}"
        assert d.get("apiVersion") == API[kind], d
        for path in REQUIRED[kind]:
            get(d, path)
        name = d["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63, name
        by_kind.setdefault(kind, {})[name] = d
    services = by_kind["Service"]
    config = tomllib.loads(by_kind["ConfigMap"]["caf-agent-config"]["data"]["cluster.toml"])
    roles = {}
    for name, s in by_kind["StatefulSet"].items():
        spec = s["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items(), name
        assert spec["serviceName"] in services, f"{name}: no Service {spec['serviceName']}"
        (container,) = spec["template"]["spec"]["containers"]
        cmd = container["command"]
        assert cmd[0].endswith("caf-agent") and cmd[1] == "--role", cmd
        roles[cmd[2]] = s
        volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert set(mounts) <= set(volumes), name
        assert volumes["tls"]["secret"]["secretName"] == "caf-agent-tls"
        assert volumes["config"]["configMap"]["name"] == "caf-agent-config"
        # The TLS files the config names are where the Secret is mounted.
        for key in ("tls_cert", "tls_key", "tls_ca"):
            assert config["cluster"][key].startswith(mounts["tls"]["mountPath"] + "/"), key
        if cmd[2] != "coordinator":
            host, port = cmd[cmd.index("--coordinator") + 1].rsplit(":", 1)
            assert host.startswith("caf-agent-coordinator-0.caf-agent-coordinator."), host
            assert int(port) == config["cluster"]["port"]
    assert set(roles) == {"coordinator", "gpu-pool", "rollout", "learner"}, roles
    assert roles["coordinator"]["spec"]["replicas"] == 1
    assert roles["gpu-pool"]["spec"]["replicas"] * config["gpu_pool"]["slots"] == 128
    for role in ("gpu-pool", "learner"):
        limits = roles[role]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) == 8, role
    coord_svc = services["caf-agent-coordinator"]
    assert coord_svc["spec"]["clusterIP"] == "None"
    assert coord_svc["spec"]["selector"].items() <= roles["coordinator"]["spec"]["template"]["metadata"]["labels"].items()
    assert [p["port"] for p in coord_svc["spec"]["ports"]] == [config["cluster"]["port"]]
    # The embedded config is one caf-agent accepts (every key known, every value in range): its
    # TLS file check is the first thing that fails here, where the Secret's files are absent.
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(by_kind["ConfigMap"]["caf-agent-config"]["data"]["cluster.toml"])
    res = subprocess.run([str(caf_agent), "--role", "coordinator", "--config", str(cfg), "--port", "0"],
                         capture_output=True, text=True, timeout=30, cwd=REPO)
    assert res.returncode == 2, res.stderr
    assert "cluster.tls_ca: '/etc/caf-agent/tls/ca.pem' is not a file" in res.stderr, res.stderr


def test_slurm_script_commands_run_a_tls_cluster_on_loopback(caf_agent, tmp_path):
    base = write_config(tmp_path)
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "HOSTS": "127.0.0.1 127.0.0.1 127.0.0.1 127.0.0.1", "GPU_POOL_NODES": "2",
           "DRY_RUN": "1", "CONFIG": str(base), "CERTS": str(tmp_path / "certs"), "RUN_DIR": str(tmp_path / "job"),
           "PORT": str(port), "EPISODES": "24", "CAF_AGENT": str(caf_agent)}
    res = subprocess.run(["bash", str(SBATCH)], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    lines = [l.split("\t", 1) for l in res.stdout.splitlines()]
    assert [shlex.split(c)[2] for _, c in lines] == ["coordinator", "gpu-pool", "gpu-pool", "rollout"], lines
    job_cfg = tomllib.loads((tmp_path / "job" / "cluster.toml").read_text())
    assert job_cfg["cluster"]["listen_host"] == "127.0.0.1"
    assert job_cfg["cluster"]["tls_ca"] == str(tmp_path / "certs" / "ca.pem")
    started = []
    for i, (host, command) in enumerate(lines):
        argv = shlex.split(command)
        if argv[2] != "coordinator":
            assert argv[argv.index("--coordinator") + 1] == f"{lines[0][0]}:{port}"
        node = Node(argv[0], argv[1:], tmp_path / f"node{i}.log")
        started.append(node)
        if i == 0:
            node.wait_for("listening on")
    try:
        coord = started[0]
        assert coord.proc.wait(timeout=120) == 0, coord.log()
        assert_one_record_each(plan_dir(coord.log()), 24)
        assert coord.log().count("registered: role=") == 3, coord.log()
    finally:
        for n in started:
            n.kill()
    # Too few nodes for the layout is a clear error.
    env["HOSTS"] = "127.0.0.1 127.0.0.1"
    res = subprocess.run(["bash", str(SBATCH)], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "need at least 4" in res.stderr, res.stderr
