"""`model.name = "gpt"`: a small decoder-only transformer in plain torch (nanoGPT's shape).

Token and position embeddings, `n_layer` pre-LayerNorm blocks (causal self-attention through
`scaled_dot_product_attention`, then a GELU MLP), a final LayerNorm and a head tied to the token
embedding. The blocks are `model.blocks` (an nn.ModuleList), so FSDP can shard each one and the
numerics sampling can name them: `blocks.3.mlp.proj`.

`ffn_gain` is the numerics-lab knob: block i's MLP weights start `ffn_gain ** i` times larger, so
the feed-forward outputs of later blocks grow past float16's 65,504 (as T5's did: the output of
`blocks.<last>.mlp.proj` overflows first) while bfloat16, with float32's range, never comes close.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

BYTE_VOCAB = 256  # byte-level text: every byte value is a token


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        if n_embd % n_head:
            raise ValueError(f"n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # (B, T, C) -> (B, heads, T, C / heads)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Tokens (B, T) of int64 -> logits (B, T, vocab_size); T <= block_size."""

    def __init__(self, n_layer: int = 4, n_head: int = 4, n_embd: int = 64, block_size: int = 64,
                 vocab_size: int = BYTE_VOCAB, ffn_gain: float = 1.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        blocks = [Block(n_embd, n_head) for _ in range(n_layer)]
        self.blocks = nn.ModuleList(blocks)
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied
        self._init_weights(blocks, ffn_gain)

    def _init_weights(self, blocks: list[Block], ffn_gain: float) -> None:
        """GPT-2's: normal(0, 0.02), zero biases, residual projections / sqrt(2 n_layer); then
        block i's MLP weights (fc and proj) x ffn_gain ** i: its output grows ~ffn_gain ** (2 i)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        residual_std = 0.02 / math.sqrt(2 * len(blocks))
        with torch.no_grad():
            for i, block in enumerate(blocks):
                nn.init.normal_(block.attn.proj.weight, std=residual_std)
                nn.init.normal_(block.mlp.proj.weight, std=residual_std)
                block.mlp.fc.weight.mul_(ffn_gain ** i)  # both MLP weights: no single weight
                block.mlp.proj.weight.mul_(ffn_gain ** i)  # leaves float16's range, their product does

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.block_size:
            raise ValueError(f"sequence of {t} tokens is longer than block_size {self.block_size}")
        pos = torch.arange(t, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class NextTokenLoss(nn.CrossEntropyLoss):
    """Cross-entropy of logits (B, T, V) against the next tokens (B, T), averaged over every token."""

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return super().forward(input.flatten(0, 1), target.flatten())
