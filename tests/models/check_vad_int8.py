#!/usr/bin/python3
"""INT8 on a real pretrained speech network with real speech: Silero VAD (legacy, MIT).

  check_vad_int8.py --edgert build/bin/edgert --work DIR [--calibrator NAME]

Fetches into DIR (once): silero_vad_legacy.onnx from the npm package @ricky0123/vad-web 0.0.31
(tarball SHA-256 pinned) and the 14 16 kHz speech recordings of Debian's pocketsphinx-testdata
(apt-get download, dpkg-deb -x).

Evaluation set: each recording is one stream, 1 s of silence + the recording + 1 s of silence,
with white noise at -40 dBFS RMS over all of it. The 14 streams run side by side as a batch of
14, 512-sample frames (32 ms) one step at a time, the LSTM state carried from step to step, as
the model is run in a browser. A frame is speech when the clean recording's energy in it is
within 35 dB of the loudest frame of that recording. The task metric is the ROC AUC of the
speech probability against these labels (and F1 at the usual 0.5 threshold).

The engines are built from a rewritten copy of the model:
- The whole network sits in If branches (16 kHz or 8 kHz model; squeeze or not; given state or
  zeros). edgert folds the condition but runs the If as a node, and the int8 rewrite does not go
  into branches: built as is, "int8: 0 convolution(s) ...". The copy has each If replaced by
  the branch its condition takes for every batch size (IF_BRANCH says why).
- The copy has one input, packed [batch, 768] = the 512 samples, h and c (layers side by side),
  which three Slice/Reshape/Transpose nodes unpack, and sr as an initializer (16000), so that a
  step is one .npy file for `edgert run` and for --calib (which also takes a directory per
  sample with NAME.npy for each of several inputs).
The copy's float32 engine must give what the unmodified model's float32 engine gives
(MAX_REWRITE_DIFF), and that one must agree with ONNX Runtime on one step (edgert compare) when
the repository's onnxruntime-node is installed.

What the int8 rewrite makes of it: the 1-D convolutions (the STFT's and the encoder's, as 2-D
ones over [N, C, 1, W]), the residual Adds and the Concats; the LSTMs stay float32. A plain
--int8 build loses about 0.02 AUC (0.9442 -> 0.9252); it is built and reported, not judged. The
judged build adds --accuracy-guard GUARD with validation steps of the calibration recordings; its
most sensitive layers are the STFT convolution Conv_73 (whose power feeds a log: uint8 keeps
little of its dynamic range) and Concat_320 (the LSTM cell state cn, fed back every step), and
it keeps those and the next most sensitive in float32 (AUC 0.9449).

Calibration: frames with their carried float32 state from four of the recordings (one from each
folder), so the AUC is also reported on the ten others. Passes when the judged INT8 engine's AUC
is at most MAX_AUC_LOSS below float32's, on all frames and on the held-out recordings
(--guard none judges the plain --int8 build instead).
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import time
import wave

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

NPM_PACKAGE = "@ricky0123/vad-web@0.0.31"
NPM_TARBALL = "ricky0123-vad-web-0.0.31.tgz"
NPM_TARBALL_SHA256 = "d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940"
MODEL_MEMBER = "package/dist/silero_vad_legacy.onnx"
MODEL_SHA256 = "a35ebf52fd3ce5f1469b2a36158dba761bc47b973ea3382b3186ca15b1f5af28"
DEB_PACKAGE = "pocketsphinx-testdata"
AUDIO_DIR = "usr/share/pocketsphinx/test/data"
RECORDINGS = [
    "cards/001.wav", "cards/002.wav", "cards/003.wav", "cards/004.wav", "cards/005.wav",
    "goforward.raw", "numbers.raw", "something.raw", "tidigits/dhd.2934z.raw",
    "librivox/sense_and_sensibility_01_austen_64kb-0870.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0880.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0890.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0920.wav",
    "librivox/sense_and_sensibility_01_austen_64kb-0930.wav",
]
CALIBRATION_RECORDINGS = {"cards/001.wav", "goforward.raw", "tidigits/dhd.2934z.raw",
                          "librivox/sense_and_sensibility_01_austen_64kb-0880.wav"}
CALIBRATION_BATCHES = 24  # of BATCH frames each, drawn from the calibration recordings' steps
VALIDATION_BATCHES = 8  # other steps of the same recordings, for --accuracy-guard
GUARD = "rel-l2:0.1"

RATE = 16000
FRAME = 512
STATE = 64  # LSTM hidden size; h and c are [2, batch, 64]
PACKED = FRAME + 4 * STATE
BATCH = len(RECORDINGS)
GAP_S = 1.0
NOISE_DBFS = -40.0
LABEL_DB = 35.0
NOISE_SEED = 7

MAX_AUC_LOSS = 0.005
MAX_REWRITE_DIFF = 1e-5  # speech probability, rewritten copy vs the model as shipped (float32)
MAX_ORT_REL_L2 = 1e-4

# Branch each If of the shipped model takes (sha256 MODEL_SHA256), and why it does for any batch.
IF_BRANCH = {
    "If_25": ("then_branch", "sr == 16000: the 16 kHz model"),
    "If_69": ("then_branch", "dim 1 of the unsqueezed [batch, 1, samples] signal is 1: squeeze it"),
    "If_106": ("else_branch", "the spectrogram has rank 3, not 2: no unsqueeze"),
    "If_177": ("then_branch", "h has 2 layers, not 0: the given state, not zeros"),
    "If_492": ("then_branch", "dim 1 of the decoder's [batch, 1, time] output is 1: squeeze it"),
}


def run(cmd, quiet=False):
    if not quiet:
        print("$ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, capture_output=True, text=True)
    if not quiet or result.returncode != 0:
        sys.stdout.write(result.stdout)
        sys.stdout.write(result.stderr)
    if result.returncode != 0:
        raise SystemExit(f"FAIL: exit code {result.returncode}: {' '.join(cmd)}")
    return result.stdout


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fetch(work):
    model = os.path.join(work, "silero_vad_legacy.onnx")
    if not os.path.exists(model):
        tarball = os.path.join(work, NPM_TARBALL)
        if not os.path.exists(tarball):
            run(["npm", "pack", NPM_PACKAGE, "--pack-destination", work])
        if sha256(tarball) != NPM_TARBALL_SHA256:
            raise SystemExit(f"FAIL: {tarball}: SHA-256 {sha256(tarball)}, expected {NPM_TARBALL_SHA256}")
        with tarfile.open(tarball) as tar, open(model + ".part", "wb") as out:
            shutil.copyfileobj(tar.extractfile(MODEL_MEMBER), out)
        os.replace(model + ".part", model)
    if sha256(model) != MODEL_SHA256:
        raise SystemExit(f"FAIL: {model}: SHA-256 {sha256(model)}, expected {MODEL_SHA256} (IF_BRANCH is for that one)")
    audio = os.path.join(work, "pocketsphinx", AUDIO_DIR)
    if not all(os.path.exists(os.path.join(audio, r)) for r in RECORDINGS):
        debs = os.path.join(work, "deb")
        os.makedirs(debs, exist_ok=True)
        if not any(f.startswith(DEB_PACKAGE) for f in os.listdir(debs)):
            subprocess.run(["apt-get", "download", DEB_PACKAGE], cwd=debs, check=True)
        deb = sorted(f for f in os.listdir(debs) if f.startswith(DEB_PACKAGE) and f.endswith(".deb"))[-1]
        run(["dpkg-deb", "-x", os.path.join(debs, deb), os.path.join(work, "pocketsphinx")])
    return model, audio


def read_recording(path):
    if path.endswith(".wav"):
        with wave.open(path) as w:
            if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
                raise SystemExit(f"FAIL: {path}: not 16 kHz mono 16-bit")
            data = w.readframes(w.getnframes())
    else:  # headerless 16 kHz 16-bit little-endian mono
        with open(path, "rb") as f:
            data = f.read()
    return np.frombuffer(data, "<i2").astype(np.float32) / 32768.0


def evaluation_set(audio):
    """Streams [BATCH, steps * FRAME] (noisy), labels [BATCH, steps] and the steps each stream has."""
    gap = np.zeros(int(GAP_S * RATE), np.float32)
    clean = [np.concatenate([gap, read_recording(os.path.join(audio, r)), gap]) for r in RECORDINGS]
    steps = [len(c) // FRAME for c in clean]
    total = max(steps)
    rng = np.random.default_rng(NOISE_SEED)
    noise_rms = 10.0 ** (NOISE_DBFS / 20.0)
    streams = (rng.standard_normal((BATCH, total * FRAME)) * noise_rms).astype(np.float32)
    labels = np.zeros((BATCH, total), np.uint8)
    for b, c in enumerate(clean):
        n = steps[b] * FRAME
        streams[b, :n] += c[:n]
        energy_db = 10.0 * np.log10(np.mean(c[:n].reshape(-1, FRAME).astype(np.float64) ** 2, axis=1) + 1e-20)
        labels[b, :steps[b]] = energy_db >= energy_db.max() - LABEL_DB
    return streams, labels, np.array(steps)


def inline_ifs(nodes, initializers, path):
    """NODES with every If replaced by the nodes of the branch IF_BRANCH names (recursively)."""
    flat = []
    for node in nodes:
        if node.op_type != "If":
            flat.append(node)
            continue
        if node.name not in IF_BRANCH:
            raise SystemExit(f"FAIL: {path}: If node '{node.name}' has no entry in IF_BRANCH")
        branch = next(a.g for a in node.attribute if a.name == IF_BRANCH[node.name][0])
        initializers.extend(branch.initializer)
        flat.extend(inline_ifs(branch.node, initializers, path))
        for inner, outer in zip(branch.output, node.output):
            flat.append(helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}_{outer}"))
    return flat


def single_input_copy(model_path, out_path):
    """The model with its Ifs resolved and one input, packed = [samples | h0 h1 | c0 c1]."""
    m = onnx.load(model_path)
    g = m.graph
    initializers = list(g.initializer)
    nodes = inline_ifs(g.node, initializers, model_path)
    const = lambda name, value: numpy_helper.from_array(np.array(value, np.int64), name)
    initializers += [const("sr", 16000), const("packed_0", [0]), const("packed_samples", [FRAME]),
                     const("packed_h", [FRAME + 2 * STATE]), const("packed_c", [PACKED]),
                     const("packed_axis", [1]), const("packed_state_shape", [0, 2, STATE])]
    unpack = [helper.make_node("Slice", ["packed", "packed_0", "packed_samples", "packed_axis"], ["input"],
                               name="unpack_input")]
    for state, start, end in (("h", "packed_samples", "packed_h"), ("c", "packed_h", "packed_c")):
        unpack += [
            helper.make_node("Slice", ["packed", start, end, "packed_axis"], [f"packed_{state}_flat"],
                             name=f"unpack_{state}_slice"),
            helper.make_node("Reshape", [f"packed_{state}_flat", "packed_state_shape"], [f"packed_{state}_bl"],
                             name=f"unpack_{state}_reshape"),
            helper.make_node("Transpose", [f"packed_{state}_bl"], [state], perm=[1, 0, 2], name=f"unpack_{state}"),
        ]
    names = [o for n in unpack + nodes for o in n.output] + [i.name for i in initializers]
    if len(names) != len(set(names)):
        raise SystemExit(f"FAIL: {model_path}: names collide after inlining the If branches")
    graph = helper.make_graph(unpack + nodes, g.name, [helper.make_tensor_value_info("packed", TensorProto.FLOAT,
                                                                                     ["batch", PACKED])],
                              list(g.output), initializers)
    copy = helper.make_model(graph, opset_imports=list(m.opset_import), ir_version=m.ir_version)
    onnx.checker.check_model(copy)
    onnx.save(copy, out_path)


def pack(frames, h, c):
    return np.concatenate([frames, h.transpose(1, 0, 2).reshape(BATCH, -1),
                           c.transpose(1, 0, 2).reshape(BATCH, -1)], axis=1).astype(np.float32)


def run_streams(edgert, engine, streams, packed_input, tmp, record_packed=False):
    """Speech probabilities [BATCH, steps], one `edgert run` per 32 ms step, state carried."""
    steps = streams.shape[1] // FRAME
    h = np.zeros((2, BATCH, STATE), np.float32)
    c = np.zeros((2, BATCH, STATE), np.float32)
    probability = np.zeros((BATCH, steps), np.float32)
    packed_steps = []
    os.makedirs(tmp, exist_ok=True)
    sr = os.path.join(tmp, "sr.npy")
    np.save(sr, np.array(RATE, np.int64))
    for t in range(steps):
        frames = streams[:, t * FRAME:(t + 1) * FRAME]
        if packed_input:
            x = pack(frames, h, c)
            np.save(os.path.join(tmp, "packed.npy"), x)
            inputs = ["-i", f"packed={tmp}/packed.npy"]
            if record_packed:
                packed_steps.append(x)
        else:
            for name, value in (("input", frames), ("h", h), ("c", c)):
                np.save(os.path.join(tmp, f"{name}.npy"), np.ascontiguousarray(value))
            inputs = ["-i", f"input={tmp}/input.npy", "-i", f"sr={sr}", "-i", f"h={tmp}/h.npy", "-i", f"c={tmp}/c.npy"]
        run([edgert, "run", engine, *inputs, "--npy", "--output-dir", tmp, "-q"], quiet=True)
        probability[:, t] = np.load(os.path.join(tmp, "output.npy")).reshape(BATCH)
        h = np.load(os.path.join(tmp, "hn.npy"))
        c = np.load(os.path.join(tmp, "cn.npy"))
    return probability, packed_steps


def roc_auc(scores, labels):
    """Mann-Whitney U / (positives * negatives), ties counted half."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), np.float64)
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    positives = int(labels.sum())
    negatives = len(labels) - positives
    return (ranks[labels == 1].sum() - positives * (positives + 1) / 2.0) / (positives * negatives)


