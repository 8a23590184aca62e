#!/usr/bin/python3
"""Writes the binary and generated fuzz inputs that are not hand-written text: the IDX, safetensors
and peaks-cache seeds (fuzz/corpus/) and the regression inputs of the crashes and memory blow-ups
found (fuzz/regressions/). The text seeds (TOML, CSV, reviews) are written by hand.

    /usr/bin/python3 fuzz/make_binary_inputs.py
"""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
# Deeper than nlohmann-json's recursive dump survives on an 8 MiB stack (60,000 levels do).
DEEP = 100000


def write(path, data):
    path = os.path.join(HERE, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def idx(magic, dims, body):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + body


def idx_input(images, labels):
    """The IDX target's input: the label file's length (2 bytes, big-endian), it, the images."""
    return struct.pack(">H", len(labels)) + labels + images


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def padded_header(text):
    text = text.encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text


def main():
    images = idx(0x803, [3, 2, 2], bytes(range(0, 240, 20)))
    labels = idx(0x801, [3], bytes([0, 9, 4]))
    write("corpus/idx/plain.bin", idx_input(images, labels))
    write("corpus/idx/gzip.bin",
          idx_input(gzip.compress(images, mtime=0), gzip.compress(labels, mtime=0)))
    write("corpus/idx/gzip-members.bin",
          idx_input(gzip.compress(images[:9], mtime=0) + gzip.compress(images[9:], mtime=0), labels))

    write("corpus/safetensors/f32.safetensors", safetensors(
        [("0.weight", "F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
         ("0.bias", "F32", [2], struct.pack("<2f", -1, 0.5))], {"format": "pt"}))
    write("corpus/safetensors/dtypes.safetensors", safetensors(
        [("a", "F64", [2], struct.pack("<2d", 1.5, -2)),
         ("b", "F16", [3], struct.pack("<3H", 0x3C00, 0x0001, 0xFC00)),
         ("c", "BF16", [1, 2], struct.pack("<2H", 0x3F80, 0x7FC0)),
         ("n", "I64", [], struct.pack("<q", 7)),
         ("e", "F32", [0, 4], b"")]))

    peaks = {
        "host|cpu|AMD EPYC|2 threads|oneDNN 2.6|crossover 0.1": {
            "device": "cpu", "name": "AMD EPYC", "threads": 2, "matmul_gflops": 95.5,
            "matmul_n": 2048, "bandwidth_gbs": 12.25, "step_overhead_us": 20.5,
            "layer_overhead_us": 3.25, "probed": "2026-11-23T10:00:00Z"},
        "old|entry": {"device": "cuda:0", "gflops": 1}}
    write("corpus/peaks/peaks.json", json.dumps(peaks, indent=2) + "\n")

    # Stack overflows in nlohmann-json's recursion (issue 16): a deeply nested value.
    deep = "[" * DEEP + "]" * DEEP
    write("regressions/safetensors/deep-nesting.safetensors", padded_header(
        '{"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": ' + deep +
        ', "data_offsets": [0, 0]}}'))
    write("regressions/peaks/deep-nesting.json", '{"host|cpu": ' + deep + "}\n")
    write("regressions/report/deep-nesting.json",
          '{"schema": "crossover.report/1", "runs": ' + deep + "}\n")
    # A label file of one label whose 64 KiB gzip stream inflates to 64 MiB (issue 16: 3 GiB).
    bomb = gzip.compress(idx(0x801, [1], bytes(64 << 20)), compresslevel=9, mtime=0)
    write("regressions/idx/gzip-inflates-past-header.bin",
          idx_input(idx(0x803, [1, 1, 1], b"\x80"), bomb))


if __name__ == "__main__":
    main()
