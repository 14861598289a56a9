"""Level 2: EmbeddingBag -> Softplus -> amax. Synthesized by caf_agent_data from torch.nn.EmbeddingBag, torch.nn.Softplus, torch.amax."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.EmbeddingBag(NUM_EMBEDDINGS, 64, mode='mean')
        self.op1 = nn.Softplus(beta=1.0)

    def forward(self, x):
        x = self.op0(x)
        x = self.op1(x)
        x = torch.amax(x, dim=1, keepdim=True)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 8
input_shape = (16,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
