"""Seed crawl and combinatorial construction (meta tensors only: nothing runs for real)."""
import random

import pytest

from caf_agent_data.compose import check_on_meta, compose, render, seed_problems
from caf_agent_data.crawl import Crawl, crawl, probe
from caf_agent_data.identity import task_identity
from caf_agent_data.ops import Recipe, Step


@pytest.fixture(scope="module")
def crawled():
    return crawl()


def test_crawl_keeps_operators_and_records_what_each_wraps(crawled):
    kept = {r.wraps for r in crawled.recipes}
    for w in ("torch.nn.Conv2d", "torch.nn.Linear", "torch.nn.ReLU", "torch.nn.LayerNorm", "torch.nn.LSTM",
              "torch.nn.functional.gelu", "torch.nn.functional.softmax", "torch.sum"):
        assert w in kept, w
    assert crawled.families["torch.nn.Conv2d"] == ["4d"]
    skipped = dict(crawled.skipped)
    assert "a loss" in skipped["torch.nn.MSELoss"]
    assert "random" in skipped["torch.nn.functional.dropout"]
    assert "needs" in skipped["torch.nn.Unflatten"]          # fails to construct without arguments
    assert len(crawled.recipes) > 80 and all(reason for _, reason in crawled.skipped)


def test_transformers_blocks_are_crawled_from_configs_and_compose(crawled):
    kept = {r.wraps for r in crawled.recipes}
    for w in ("transformers.models.llama.modeling_llama.LlamaMLP", "transformers.models.llama.modeling_llama.LlamaRMSNorm",
              "transformers.models.t5.modeling_t5.T5LayerFF", "transformers.activations.NewGELUActivation"):
        assert w in kept, w
    skipped = dict(crawled.skipped)
    # attention and decoder layers want position embeddings: skipped with the forward's error
    assert "forward on one hidden-state tensor fails" in skipped["transformers.models.qwen2.modeling_qwen2.Qwen2Attention"]
    assert "identity" in skipped["transformers.activations.LinearActivation"]
    assert "not a block" in skipped["transformers.models.llama.modeling_llama.LlamaForCausalLM"]
    hf = Crawl([r for r in crawled.recipes if r.wraps.startswith("transformers.models.")], crawled.families, [])
    rng = random.Random(3)
    made = [p for p in (compose(hf, rng, 2, family="3d")[0] for _ in range(6)) if p]
    assert len(made) >= 4
    for p in made:
        assert "from transformers" in p.source
        assert any(k in p.source for k in ("Config(hidden_size=", "Config(d_model=", "Config(n_embd="))
        assert "from_pretrained" not in p.source      # built from a config, nothing downloaded
        assert check_on_meta(p.source)[1] is None
        assert all(s.wraps.startswith("transformers.models.") for s in p.steps)


def test_an_operator_that_fails_is_skipped_with_the_reason():
    def bad(shape, rng):
        return Step("torch.nn.Broken", "module", "nn.Conv2d(3, 8, kernel_size=99)")
    ok, reason = probe(Recipe("torch.nn.Broken", "anchor", bad))
    assert ok == [] and "RuntimeError" in reason


def test_seed_problems_are_kernelbench_format(crawled):
    seeds = seed_problems(Crawl(crawled.recipes[:15], crawled.families, []), seed=0)
    assert len(seeds) == 15
    for p in seeds:
        assert "class Model(nn.Module)" in p.source and "def get_inputs" in p.source
        assert p.source.startswith('"""Level 1:') and len(p.steps) == 1
        assert check_on_meta(p.source)[1] is None


def _batch(crawled, seed, n=25):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p, _why = compose(crawled, rng, rng.randint(1, 5))
        out.append(p.source if p else None)
    return out


def test_composition_is_reproducible_and_shapes_agree(crawled):
    a, b = _batch(crawled, 7), _batch(crawled, 7)
    assert a == b
    assert a != _batch(crawled, 8)
    made = [s for s in a if s]
    assert len(made) >= 20
    for s in made:
        shapes, why = check_on_meta(s)
        assert why is None, why
    assert len({task_identity(s) for s in made}) == len(made)
    assert any(s.count("        x = ") >= 4 for s in made)   # stacks of several operators occur


def test_shapes_that_do_not_compose_are_refused(crawled):
    convs = Crawl([r for r in crawled.recipes if r.wraps == "torch.nn.Conv2d"], crawled.families, [])
    p, why = compose(convs, random.Random(0), 2, family="2d")
    assert p is None and "no operator takes shape" in why
    bad = render([Step("torch.nn.Linear", "module", "nn.Linear(64, 32)"),
                  Step("torch.nn.Linear", "module", "nn.Linear(16, 8)")], (4, 64), False)
    shapes, why = check_on_meta(bad)
    assert shapes is None and "fails on meta tensors" in why
    with pytest.raises(ValueError, match="1 to 5"):
        compose(crawled, random.Random(0), 6)


def test_batch_scale_multiplies_only_the_batch(crawled):
    a, _ = compose(crawled, random.Random(5), 2, family="4d")
    b, _ = compose(crawled, random.Random(5), 2, family="4d", batch_scale=8, max_numel=1 << 26)
    assert b.input_shape[0] == 8 * a.input_shape[0] and b.input_shape[1:] == a.input_shape[1:]
    assert [s.wraps for s in a.steps] == [s.wraps for s in b.steps]
