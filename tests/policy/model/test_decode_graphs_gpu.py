"""Decode steps replayed from CUDA graphs against eager decode (marker gpu: the device machine only).

policy_model_tool's agent-bench runs a multi-turn conversation per episode (greedy replies, random
observations appended), more episodes than KV-cache slots so that kept prefixes are evicted and
recomputed, once with CUDA graphs and once with --no-cuda-graphs. Every reply of every turn must be
the same tokens with the same logprobs (the logits' verdict on them): fp32 with the masked cache
attention, and bf16 with flash, where the eager step runs with the graphs' key bucket so that both
run the same kernels. The graph runs must have captured graphs, the eager ones none.
"""
import json

import pytest
import torch

from test_policy_model import run_tool, sharp_qwen2

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    path = tmp_path_factory.mktemp("graphs_model")
    sharp_qwen2(path)
    return path


def conversation(path, dtype, mode, graphs, max_batch=2, paged=()):
    """{(episode, turn): reply} and the run's summary. `paged`: the paged layout's flags."""
    proc = run_tool("agent-bench", "--model", path, "--device", "cuda", "--dtype", dtype, "--cache-attention", mode,
                    "--vocab", 512, "--episodes", 5, "--turns", 4, "--system", 200, "--obs", 60, "--reply", 40,
                    "--temperature", 0, "--print", "--max-batch", max_batch, "--max-context", 2048,
                    "--prefill-chunk", 128, *paged, *([] if graphs else ["--no-cuda-graphs"]))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    replies = {(r["episode"], r["turn"]): r for r in lines if "episode" in r}
    summary = next(r for r in lines if "generated" in r)
    return replies, summary


@pytest.mark.parametrize("dtype,mode,tolerance", [("float32", "sdpa", 1e-4), ("bfloat16", "flash", 1e-3)])
def test_graph_decode_equals_eager_over_a_conversation_with_eviction(model, dtype, mode, tolerance):
    graph, graph_summary = conversation(model, dtype, mode, graphs=True)
    eager, eager_summary = conversation(model, dtype, mode, graphs=False)
    assert len(graph) == len(eager) == 5 * 4
    assert graph_summary["evictions"] > 0 and graph_summary["graph_captures"] > 0
    assert eager_summary["graph_captures"] == 0
    for key in sorted(eager):
        g, e = graph[key], eager[key]
        assert g["tokens"] == e["tokens"], key
        assert max(abs(a - b) for a, b in zip(g["logprobs"], e["logprobs"])) <= tolerance, key


def test_padded_graph_rows_agree_with_eager(model):
    # 5 episodes on 6 slots: the graphs decode 8 padded rows where eager decodes 5, so GEMMs of
    # other shapes may round differently in bf16; the first turn agrees up to a near tie.
    graph, _ = conversation(model, "bfloat16", "flash", graphs=True, max_batch=6)
    eager, _ = conversation(model, "bfloat16", "flash", graphs=False, max_batch=6)
    for episode in range(5):
        g, e = graph[(episode, 1)], eager[(episode, 1)]
        same = 0
        while same < len(g["tokens"]) and g["tokens"][same] == e["tokens"][same]:
            same += 1
        assert same >= 8, (episode, g["tokens"], e["tokens"])
        assert max(abs(a - b) for a, b in zip(g["logprobs"][:same], e["logprobs"][:same])) < 0.05


@pytest.mark.parametrize("block", [256, 64])
def test_paged_graph_decode_equals_eager_with_preemption(model, block):
    # The paged layout with flash: graphs keyed by (rows, table width) replay tables copied in
    # each step; the eager step runs the graphs' table width, so both run the same kernels. A
    # cache of 1,024 tokens for 2 running sequences of up to 600 forces kept prefixes out and
    # preempts sequences (recomputed on readmission).
    paged = ["--kv-layout", "paged", "--kv-block-size", block, "--kv-cache-tokens", 1024]
    graph, graph_summary = conversation(model, "bfloat16", "flash", graphs=True, paged=paged)
    eager, eager_summary = conversation(model, "bfloat16", "flash", graphs=False, paged=paged)
    assert len(graph) == len(eager) == 5 * 4
    assert graph_summary["graph_captures"] > 0 and eager_summary["graph_captures"] == 0
    assert graph_summary["preemptions"] + graph_summary["evictions"] > 0, graph_summary
    for key in sorted(eager):
        g, e = graph[key], eager[key]
        assert g["tokens"] == e["tokens"], key
        assert max(abs(a - b) for a, b in zip(g["logprobs"], e["logprobs"])) <= 1e-3, key
