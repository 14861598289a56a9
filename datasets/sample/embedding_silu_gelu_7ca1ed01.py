"""Level 2: Embedding -> silu -> gelu. Synthesized by caf_agent_data from torch.nn.Embedding, torch.nn.functional.silu, torch.nn.functional.gelu."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.Embedding(NUM_EMBEDDINGS, 64)

    def forward(self, x):
        x = self.op0(x)
        x = F.silu(x)
        x = F.gelu(x, approximate='none')
        return x


NUM_EMBEDDINGS = 1000
batch_size = 16
input_shape = (16,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
