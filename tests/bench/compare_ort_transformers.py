"""The Markdown section of `tests/bench/compare_ort --set transformers`: edgert against ONNX
Runtime on the zoo's transformers and its end-to-end detector, and where edgert's time goes.

compare_ort does the measuring (builds with the manifest's profile, alternating rounds, one
`edgert bench --profile` run per model); this module only turns its figures into the report:
  * one table: per model the shape timed, edgert ms, ORT ms, ratio, the spread of the rounds'
    ratios; the geometric mean over the transformers; the detector after it, not in the mean;
  * per model, edgert's per-layer time summed per op type (the engine's op after fusion, e.g.
    edgert.FusedMatMul), the top five, with the tactics that ran them and the GFLOP/s of those
    doing MatMul, Gemm or Conv arithmetic (counted from a static-shape build's node shapes): a
    reader of a ratio far from target sees which ops hold the time, how close the GEMMs run to
    the FMA peak, and which ops ran on reference kernels.
"""
import collections
import math

BEGIN = "<!-- compare_ort_transformers:begin (tests/bench/compare_ort --set transformers replaces this section) -->"
END = "<!-- compare_ort_transformers:end -->"
TOP_OPS = 5


def dims(shape):
    return "x".join(str(d) for d in shape)


def timed_shape(m):
    """The sample inputs' shapes, "name dims" each, inputs of one shape named together
    ("input_ids, attention_mask 2x128")."""
    by_shape = collections.OrderedDict()
    for i in m["inputs"]:
        by_shape.setdefault(dims(i["sample_shape"]), []).append(i["name"])
    return "; ".join(f"{', '.join(names)} {shape}" for shape, names in by_shape.items())


def profile_text(m):
    """min / opt / max of the inputs that have a profile (the first of inputs sharing one), or "static"."""
    ranged = [i for i in m["inputs"] if i.get("min_shape")]
    if not ranged:
        return "static"
    seen, parts = set(), []
    for i in ranged:
        key = (dims(i["min_shape"]), dims(i["opt_shape"]), dims(i["max_shape"]))
        if key not in seen:
            seen.add(key)
            parts.append(" / ".join(key))
    return "; ".join(parts)


def sample_batch(m):
    return m["inputs"][0]["sample_shape"][0]


