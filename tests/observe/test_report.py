"""`caf-agent report RUN_DIR` on a real run: a local-role run with the sim policy and sim
GPU slots writes trajectories and metrics.jsonl; the report is rendered in headless
Chromium (Debian's chromium, installed by ./x setup) and every plot must have drawn
(marks with a non-empty box, no "no data" placeholder). `caf-agent export` writes one
JSON line per record."""
import json
import pathlib
import re
import shutil
import subprocess

import pytest

CHECK = """<script>
const out = [];
for (const svg of document.querySelectorAll('svg.plot')) {
  const marks = [...svg.querySelectorAll('rect.bar, path.series')].filter(e => {
    const b = e.getBBox(); return b.width > 0 || b.height > 0; });
  out.push({plot: svg.dataset.plot, marks: marks.length, nodata: svg.querySelector('.no-data') !== null});
}
const pre = document.createElement('pre'); pre.id = 'plot-check';
pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
</script>"""


def chromium():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium is not installed (./x setup installs it)")
    return exe


def make_run(caf_agent, tmp_path):
    config = tmp_path / "local.toml"
    config.write_text(f"""
[cluster]
port = 0
[runtime]
run_dir = "{tmp_path / 'run'}"
[rollout]
max_concurrent_episodes = 4
max_turns_eval = 12
[gpu_pool]
slots = 2
backend = "sim"
[policy]
backend = "sim"
sim_latency_ms_mean = 5.0
sim_eval_ms_mean = 40.0
[observe]
metrics_interval_ms = 100
""")
    out = subprocess.run([str(caf_agent), "--role", "local", "--config", str(config), "--episodes", "24"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    store = next((tmp_path / "run").glob("trajectories-*"))
    assert f"run report: {store}/report.html" in out.stdout
    return store


def test_report_renders_every_plot_in_chromium(caf_agent, tmp_path):
    exe = chromium()
    store = make_run(caf_agent, tmp_path)
    assert len((store / "metrics.jsonl").read_text().splitlines()) >= 2
    # Learner diagnostics appear when the run has them (one JSON object per step).
    (store / "learner.jsonl").write_text("".join(
        json.dumps({"step": s, "loss": 1.0 / (s + 1), "mismatch_kl": 0.01 * s}) + "\n" for s in range(5)))
    out = tmp_path / "report.html"
    made = subprocess.run([str(caf_agent), "report", str(store), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    html = out.read_text()
    assert "<script" not in html and not re.search(r"\b(src|href)=", html)  # offline, self-contained
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", CHECK + "</body>"))
    dom = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=60)
    assert dom.returncode == 0, dom.stderr
    found = re.search(r'<pre id="plot-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stdout[-2000:]
    plots = json.loads(found.group(1).replace("&quot;", '"'))
    names = {p["plot"] for p in plots}
    for expected in ["reward-distribution", "tiers-over-run", "reward-over-run", "rates-over-run",
                     "turns-per-episode", "tokens-per-episode", "gpu-utilization", "gpu-queue",
                     "learner-loss", "learner-mismatch_kl"]:
        assert expected in names, names
    for p in plots:
        # tokens-per-episode: the sim policy reports no tokens, so all 24 episodes sit in one bar.
        assert not p["nodata"] and p["marks"] > 0, p


def test_report_and_export_errors_and_export(caf_agent, tmp_path):
    bad = subprocess.run([str(caf_agent), "report", str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and "is not a directory" in bad.stderr
    empty = subprocess.run([str(caf_agent), "report", str(tmp_path)], capture_output=True, text=True)
    assert empty.returncode == 2 and "holds no trajectory records" in empty.stderr
    store = make_run(caf_agent, tmp_path)
    out = tmp_path / "records.jsonl"
    exported = subprocess.run([str(caf_agent), "export", str(store), "--out", str(out)],
                              capture_output=True, text=True, timeout=60)
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(l) for l in out.read_text().splitlines()]
    assert sorted(r["episode_id"] for r in records) == list(range(1, 25))
