"""caf_agent_eval: the tamper-proof kernel judge (eval worker) of caf-agent.

Modules:
  protocol        length-framed msgpack frames and the tensor codec
  worker          the persistent slot process (stdin/stdout frames) -> job
  job             one evaluation: static checks, child process, checks, timing, verdict
  child           the disposable process that builds and imports a submission
  child_client    the parent's handle on a child (deadlines, crash detection, capped log)
  task            loading the pristine model.py and its seeded inputs
  verify          trusted output/input comparisons (run in the parent)
  profile         timing loops, statistics, roofline floor
  static_checks   source checks of model_new.py and kernels/**
  dispatch_guard  the aten-level fallback ban during ModelNew.forward
  build           compiling kernels/** into the extension (cached by content hash)
  reward          the robust reward (mirror of gpu_pool/reward.cpp)
"""
