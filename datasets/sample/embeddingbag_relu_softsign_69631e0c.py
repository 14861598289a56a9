"""Level 2: EmbeddingBag -> relu -> softsign. Synthesized by caf_agent_data from torch.nn.EmbeddingBag, torch.nn.functional.relu, torch.nn.functional.softsign."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.op0 = nn.EmbeddingBag(NUM_EMBEDDINGS, 32, mode='mean')

    def forward(self, x):
        x = self.op0(x)
        x = F.relu(x)
        x = F.softsign(x)
        return x


NUM_EMBEDDINGS = 1000
batch_size = 16
input_shape = (64,)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (batch_size, *input_shape))]


def get_init_inputs():
    return []
