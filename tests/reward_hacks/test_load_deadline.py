"""A spin where submission code first runs (the extension's static initialisers, the import
of model_new.py) is cut off by the load's own deadline (load_timeout_s), not the build's."""
import os
import time

from hack_helpers import assert_rejected

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels_native")
AB = "class ModelNew(nn.Module):\n    def forward(self, a, b):\n        return caf_ext.add_relu(a, b)\n"
# Rationale: a short load deadline for the test; the build deadline stays at its default
# (300 s), so a verdict within seconds shows the load's deadline applied.
LOAD_S = 3.0


def test_spin_in_a_static_initialiser_hits_the_load_deadline(judge):
    with open(os.path.join(HERE, "static_spin.cpp")) as f:
        kernels = {"kernels/static_spin.cpp": f.read()}
    from caf_agent_eval import build
    from hack_helpers import build_root
    assert build.build(kernels, "cpu", build_root()).ok  # built here: the job finds it cached
    t0 = time.monotonic()
    v = judge("add_relu", AB, kernels=kernels, options={"load_timeout_s": LOAD_S})
    assert_rejected(v, "timeout", "load and import")
    assert time.monotonic() - t0 < LOAD_S + 20, "the load deadline did not apply"


def test_spin_at_import_hits_the_load_deadline(judge):
    t0 = time.monotonic()
    v = judge("add_relu", "while True:\n    pass\n" + AB, options={"load_timeout_s": LOAD_S})
    assert_rejected(v, "timeout", "load and import")
    assert time.monotonic() - t0 < LOAD_S + 20
