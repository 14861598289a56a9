"""Your optimized model. Keep the class name ModelNew and the constructor signature of Model.

forward() may only allocate, reshape/view, and call your kernels through `caf_ext` (the ops
registered in kernels/ with CAF_REGISTER). Any other torch op here fails verification.
"""
import torch
import torch.nn as nn
import caf_ext


class ModelNew(nn.Module):
    def __init__(self, *init_inputs):
        super().__init__()
        # Declare the same parameters/buffers as Model (same names): the judge loads the
        # reference's state_dict into this module.

    def forward(self, *inputs):
        raise NotImplementedError("write kernels in kernels/ and call them via caf_ext")
