"""An example model for the own-compile command: a transformers model, built as users build
one, with random weights (nothing is downloaded).

``python -m benchmarks run own-compile benchmarks.own_compile.example:small_llama`` compiles
a small Llama-shaped model in bf16. Copy this file beside your own code and change
the config (or load your checkpoint) to measure your model.
"""

from __future__ import annotations

from typing import Any, Tuple


def small_llama(device: str = "cuda") -> Tuple[Any, Tuple[Any, ...]]:
    """A Llama of 4 layers and hidden size 1024 (transformers' ``LlamaConfig``), in bf16 on
    ``device``, returning its logits, and a batch of 64 token ids."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=4,
        num_attention_heads=16,
        num_key_value_heads=4,
        vocab_size=32000,
        use_cache=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        llm = LlamaForCausalLM(config).to(torch.bfloat16).eval()

    class Logits(torch.nn.Module):
        """The logits alone: what ``torch_tensorrt.compile`` gets as the output."""

        def __init__(self) -> None:
            super().__init__()
            self.llm = llm

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.llm(input_ids=input_ids, use_cache=False).logits

    ids = torch.randint(0, config.vocab_size, (1, 64), device=device)
    return Logits().eval(), (ids,)
