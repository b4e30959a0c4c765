"""Hugging Face transformers' side of bench/generate-hf.bench.ts: one case, in its own process.

Usage: python hf_generate.py '<json>' with
  dir:          checkpoint directory (config.json + safetensors), loaded as float32
  batch:        rows
  promptTokens: prompt length of every row (equal lengths: no padding on either side)
  newTokens:    new tokens per row (no stop token: exactly this many)
  threads:      torch intra-op threads
  repeats:      timed runs after one warm-up (0: one untimed-warm-up-free run, timed)
  device:       optional, torch device (default "cpu"; "cuda" for bench/gpu.bench.ts)
  dtype:        optional, "float32" (default), "float16" or "bfloat16"

Prompts are the same deterministic ids as the TypeScript side; sampling is plain T = 1 (top-k and top-p
off). Prints one JSON line: load and generate times, tokens/s of the best run, the RSS once the model
is loaded and the process's peak RSS (ru_maxrss).
"""

import json
import resource
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GenerationConfig


def rss():
    """Resident bytes now: all, anonymous (heaps) and file-backed (mapped files)."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) * 1024
    return {"rssBytes": fields.get("VmRSS", 0), "rssAnonBytes": fields.get("RssAnon", 0), "rssFileBytes": fields.get("RssFile", 0)}


def main():
    args = json.loads(sys.argv[1])
    torch.set_num_threads(args["threads"])
    torch.manual_seed(0)
    t0 = time.perf_counter()
    device = torch.device(args.get("device", "cpu"))
    dtype = getattr(torch, args.get("dtype", "float32"))
    model = AutoModelForCausalLM.from_pretrained(args["dir"], dtype=dtype).to(device)
    model.eval()
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    load_s = time.perf_counter() - t0
    loaded = rss()
    vocab = model.config.vocab_size
    batch, prompt, new = args["batch"], args["promptTokens"], args["newTokens"]
    ids = torch.tensor([[(t * 7919 + b * 104729) % vocab for t in range(prompt)] for b in range(batch)], dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    config = GenerationConfig(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new, min_new_tokens=new,
        eos_token_id=None, pad_token_id=model.config.pad_token_id or 0,
    )

    def run():
        sync()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        sync()
        elapsed = time.perf_counter() - start
        assert out.shape == (batch, prompt + new), out.shape
        return elapsed

    repeats = args["repeats"]
    times = [run()] if repeats == 0 else [run() for _ in range(repeats + 1)][1:]
    best = min(times)
    after = rss()
    print(json.dumps({
        "side": "transformers",
        "version": transformers.__version__,
        "torch": torch.__version__,
        "attention": model.config._attn_implementation,
        "threads": torch.get_num_threads(),
        "loadMs": round(load_s * 1000),
        "generateMs": round(best * 1000),
        "tokensPerS": round(batch * new / best, 1),
        "loadedRssBytes": loaded["rssBytes"],
        "loaded": loaded,
        "afterGenerate": after,
        "maxRssBytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "device": str(device),
        "dtype": str(dtype).replace("torch.", ""),
        **({"gpu": torch.cuda.get_device_name(device), "maxGpuAllocatedBytes": torch.cuda.max_memory_allocated(device)} if cuda else {}),
    }))


if __name__ == "__main__":
    main()
