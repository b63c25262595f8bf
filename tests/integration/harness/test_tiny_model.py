"""The tiny GGUF model is byte-for-byte deterministic and loads as a llama with ChatML."""
from __future__ import annotations

import hashlib

import gguf  # installed by make: pyproject extra `servers`


def test_model_is_deterministic_with_a_byte_level_vocabulary_and_chatml(tmp_path):
    from harness.make_tiny_model import CHATML, N_VOCAB, write

    first, second = write(tmp_path / "a.gguf"), write(tmp_path / "b.gguf")
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second)]
    assert digest[0] == digest[1]
    reader = gguf.GGUFReader(str(first))
    assert len(reader.fields["tokenizer.ggml.tokens"].data) == N_VOCAB
    model = reader.fields["tokenizer.ggml.model"]
    assert bytes(model.parts[model.data[0]]).decode() == "gpt2"
    template = reader.fields["tokenizer.chat_template"]
    assert bytes(template.parts[template.data[0]]).decode() == CHATML
