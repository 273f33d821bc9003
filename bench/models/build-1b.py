"""
Writes a synthetic model in TinyLlama-1.1B's shape (llama architecture: hidden 2048, 22 layers,
32 attention heads, 4 KV heads, feed-forward 5632, trained context 2048) with the Llama-2
vocabulary and tokenizer metadata of a donor GGUF and random weights, as Q4_0 and Q8_0 GGUF files.

With a third argument `8b`, one Q4_0 file in Llama-3-8B's shape instead (hidden 4096, 32 layers,
32 heads, 8 KV heads, feed-forward 14336, context 8192; the donor's vocabulary), about 3.7 GB: the
GPU check's large model (bench/gpu/check.sh).

Called by build-1b.ts, which supplies llama.cpp's own gguf-py (from the source bundle
node-llama-cpp ships) on PYTHONPATH. Arguments: DONOR_GGUF OUT_DIR [8b].

Weights are drawn once per tensor (normal, std 0.02; norms 1.0) and quantized to both types with
gguf-py's numpy quantizers, so the two files hold the same model. Random weights decode at the
same speed as trained ones: the cost of a token is the shapes, not the values.
"""
import sys
import numpy as np
import gguf
from gguf import GGUFReader, GGUFValueType, GGUFWriter, GGMLQuantizationType
from gguf.quants import quantize

EIGHT_B = len(sys.argv) > 3 and sys.argv[3] == "8b"
HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = (4096, 32, 32, 8, 14336, 8192) if EIGHT_B else (2048, 22, 32, 4, 5632, 2048)
HEAD_DIM = HIDDEN // HEADS
TYPES = {"q4_0": GGMLQuantizationType.Q4_0} if EIGHT_B else {"q4_0": GGMLQuantizationType.Q4_0, "q8_0": GGMLQuantizationType.Q8_0}
LABEL = "bench-random-8b" if EIGHT_B else "bench-random-1b"
FILE_TYPES = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}
# A Zephyr-style chat template (TinyLlama-Chat's format), so that /api/chat has one to render.
TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def copy_tokenizer(reader: GGUFReader, writer: GGUFWriter) -> int:
    """Copies every `tokenizer.*` key of the donor; returns the vocabulary size."""
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            values = field.contents()
            writer.add_array(key, values)
            if key == "tokenizer.ggml.tokens":
                vocab = len(values)
        elif kind == GGUFValueType.STRING:
            writer.add_string(key, field.contents())
        else:
            writer.add_key_value(key, field.contents(), kind)
    return vocab


def tensors(vocab: int):
    """(name, shape as numpy sees it) of every tensor, in the usual order."""
    yield "token_embd.weight", (vocab, HIDDEN)
    for i in range(LAYERS):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (HIDDEN,)
        yield p + "attn_q.weight", (HIDDEN, HIDDEN)
        yield p + "attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN)
        yield p + "attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN)
        yield p + "attn_output.weight", (HIDDEN, HIDDEN)
        yield p + "ffn_norm.weight", (HIDDEN,)
        yield p + "ffn_gate.weight", (FFN, HIDDEN)
        yield p + "ffn_up.weight", (FFN, HIDDEN)
        yield p + "ffn_down.weight", (HIDDEN, FFN)
    yield "output_norm.weight", (HIDDEN,)
    yield "output.weight", (vocab, HIDDEN)


def main(donor: str, out_dir: str) -> None:
    reader = GGUFReader(donor)
    writers = {}
    for name in TYPES:
        w = GGUFWriter(f"{out_dir}/{LABEL}-{name}.gguf", "llama")
        w.add_name(f"{LABEL}-{name}")
        w.add_context_length(CONTEXT)
        w.add_embedding_length(HIDDEN)
        w.add_block_count(LAYERS)
        w.add_feed_forward_length(FFN)
        w.add_rope_dimension_count(HEAD_DIM)
        w.add_head_count(HEADS)
        w.add_head_count_kv(KV_HEADS)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        w.add_file_type(FILE_TYPES[name])
        vocab = copy_tokenizer(reader, w)
        w.add_chat_template(TEMPLATE)
        writers[name] = w
    rng = np.random.default_rng(1)
    for tensor, shape in tensors(vocab):
        if len(shape) == 1:
            data = np.ones(shape, dtype=np.float32)
            for w in writers.values():
                w.add_tensor(tensor, data)
            continue
        data = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        for name, w in writers.items():
            w.add_tensor(tensor, quantize(data, TYPES[name]), raw_dtype=TYPES[name])
    for w in writers.values():
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