def node_flops(node):
    """2 x multiply-accumulates of one engine node from inspect --json (static shapes): MatMul,
    Gemm and their fused forms as 2 x |Y| x K, K read off the operands' sizes (whichever of A and
    B is not broadcast gives it, however the node transposes them); Conv and FusedConv as
    2 x |Y| x |W| / M (direct convolution's count, Winograd tactics do fewer); 0 for the rest."""
    op = node["op"].replace("edgert.Fused", "")
    ins = [i for i in node.get("inputs") or [] if i and i.get("shape") is not None]
    outs = [o for o in node.get("outputs") or [] if o and o.get("shape") is not None]
    if not outs or len(ins) < 2 or any(not isinstance(d, int) for t in ins[:2] + outs[:1] for d in t["shape"]):
        return 0
    a, b, y = ins[0]["shape"], ins[1]["shape"], outs[0]["shape"]
    size_y = math.prod(y)
    if op in ("MatMul", "Gemm") and len(y) >= 1 and size_y:
        rows = y[-2] if len(y) >= 2 else 1
        k = max(math.prod(a) * y[-1] // size_y, math.prod(b) * rows // size_y)
        return 2 * size_y * k
    if op == "Conv" and len(b) >= 3:
        return 2 * size_y * math.prod(b[1:])
    return 0


def flops_per_part(nodes):
    """{ONNX node name: FLOPs} from a static-shape engine's nodes, a fused node's count going to
    its first part (the MatMul or Conv that the rest was folded into)."""
    out = {}
    for n in nodes:
        f = node_flops(n)
        if f:
            out[(n.get("parts") or [n["name"]])[0]] = f
    return out


def op_breakdown(layers, parts=None, flops=None, top=TOP_OPS):
    """Per-layer medians summed per op type, most expensive first: [(op, layers, ms, GFLOP,
    tactics)], at most `top` entries, tactics being [(tactic name, ms)] most expensive first (the
    kernel's name where the layer has no tactic name), GFLOP the op's arithmetic where `flops`
    ({ONNX node: FLOPs}) counts any, through `parts` ({layer: its ONNX nodes}); and the sum of
    every layer's median."""
    parts, flops = parts or {}, flops or {}
    per_op = collections.defaultdict(lambda: [0, 0.0, 0, collections.Counter()])
    for layer in layers:
        entry = per_op[layer["op"]]
        entry[0] += 1
        entry[1] += layer["median_ms"]
        entry[2] += sum(flops.get(p, 0) for p in parts.get(layer["name"], [layer["name"]]))
        entry[3][layer.get("tactic_name") or layer.get("kernel") or "?"] += layer["median_ms"]
    total = sum(e[1] for e in per_op.values())
    ranked = sorted(per_op.items(), key=lambda kv: -kv[1][1])[:top]
    return [(op, n, ms, fl / 1e9, tactics.most_common()) for op, (n, ms, fl, tactics) in ranked], total


def fmt(v, spec=".2f"):
    return "—" if v is None else format(v, spec)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _tactics_text(tactics, op_ms):
    shown = [f"{name} {100 * ms / op_ms:.0f}%" if op_ms > 0 else name for name, ms in tactics[:3]]
    if len(tactics) > 3:
        shown.append(f"{len(tactics) - 3} more")
    return ", ".join(f"`{s}`" if not s.endswith("more") else s for s in shown)


def _breakdown_lines(name, t, profile, flops, timed, peak):
    latency_ms, layers, parts = profile
    out = []
    ranked, total = op_breakdown(layers, parts, flops if isinstance(flops, dict) else None)
    model_gflop = sum(flops.values()) / 1e9 if isinstance(flops, dict) else None
    line = (f"**{name}**, {t} thread{'s' if t != 1 else ''}: {len(layers)} layers, their medians sum to {total:.2f} "
            f"ms (`--profile`'s own latency {latency_ms:.2f} ms; {fmt(timed['edgert_ms'])} ms unprofiled).")
    if model_gflop:
        line += (f" {model_gflop:.2f} GFLOP in MatMul/Gemm/Conv: {model_gflop / timed['edgert_ms'] * 1e3:.0f} "
                 f"GFLOP/s over edgert's whole latency, {model_gflop / timed['ort_ms'] * 1e3:.0f} over ORT's")
        ceiling = max((g for (isa, th), g in peak.items() if th == t), default=None)
        line += f"; FMA peak {ceiling:.0f} GFLOP/s at {t} threads." if ceiling else "."
    elif isinstance(flops, str):
        line += f" FLOP count {flops}."
    out.append(line)
    out.append("")
    out.append("| op type | layers | ms | share | GFLOP | GFLOP/s | tactics (share of the op's time) |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    shown = 0.0
    for op, n, ms, gflop, tactics in ranked:
        shown += ms
        rate = f"{gflop / ms * 1e3:.0f}" if gflop and ms > 0 else ""
        out.append(f"| {op} | {n} | {ms:.2f} | {100 * ms / total:.1f}% | {f'{gflop:.2f}' if gflop else ''} | "
                   f"{rate} | {_tactics_text(tactics, ms)} |")
    rest = total - shown
    rest_layers = len(layers) - sum(r[1] for r in ranked)
    if rest_layers:
        out.append(f"| (every other op) | {rest_layers} | {rest:.2f} | {100 * rest / total:.1f}% | | | |")
    out.append("")
    return out


def report(*, names, manifest, measured, threads, transformers, command, machine, when, edgert_version, plugins,
           built_from, build_dir, board, ort_version, rounds, iterations, peak):
    """The section's Markdown (without the markers). `measured[name]` is compare_ort's record:
    {"threads": {T: {edgert_ms, ort_ms, ratio, rounds: [(edgert, ort)], other_work, profile:
    (latency_ms, layers, {layer: ONNX nodes}) or error text}}, "flops":
    {ONNX node: FLOPs} or error text} or an error text. `peak`: {(isa, threads): GFLOP/s}."""
    out = []
    out.append("## edgert vs ONNX Runtime: transformers and a detector (CPU)")
    out.append("")
    out.append(f"Command: `{command}` (from the repository root)")
    out.append("")
    batched = [n for n in names if n in manifest and sample_batch(manifest[n]) != 1]
    batch_text = ("Batch 1, except " + ", ".join(f"{n} (its sample is batch {sample_batch(manifest[n])}, timed as it "
                                                  f"is)" for n in batched)) if batched else "Batch 1"
    out.append(f"Machine: {machine} (shared with other work: absolute times are noisy, ratios measured side by side "
               f"are what count); {when}; {edgert_version}"
               f"{f' (plugins {plugins})' if plugins else ''}, binaries from {build_dir} built at commit "
               f"{built_from}, board profile "
               f"{board}; onnxruntime-node {ort_version} (CPU EP, graphOptimizationLevel all, interOpNumThreads 1, "
               f"sequential). Models and sample inputs from tests/models/make_zoo.py; a model with dynamic axes is "
               f"built with its manifest profile (min / opt / max, tactics timed at opt and at the thread count it "
               f"runs with, `edgert build --threads T --timing-cache`, from an empty cache) and timed at its sample "
               f"inputs' shape, the column \"shape timed\"; both runtimes read the same .npy samples (int64 token "
               f"ids and masks as they are). {batch_text}. Each figure is the median over {rounds} alternating "
               f"rounds of the median of {iterations} timed runs (after 3 warm-up runs), edgert via `edgert bench "
               f"--threads T`, ORT via `tests/models/ort_reference.js --bench` with intraOpNumThreads T, which one "
               f"goes first alternating. Ratio = edgert / ORT, the median of the rounds' own ratios: below 1.00 "
               f"edgert is faster; \"rounds\" gives the lowest and highest of those ratios; \"other work\" is the "
               f"share of the machine's CPU time (all CPUs, over that model's rounds) that other processes took, from "
               f"/proc/stat less this benchmark's own, with the hypervisor's steal after the +.")
    out.append("")
    header = "| model | shape timed | profile min / opt / max |"
    rule = "|---|---|---|"
    for t in threads:
        header += f" edgert ms ({t}T) | ORT ms ({t}T) | ratio ({t}T) | rounds ({t}T) | other work ({t}T) |"
        rule += "---:|---:|---:|---:|---:|"
    out.append(header)
    out.append(rule)

    def row(name, label):
        m = manifest[name]
        r = measured.get(name)
        cells = [label, timed_shape(m), profile_text(m)]
        for t in threads:
            x = r["threads"].get(t) if isinstance(r, dict) else None
            if x is None:
                cells += ["—"] * 5
                continue
            ratios = [e / o for e, o in x["rounds"]]
            busy = x.get("other_work")
            cells += [fmt(x["edgert_ms"]), fmt(x["ort_ms"]), fmt(x["ratio"]) + "x",
                      f"{min(ratios):.2f}–{max(ratios):.2f}",
                      f"{100 * busy['others']:.0f}% + {100 * busy['steal']:.0f}%" if busy else "—"]
        out.append("| " + " | ".join(cells) + " |")

    in_mean = [n for n in names if n in transformers]
    others = [n for n in names if n not in transformers]
    for name in in_mean:
        row(name, name)
    if in_mean:
        cells = ["**geometric mean, transformers**", "", ""]
        for t in threads:
            g = geomean([measured[n]["threads"][t]["ratio"] for n in in_mean
                         if isinstance(measured.get(n), dict) and t in measured[n]["threads"]])
            cells += ["", "", (fmt(g) + "x") if g else "—", "", ""]
        out.append("| " + " | ".join(cells) + " |")
    for name in others:
        row(name, f"{name} ({manifest[name]['kind']}, not in the mean)")
    out.append("")
    for name in names:
        if isinstance(measured.get(name), str):
            out.append(f"{name}: {measured[name]}")
            out.append("")

    out.append(f"Where edgert's time goes: `edgert bench ENGINE --profile --threads T --iterations {iterations}` at "
               f"the same shapes, in a run of its own after the timed rounds; each layer's median over the runs, "
               f"summed per op type (the engine's op after the graph passes: edgert.FusedMatMul is a MatMul with "
               f"its bias, activation or scale folded in), the top {TOP_OPS}, with the tactics that ran them. GFLOP "
               f"is 2 x the multiply-accumulates of the op's MatMul, Gemm and Conv nodes at the timed shape "
               f"(shapes from the model built for that shape alone; convolutions counted as direct ones, though "
               f"Winograd tactics multiply less), GFLOP/s that over the op's time; the FMA peak is "
               f"`edgert_fma_peak` (tests/bench/fma_peak.cpp: FMA chains on registers, the ceiling). A "
               f"kernel name (`cpu/ref-...`) in place of a tactic is an op's only kernel, the reference one, "
               f"untuned; `reference` is a kernel's reference tactic; a tactic ending in `-portable` is plain C++ "
               f"built for baseline x86-64, with no AVX2 code of its own.")
    out.append("")
    for name in names:
        r = measured.get(name)
        if not isinstance(r, dict):
            continue
        for t in threads:
            x = r["threads"].get(t)
            if x is None:
                continue
            if isinstance(x.get("profile"), str):
                out.append(f"**{name}**, {t} threads: profile {x['profile']}")
                out.append("")
                continue
            out += _breakdown_lines(name, t, x["profile"], r.get("flops"), x, peak)
    return "\n".join(out).rstrip() + "\n"
