"""Versioned weight publication across processes: a coordinator, a rollout node and an
inference node, both serving the small model with the libtorch backend. The inspector
publishes a new checkpoint; every policy service stages it and says so, and bad
publications (missing files, an older version) are refused with the node and the reason."""
import os
import subprocess

from cafagent_testlib import REPO, free_port, make_tiny_checkpoint, tiny_model


def cluster_config(tmp_path, model):
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f"""
[runtime]
run_dir = "{tmp_path / 'run'}"
[policy]
backend = "libtorch"
model_dir = "{model}"
max_batch = 2
serve_port = 0
""")
    return cfg


def publish(caf_agent, addr, path, version):
    return subprocess.run([str(caf_agent), "--role", "inspector", "--coordinator", addr,
                           "--publish-weights", str(path), "--weights-version", str(version)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)


def test_published_weights_reach_every_policy_service(caf_agent, nodes, tmp_path):
    model = tiny_model()
    newer = make_tiny_checkpoint(tmp_path / "step-1", seed=1)
    cfg = cluster_config(tmp_path, model)
    port = free_port()
    addr = f"127.0.0.1:{port}"
    coord = nodes("--role", "coordinator", "--config", str(cfg), "--port", str(port), name="coordinator")
    coord.wait_for("listening on")
    nodes("--role", "rollout", "--config", str(cfg), "--coordinator", addr, name="rollout")
    nodes("--role", "inference", "--config", str(cfg), "--coordinator", addr, name="inference")
    coord.wait_for("service policy on rollout@", timeout=60)
    coord.wait_for("service policy on inference@", timeout=60)

    ok = publish(caf_agent, addr, newer, 1)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = ok.stdout.strip().splitlines()
    assert len(lines) == 2 and all(l.endswith(": ok") for l in lines), lines
    assert any(l.startswith("rollout@") for l in lines) and any(l.startswith("inference@") for l in lines)

    missing = publish(caf_agent, addr, tmp_path / "no-such-step", 2)
    assert missing.returncode == 1
    assert missing.stdout.count("no-such-step") == 2, missing.stdout

    older = publish(caf_agent, addr, model, 0)  # version 0 after 1 was applied
    assert older.returncode == 1
    assert all("version 0" in l for l in older.stdout.strip().splitlines()), older.stdout


def test_a_missing_or_corrupt_checkpoint_is_a_clear_start_error(caf_agent, tmp_path):
    model = tiny_model()
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for f in model.iterdir():
        if f.is_file():
            (corrupt / f.name).write_bytes(f.read_bytes())
    (corrupt / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes()[:1000])
    for model_dir, expected in ((tmp_path / "missing", "tokenizer.json"),
                                (corrupt, "corrupt or truncated")):
        cfg = tmp_path / "bad.toml"
        cfg.write_text(f'[runtime]\nrun_dir = "{tmp_path / "run"}"\n'
                       f'[policy]\nbackend = "libtorch"\nmodel_dir = "{model_dir}"\n')
        res = subprocess.run([str(caf_agent), "--role", "local", "--config", str(cfg), "--exit-after-start"],
                             capture_output=True, text=True, timeout=120, cwd=REPO)
        assert res.returncode == 2, res.stderr
        errors = [l for l in res.stderr.splitlines() if "policy.model_dir" in l]
        assert len(errors) == 1 and expected in errors[0], res.stderr
