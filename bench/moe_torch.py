"""bench/moe_torch.py - the bf16 peer of bench/gpu_moe.cu, same run, same
routes: torch._grouped_mm (or, where this torch lacks it, a loop of
torch.matmul per expert, named so in the JSON) on bf16 expert weights of the
same shapes, each timing a CUDA graph of 20 calls (each call its own
routing) replayed 7 times, median; then merges gpu_moe's results into one
JSON with the speedups.

    python3 bench/moe_torch.py GPU_MOE.json ROUTES.json OUT.json
"""
import datetime
import json
import os
import subprocess
import sys

import torch

from torch_peers import graph_us

CALLS, REPS = 20, 7


def main():
    bfp_json, routes_json, out_json = sys.argv[1:4]
    bfp_res = json.load(open(bfp_json))
    routes = json.load(open(routes_json))
    topk = routes["topk"]
    rt = {}
    for r in routes["routes"]:
        rt.setdefault((r["model"], r["tokens"], r["routing"]), []).append(r["offsets"])
    has_gmm = hasattr(torch, "_grouped_mm")
    if has_gmm:  # it may exist and still refuse this GPU or these shapes
        try:
            xa = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
            wa = torch.randn(2, 32, 64, device="cuda", dtype=torch.bfloat16)
            oa = torch.tensor([3, 8], dtype=torch.int32, device="cuda")
            ya = torch._grouped_mm(xa, wa.transpose(-2, -1), offs=oa, out_dtype=torch.bfloat16)
            assert (ya[3:].float() - xa[3:].float() @ wa[1].float().t()).abs().max() < 0.5
        except Exception as exc:  # noqa: BLE001 (named in the JSON's peer field)
            print(f"torch._grouped_mm unusable here: {exc!r}", flush=True)
            has_gmm = False
    peer = "torch._grouped_mm bf16" if has_gmm else "torch.matmul per expert bf16 (no _grouped_mm)"
    print(f"torch {torch.__version__}, peer: {peer}", flush=True)
    dev = torch.device("cuda")
    shapes = sorted({(r["model"], r["experts"], r["proj"], r["n"], r["k"]) for r in bfp_res["results"]})
    peer_us = {}
    with torch.no_grad():
        x = torch.randn(4096 * topk, 2880, device=dev, dtype=torch.bfloat16)
        for model, e_count, proj, n, k in shapes:
            w = torch.randn(e_count, n, k, device=dev, dtype=torch.bfloat16) * 0.02
            wt = w.transpose(-2, -1)  # [E, k, n], a view: W^T per expert
            toks = sorted({r["tokens"] for r in bfp_res["results"] if r["model"] == model})
            for t in toks:
                rows = t * topk
                for dist in ("uniform", "skewed"):
                    offs = rt[(model, t, dist)]
                    ends = [torch.tensor(o[1:], dtype=torch.int32, device=dev) for o in offs]
                    y = torch.empty(rows, n, device=dev, dtype=torch.bfloat16)
                    xr = x[:rows]
                    if has_gmm:
                        def call(c):
                            torch._grouped_mm(xr, wt, offs=ends[c], out_dtype=torch.bfloat16)
                    else:
                        def call(c):
                            o = offs[c]
                            for e in range(e_count):
                                if o[e + 1] > o[e]:
                                    torch.matmul(xr[o[e]:o[e + 1]], wt[e], out=y[o[e]:o[e + 1]])
                    us = graph_us(call, CALLS, REPS)
                    peer_us[(model, proj, t, dist)] = us
                    print(f"{model:13s} {proj:7s} T={t:4d} {dist:7s} {peer}: {us:9.1f} us", flush=True)
            del w, wt
            torch.cuda.empty_cache()
    for r in bfp_res["results"]:
        p = peer_us.get((r["model"], r["proj"], r["tokens"], r["routing"]))
        r["torch_bf16_us"] = round(p, 2) if p else None
        r["speedup_vs_torch"] = round(p / r["grouped_us"], 3) if p else None
        r["speedup_vs_loop"] = round(r["loop_us"] / r["grouped_us"], 3)
        wg = r.get("wgmma_us", -1)
        r["speedup_wgmma_vs_torch"] = round(p / wg, 3) if p and wg > 0 else None
        gv = r.get("gemv_us", -1)
        r["speedup_gemv_vs_torch"] = round(p / gv, 3) if p and gv > 0 else None
        w2 = r.get("wgmma256_us", -1)
        r["speedup_wgmma256_vs_torch"] = round(p / w2, 3) if p and w2 > 0 else None
    code = os.environ.get("BFP_CODE") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {
        "command": "bench/gpu_moe OUT/gpu_moe.json OUT/moe_routes.json && "
                   "python3 bench/moe_torch.py OUT/gpu_moe.json OUT/moe_routes.json OUT/h200-moe.json",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "code": code,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "peer": peer,
        "timing": "CUDA graph of 20 calls (each its own top-4 routing), replayed 7 times, median per call",
        "copy_bandwidth_GBps": bfp_res["copy_bandwidth_GBps"],
        "results": bfp_res["results"],
    }
    json.dump(out, open(out_json, "w"), indent=1)
    print(f"wrote {out_json}")


if __name__ == "__main__":
    main()
