"""One full-parameter SFT step in PyTorch + transformers, timed: the PyTorch side of
bench/sft-vs-torch.bench.ts.

Usage: python sft_torch_step.py '<json>' with
  model:   a model directory (config.json + model.safetensors)
  data:    SFT lines of {"input_ids", "loss_mask"} (`sqlenv sft-data`)
  steps:   optimizer steps to time (the first is a warm-up and is reported apart)
  threads: torch.set_num_threads (null: PyTorch's default, one per core)
  batch:   "padded" (the lines right-padded into one forward/backward) or "lines" (one forward/backward per line)
  lr

The step is what `sqlenv sft --full --optimizer adamw` does: every line of the batch, the loss is the
sum of −log p over every target token (loss_mask[i] = 1, predicted at position i − 1) divided by the
batch's target count, the gradient clipped to global norm 1, one AdamW step on every weight.
Prints one JSON object: per-step milliseconds, the thread count used, the losses.
"""

import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def main():
    args = json.loads(sys.argv[1])
    if args.get("threads") is not None:
        torch.set_num_threads(int(args["threads"]))
    torch.manual_seed(0)
    with open(args["data"], encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    model = AutoModelForCausalLM.from_pretrained(args["model"], dtype=torch.float32)
    model.train()  # no dropout in these configs; train mode as a trainer would run it
    optimizer = torch.optim.AdamW(model.parameters(), lr=args["lr"], weight_decay=0.0)
    ids = [torch.tensor(line["input_ids"], dtype=torch.long) for line in lines]
    masks = [torch.tensor(line["loss_mask"], dtype=torch.bool) for line in lines]
    count = sum(int(m[1:].sum()) for m in masks)
    width = max(len(x) for x in ids)
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0

    def step_padded():
        batch = torch.full((len(ids), width), pad, dtype=torch.long)
        attention = torch.zeros((len(ids), width), dtype=torch.long)
        target = torch.zeros((len(ids), width), dtype=torch.bool)
        for r, (x, m) in enumerate(zip(ids, masks)):
            batch[r, : len(x)] = x
            attention[r, : len(x)] = 1
            target[r, : len(x)] = m
        logits = model(input_ids=batch, attention_mask=attention).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(2, batch[:, 1:, None])[..., 0]
        return -(logp[target[:, 1:]]).sum() / count

    def step_lines():
        total = torch.zeros(())
        for x, m in zip(ids, masks):
            logits = model(input_ids=x[None]).logits[0, :-1]
            logp = torch.log_softmax(logits.float(), dim=-1).gather(1, x[1:, None])[:, 0]
            part = -(logp[m[1:]]).sum() / count
            part.backward()  # accumulate: one line's activations at a time
            total = total + part.detach()
        return total

    losses, ms = [], []
    for _ in range(args["steps"]):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if args["batch"] == "padded":
            loss = step_padded()
            loss.backward()
        else:
            loss = step_lines()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        ms.append((time.perf_counter() - started) * 1000)
        losses.append(float(loss.detach()))
    print(json.dumps({
        "threads": torch.get_num_threads(),
        "batch": args["batch"],
        "lines": len(lines),
        "target_tokens": count,
        "width": width,
        "ms": ms,
        "losses": losses,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
