"""Decontamination by normalized-AST similarity: near-copies removed, unrelated tasks kept."""
from caf_agent_data.decontam import DEFAULT_THRESHOLD, build_index, nearest, summary
from caf_agent_data.readers import read_task_set
from data_helpers import TASKS, bundled, task


def _index():
    return build_index([(t.name, t.source) for t in read_task_set(TASKS).tasks])


def test_near_copies_of_evaluation_tasks_are_above_the_threshold():
    ix = _index()
    renamed = bundled("layernorm").replace("dim", "hidden").replace("self.norm", "self.ln") \
        .replace("batch_size", "n_rows")
    constants = bundled("linear_bias_gelu").replace("256", "300").replace("512", "128").replace('"tanh"', '"none"')
    reformatted = bundled("fused_elementwise").replace("z = ", "t = ").replace("(z)", "(t)") \
        .replace(" z ", " t ").replace("* 2.0", "* 3.0") + "\n# trailing comment\n"
    for src, want in ((renamed, "layernorm"), (constants, "linear_bias_gelu"), (reformatted, "fused_elementwise")):
        sim, who = nearest(src, ix)
        assert sim > DEFAULT_THRESHOLD and who == want, (sim, who)


def test_unrelated_tasks_stay_below_the_threshold():
    ix = _index()
    for src in (task("return torch.nn.functional.hardswish(x) * 3.0"),
                task("x = self.conv(x)\nreturn torch.amax(x, dim=1)", "self.conv = nn.Conv1d(1, 4, 3)"),
                task("return torch.cumsum(torch.sigmoid(x), dim=-1)")):
        sim, _ = nearest(src, ix)
        assert sim < DEFAULT_THRESHOLD, sim
    # each bundled task is far from every other one
    tasks = read_task_set(TASKS).tasks
    for t in tasks:
        others = build_index([(o.name, o.source) for o in tasks if o.name != t.name])
        assert nearest(t.source, others)[0] < DEFAULT_THRESHOLD, t.name


def test_unparsable_evaluation_files_are_refused_and_distribution_summarized():
    ix = build_index([("ok", bundled("softmax")), ("bad", "def (:")])
    assert ix.names == ["ok"] and ix.refused[0][0] == "bad" and "does not parse" in ix.refused[0][1]
    s = summary([0.1, 0.2, 0.95])
    assert s["count"] == 3 and s["max"] == 0.95 and sum(b["count"] for b in s["histogram"]) == 3
