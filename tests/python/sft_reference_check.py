"""Reference check of `sqlenv sft` against PyTorch + transformers + PEFT (float32, CPU).

Usage: python sft_reference_check.py '<json>' where the JSON object holds
  model:     a model directory written by `sqlenv model init` (config.json + model.safetensors)
  init:      the PEFT adapter directory both sides start from (--adapter-init)
  data:      the SFT file of {"input_ids", "loss_mask"} lines
  lr, batch_size
  runs:      [{"steps": N, "out": DIR}]: adapters `sqlenv sft --optimizer sgd` wrote
  logits:    [{"adapter": DIR, "tokens": [...], "ours": [...]}]: final-position logits of
             `sqlenv model logits --adapter DIR --json`

Prints one JSON object with the measured differences; the caller asserts on them.

Each SFT step is recomputed here from the specification, independently of our code: the lines of
step k are (k*B + j) mod n, j < B; the loss is the sum over every target token (loss_mask[i] = 1,
predicted by the logits at position i - 1) of the token cross-entropy, divided by the batch's
target count; the step is plain SGD, p <- p - lr * grad, on every LoRA tensor.
"""

import json
import sys

import torch
from peft import PeftModel, get_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def load_base(model_dir):
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    base.eval()
    return base


def batch_loss(model, lines):
    total = torch.zeros((), dtype=torch.float32)
    count = 0
    for line in lines:
        ids = torch.tensor([line["input_ids"]], dtype=torch.long)
        mask = torch.tensor(line["loss_mask"][1:], dtype=torch.bool)
        logits = model(input_ids=ids).logits[0, :-1].float()  # position i-1 predicts token i
        logp = torch.log_softmax(logits, dim=-1)
        token_logp = logp.gather(1, ids[0, 1:, None])[:, 0]
        total = total - token_logp[mask].sum()
        count += int(mask.sum())
    return total / count


def rel_diff(ours, ref):
    scale = max(ref.abs().max().item(), 1e-30)
    return (ours - ref).abs().max().item() / scale


def check_run(args, data, run):
    base = load_base(args["model"])
    model = PeftModel.from_pretrained(base, args["init"], is_trainable=True)
    model.eval()  # lora_dropout is 0 anyway; no dropout anywhere
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    start = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
    losses = []
    n, b = len(data), args["batch_size"]
    for k in range(run["steps"]):
        lines = [data[(k * b + j) % n] for j in range(b)]
        model.zero_grad(set_to_none=True)
        loss = batch_loss(model, lines)
        loss.backward()
        with torch.no_grad():
            for p in params.values():
                p -= args["lr"] * p.grad
        losses.append(loss.item())
    ref = {k: v.detach() for k, v in get_peft_model_state_dict(model).items()}
    ours = load_file(f"{run['out']}/adapter_model.safetensors")
    if sorted(ours) != sorted(ref):
        raise SystemExit(f"tensor names differ: ours {sorted(ours)[:3]}..., PEFT {sorted(ref)[:3]}...")
    tensor_rel = {name: rel_diff(ours[name], ref[name]) for name in ref}
    tensor_abs = {name: (ours[name] - ref[name]).abs().max().item() for name in ref}
    # The update alone (after - start), relative to its own size: a sharper check of the gradient.
    update_rel = {name: rel_diff(ours[name] - start[name], ref[name] - start[name]) for name in ref}
    return {
        "steps": run["steps"],
        "out": run["out"],
        "reference_losses": losses,
        "tensors": len(ref),
        "max_tensor_rel": max(tensor_rel.values()),
        "max_tensor_abs": max(tensor_abs.values()),
        "max_update_rel": max(update_rel.values()),
        "worst_update": max(update_rel, key=update_rel.get),
        "min_update_norm": min((ref[name] - start[name]).norm().item() for name in ref),
    }


def check_logits(args, item):
    base = load_base(args["model"])
    model = PeftModel.from_pretrained(base, item["adapter"])
    model.eval()
    ids = torch.tensor([item["tokens"]], dtype=torch.long)
    with torch.no_grad():
        ref = model(input_ids=ids).logits[0, -1].float()
        with model.disable_adapter():
            plain = model(input_ids=ids).logits[0, -1].float()
    ours = torch.tensor(item["ours"], dtype=torch.float32)
    return {
        "adapter": item["adapter"],
        "max_abs": (ours - ref).abs().max().item(),
        "max_rel": rel_diff(ours, ref),
        # How far the adapter moves the logits from the base model's (the check means something only if this is large).
        "adapter_effect_max_abs": (ref - plain).abs().max().item(),
    }


def main():
    args = json.loads(sys.argv[1])
    torch.manual_seed(0)
    with open(args["data"], encoding="utf-8") as f:
        data = [json.loads(line) for line in f if line.strip()]
    base_class = type(load_base(args["model"])).__name__
    out = {
        "model_class": base_class,
        "runs": [check_run(args, data, run) for run in args["runs"]],
        "logits": [check_logits(args, item) for item in args["logits"]],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
