"""Write a tiny random-weight llama GGUF that llama.cpp's server serves with real prefix caching.

Output is noise; prefill cost and cache behaviour are real. Deterministic: the same
bytes on every machine (seeded weights, a byte-level BPE vocabulary trained on a fixed
corpus of agent-like text, single-threaded). No downloads: the vocabulary is trained
here with the ``tokenizers`` library LiteLLM already installs; the file is written with
PyPI's ``gguf``. ChatML chat template; 256 dims, 4 layers, 8,000 tokens, 32k context.

    python -m harness.make_tiny_model [OUT.gguf]      # default: ~/.cache/litellm-prefix/ (LITELLM_PREFIX_CACHE)
"""
from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # deterministic BPE training

# ChatML; tools go into the first turn after its text, tool calls after the assistant's text
# (as Qwen-style templates do), so tool order and schemas reach the prompt like on a real model.
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['tool_calls'] %}{{ message['tool_calls'] | tojson }}{% endif %}"
    "{% if loop.first and tools %}{{ '\\n\\n# Tools\\n' }}{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}"
    "{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_VOCAB, N_EMBD, N_LAYER, N_HEAD, N_FF, N_CTX = 8000, 256, 4, 4, 512, 32768


def corpus() -> list[str]:
    """Agent-like text (prose, paths, JSON, code) over a syllable lexicon; fixed, so the vocabulary is too."""
    rng = random.Random(1234)
    onsets = ["", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "st", "tr", "pr"]
    vowels = ["a", "e", "i", "o", "u", "ea", "io", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "ng", "ck", "st"]
    lexicon = ("the agent reads files before editing them and keeps changes small tool call result error "
               "warning import def class return self path node_modules json string object function name "
               "description parameters properties required type integer boolean user assistant system "
               "memory session prompt cache token request response model").split()
    lexicon += ["".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                        for _ in range(rng.randint(1, 3))) for _ in range(6000)]
    lines = []
    for _ in range(30000):
        kind = rng.random()
        words = [rng.choice(lexicon) for _ in range(rng.randint(4, 18))]
        if kind < 0.55:
            lines.append(" ".join(words).capitalize() + ".")
        elif kind < 0.7:
            lines.append("/" + "/".join(words[:5]) + rng.choice([".md", ".py", ".ts", ".json", ""]))
        elif kind < 0.9:
            lines.append(f'{{"{words[0]}": "{words[1]} {words[2]}", "n": {rng.randint(0, 99999)}, "ok": true}}')
        else:
            lines.append(f"    def {words[0]}_{words[1]}(self, {words[2]}): return {rng.randint(0, 9)}  # {words[3]}")
    return lines


def train_vocab() -> tuple[list[str], list[str]]:
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train_from_iterator(corpus(), vocab_size=N_VOCAB - len(SPECIALS), min_frequency=2,
                                  special_tokens=[], show_progress=False)
    model = tokenizer._tokenizer.model
    import json

    state = json.loads(tokenizer._tokenizer.to_str())["model"]
    vocab = sorted(state["vocab"].items(), key=lambda kv: kv[1])
    tokens = [token for token, _ in vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["merges"]]
    del model
    return tokens, merges


def write(out: Path) -> Path:
    import gguf
    import numpy as np

    tokens, merges = train_vocab()
    tokens = tokens + SPECIALS
    types = [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)) + [gguf.TokenType.CONTROL] * len(SPECIALS)
    n_vocab = len(tokens)
    rng = np.random.default_rng(7)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")  # concurrent writers never share a file
    writer = gguf.GGUFWriter(str(tmp), "llama")
    writer.add_name("litellm-prefix tiny random llama")
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(tokens.index("<|endoftext|>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHATML)
    writer.add_tensor("token_embd.weight", weights(n_vocab, N_EMBD))
    for layer in range(N_LAYER):
        writer.add_tensor(f"blk.{layer}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{layer}.{name}.weight", weights(N_EMBD, N_EMBD))
        writer.add_tensor(f"blk.{layer}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"blk.{layer}.ffn_gate.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{layer}.ffn_up.weight", weights(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{layer}.ffn_down.weight", weights(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", weights(n_vocab, N_EMBD))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, out)
    return out


def default_path() -> Path:
    from harness.llama_build import cache_dir

    return cache_dir().parent / "tiny-llama-chatml-v2.gguf"


def ensure_model(path: Path | None = None) -> Path:
    path = path or default_path()
    return path if path.is_file() else write(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=None)
    args = parser.parse_args()
    print(ensure_model(args.out))


if __name__ == "__main__":
    main()