def f1(scores, labels, threshold=0.5):
    predicted = scores > threshold
    tp = int(np.sum(predicted & (labels == 1)))
    return 2.0 * tp / max(1, int(predicted.sum()) + int(labels.sum()))


def profile(shapes):
    spec = ",".join(shapes)
    return ["--min-shapes", spec, "--opt-shapes", spec, "--max-shapes", spec]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edgert", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--calibrator", default="entropy")
    parser.add_argument("--guard", default=GUARD, help="--accuracy-guard of the judged INT8 build; none: a plain --int8 build")
    args = parser.parse_args()
    started = time.time()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    model, audio = fetch(work)
    copy = os.path.join(work, "silero_vad_legacy_16k_packed.onnx")
    single_input_copy(model, copy)

    streams, labels, steps = evaluation_set(audio)
    valid = np.arange(labels.shape[1])[None, :] < steps[:, None]
    held_out = valid & np.array([r not in CALIBRATION_RECORDINGS for r in RECORDINGS])[:, None]
    print(f"{BATCH} recordings, {int(valid.sum())} frames of 32 ms, {100.0 * labels[valid].mean():.1f}% speech; "
          f"{int(held_out.sum())} frames in the {BATCH - len(CALIBRATION_RECORDINGS)} recordings not calibrated on")

    shipped_engine = os.path.join(work, "shipped_fp32.engine")
    fp32_engine = os.path.join(work, "fp32.engine")
    int8_engine = os.path.join(work, "int8.engine")
    run([args.edgert, "build", model, "-o", shipped_engine,
         *profile([f"input:{BATCH}x{FRAME}", f"h:2x{BATCH}x{STATE}", f"c:2x{BATCH}x{STATE}"])])
    run([args.edgert, "build", copy, "-o", fp32_engine, *profile([f"packed:{BATCH}x{PACKED}"])])

    shipped, _ = run_streams(args.edgert, shipped_engine, streams, False, os.path.join(work, "io_shipped"))
    fp32, packed_steps = run_streams(args.edgert, fp32_engine, streams, True, os.path.join(work, "io_fp32"), True)
    rewrite_diff = float(np.abs(shipped - fp32)[valid].max())
    print(f"rewritten copy vs the model as shipped (float32): max |probability difference| {rewrite_diff:.2e}")
    if rewrite_diff > MAX_REWRITE_DIFF:
        raise SystemExit(f"FAIL: the rewritten copy differs from the model (> {MAX_REWRITE_DIFF:g})")

    ort_runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_reference.js")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isdir(os.path.join(repo, "node_modules", "onnxruntime-node")):
        step = int(np.argmax(labels.sum(axis=0)))
        inputs = os.path.join(work, "ort_step")
        os.makedirs(inputs, exist_ok=True)
        x = packed_steps[step]
        np.save(os.path.join(inputs, "input.npy"), np.ascontiguousarray(x[:, :FRAME]))
        np.save(os.path.join(inputs, "sr.npy"), np.array(RATE, np.int64))
        for i, name in enumerate(("h", "c")):
            state = x[:, FRAME + 2 * STATE * i:FRAME + 2 * STATE * (i + 1)].reshape(BATCH, 2, STATE)
            np.save(os.path.join(inputs, f"{name}.npy"), np.ascontiguousarray(state.transpose(1, 0, 2)))
        run([args.edgert, "compare", model, shipped_engine, "--inputs", inputs, "--ort-runner", ort_runner,
             "--max-rel-l2", str(MAX_ORT_REL_L2)])
    else:
        print("ONNX Runtime check skipped: no node_modules/onnxruntime-node in the repository")

    calib = os.path.join(work, "calib")
    validation = os.path.join(work, "validation")
    rows = np.array([(b, t) for b, r in enumerate(RECORDINGS) if r in CALIBRATION_RECORDINGS
                     for t in range(steps[b])])
    rows = rows[np.random.default_rng(1).permutation(len(rows))]
    for folder, first, count in ((calib, 0, CALIBRATION_BATCHES), (validation, CALIBRATION_BATCHES, VALIDATION_BATCHES)):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for i in range(count):
            picked = rows[(first + i) * BATCH:(first + i + 1) * BATCH]
            np.save(os.path.join(folder, f"{i:03d}.npy"), np.stack([packed_steps[t][b] for b, t in picked]))

    def int8_build(engine, guarded):
        guard = ["--accuracy-guard", args.guard, "--validation", validation] if guarded else []
        out = run([args.edgert, "build", copy, "-o", engine, "--int8", "--calib", calib, "--calibrator", args.calibrator,
                   *guard, *profile([f"packed:{BATCH}x{PACKED}"])])
        probability, _ = run_streams(args.edgert, engine, streams, True, engine + ".io")
        return probability, [line for line in out.splitlines() if line.startswith(("int8: ", "accuracy guard"))
                             and "kept float32: Conv" not in line]

    results = []
    if args.guard != "none":
        plain, plain_lines = int8_build(os.path.join(work, "int8_unguarded.engine"), False)
        results.append(("INT8 without the guard (not judged)", plain, plain_lines, False))
    int8, int8_lines = int8_build(int8_engine, args.guard != "none")
    results.append((f"INT8{' with --accuracy-guard ' + args.guard if args.guard != 'none' else ''}", int8, int8_lines,
                    True))

    failed = []
    for title, probability, lines, judged in results:
        print(f"{title}:")
        for line in lines:
            print(f"  {line}")
        for name, mask in (("all recordings", valid), ("held-out recordings", held_out)):
            y = labels[mask]
            auc32, auc8 = roc_auc(fp32[mask], y), roc_auc(probability[mask], y)
            print(f"  {name}: ROC AUC float32 {auc32:.4f}, INT8 {auc8:.4f} ({auc8 - auc32:+.4f}); "
                  f"F1@0.5 float32 {f1(fp32[mask], y):.4f}, INT8 {f1(probability[mask], y):.4f}")
            if judged and auc8 < auc32 - MAX_AUC_LOSS:
                failed.append(f"{name}: INT8 AUC {auc8:.4f} more than {MAX_AUC_LOSS} below float32's {auc32:.4f}")
        diff = np.abs(probability - fp32)[valid]
        agree = 100.0 * np.mean((probability > 0.5)[valid] == (fp32 > 0.5)[valid])
        print(f"  speech probability vs float32: mean |difference| {diff.mean():.4f}, max {diff.max():.4f}; "
              f"decisions at 0.5 agree on {agree:.2f}% of frames")
    print(f"time {time.time() - started:.1f} s")
    if failed:
        raise SystemExit("FAIL: " + "; ".join(failed))
    print("PASS")


if __name__ == "__main__":
    main()
