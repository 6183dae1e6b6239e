"""A YOLOv8n-style detector for the edgert test zoo, written from the architecture (no weights).

Backbone and PAN neck of YOLOv8n (width 0.25, depth 0.33): Conv-BN-SiLU, C2f blocks, SPPF,
nearest upsampling and concatenation; the decoupled head predicts per anchor 4 x 16 distance
bins (DFL) and 80 class logits at strides 8, 16 and 32. Inside the graph, as an "end-to-end"
export has it: the DFL softmax expectation (a fixed 1x1 convolution over the 16 bins), anchors
and strides made from the feature maps' shapes (so any input H and W that are multiples of 32
work), distances to xywh, xywh to xyxy, class sigmoid, the best class per anchor, a confidence
threshold, and class-aware NMS (torchvision.ops.nms on boxes offset by class, exported as
NonMaxSuppression). Outputs: boxes [N, 4] xyxy in input pixels, scores [N], labels [N] int64.
"""
import torch
import torch.nn as nn
import torchvision

NUM_CLASSES = 80
REG_MAX = 16
STRIDES = (8, 16, 32)
CONF_THRESHOLD = 0.25
IOU_THRESHOLD = 0.7
MAX_DETECTIONS = 300
MAX_WH = 7680  # class offset of the class-aware NMS (ultralytics' max_wh)


class Conv(nn.Module):
    def __init__(self, c1, c2, k=1, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut):
        super().__init__()
        self.cv1 = Conv(c1, c2, 3)
        self.cv2 = Conv(c2, c2, 3)
        self.add = shortcut and c1 == c2

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C2f(nn.Module):
    def __init__(self, c1, c2, n=1, shortcut=False):
        super().__init__()
        self.c = c2 // 2
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(Bottleneck(self.c, self.c, shortcut) for _ in range(n))

    def forward(self, x):
        y = list(self.cv1(x).split((self.c, self.c), 1))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class SPPF(nn.Module):
    def __init__(self, c1, c2, k=5):
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1)
        self.cv2 = Conv(c_ * 4, c2, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        y = [self.cv1(x)]
        for _ in range(3):
            y.append(self.m(y[-1]))
        return self.cv2(torch.cat(y, 1))


class DFL(nn.Module):
    """Expectation of the softmax over REG_MAX distance bins, as a fixed 1x1 convolution."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(REG_MAX, 1, 1, bias=False).requires_grad_(False)
        self.conv.weight.data[:] = torch.arange(REG_MAX, dtype=torch.float).view(1, REG_MAX, 1, 1)

    def forward(self, x):
        b, _, a = x.shape
        return self.conv(x.view(b, 4, REG_MAX, a).transpose(2, 1).softmax(1)).view(b, 4, a)


def make_anchors(feats, grid_cell_offset=0.5):
    points, strides = [], []
    for f, stride in zip(feats, STRIDES):
        _, _, h, w = f.shape
        sx = torch.arange(end=w, dtype=f.dtype) + grid_cell_offset
        sy = torch.arange(end=h, dtype=f.dtype) + grid_cell_offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        points.append(torch.stack((sx, sy), -1).view(-1, 2))
        strides.append(torch.full((h * w, 1), stride, dtype=f.dtype))
    return torch.cat(points).transpose(0, 1), torch.cat(strides).transpose(0, 1)


class Detect(nn.Module):
    def __init__(self, ch):
        super().__init__()
        c2 = max(16, ch[0] // 4, REG_MAX * 4)
        c3 = max(ch[0], min(NUM_CLASSES, 100))
        self.cv2 = nn.ModuleList(nn.Sequential(Conv(x, c2, 3), Conv(c2, c2, 3), nn.Conv2d(c2, 4 * REG_MAX, 1)) for x in ch)
        self.cv3 = nn.ModuleList(nn.Sequential(Conv(x, c3, 3), Conv(c3, c3, 3), nn.Conv2d(c3, NUM_CLASSES, 1)) for x in ch)
        self.dfl = DFL()
        for a, b, s in zip(self.cv2, self.cv3, STRIDES):  # ultralytics' bias_init
            nn.init.constant_(a[-1].bias, 1.0)
            nn.init.constant_(b[-1].bias, float(torch.log(torch.tensor(5 / NUM_CLASSES / (640 / s) ** 2))))

    def raw(self, feats):
        """Box-bin logits [B, 64, A] and class logits [B, 80, A] over the anchors of every level."""
        b = feats[0].shape[0]
        box = torch.cat([cv(f).view(b, 4 * REG_MAX, -1) for cv, f in zip(self.cv2, feats)], 2)
        cls = torch.cat([cv(f).view(b, NUM_CLASSES, -1) for cv, f in zip(self.cv3, feats)], 2)
        return box, cls

    def forward(self, feats):
        box, cls = self.raw(feats)
        anchors, strides = make_anchors(feats)
        lt, rb = self.dfl(box).chunk(2, 1)
        x1y1, x2y2 = anchors.unsqueeze(0) - lt, anchors.unsqueeze(0) + rb
        xywh = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * strides
        return xywh, cls.sigmoid()


class YoloV8n(nn.Module):
    def __init__(self):
        super().__init__()
        self.b0 = Conv(3, 16, 3, 2)
        self.b1 = Conv(16, 32, 3, 2)
        self.b2 = C2f(32, 32, 1, True)
        self.b3 = Conv(32, 64, 3, 2)
        self.b4 = C2f(64, 64, 2, True)
        self.b5 = Conv(64, 128, 3, 2)
        self.b6 = C2f(128, 128, 2, True)
        self.b7 = Conv(128, 256, 3, 2)
        self.b8 = C2f(256, 256, 1, True)
        self.b9 = SPPF(256, 256, 5)
        self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
        self.h12 = C2f(384, 128, 1)
        self.h15 = C2f(192, 64, 1)
        self.h16 = Conv(64, 64, 3, 2)
        self.h18 = C2f(192, 128, 1)
        self.h19 = Conv(128, 128, 3, 2)
        self.h21 = C2f(384, 256, 1)
        self.detect = Detect((64, 128, 256))
        self.facts = {"num_classes": NUM_CLASSES, "reg_max": REG_MAX, "strides": list(STRIDES),
                      "conf_threshold": CONF_THRESHOLD, "iou_threshold": IOU_THRESHOLD,
                      "max_detections": MAX_DETECTIONS, "nms": "class-aware (boxes offset by label * 7680)",
                      "box_format": "xyxy, input pixels"}

    def features(self, x):
        p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        n4 = self.h12(torch.cat((self.up(p5), p4), 1))
        o3 = self.h15(torch.cat((self.up(n4), p3), 1))
        o4 = self.h18(torch.cat((self.h16(o3), n4), 1))
        o5 = self.h21(torch.cat((self.h19(o4), p5), 1))
        return [o3, o4, o5]

    def calibration_forward(self, x):
        """The convolutions only, on any batch (batch-norm recalibration, logit statistics)."""
        return self.detect.raw(self.features(x))

    def forward(self, x):
        xywh, scores = self.detect(self.features(x))
        pred = torch.cat((xywh, scores), 1)[0].transpose(0, 1)  # [A, 4 + classes]; batch 1
        xy, wh = pred[:, :2], pred[:, 2:4]
        boxes = torch.cat((xy - wh / 2, xy + wh / 2), 1)
        conf, labels = pred[:, 4:].max(1)
        keep = conf > CONF_THRESHOLD
        boxes, conf, labels = boxes[keep], conf[keep], labels[keep]
        i = torchvision.ops.nms(boxes + labels[:, None].to(boxes.dtype) * MAX_WH, conf, IOU_THRESHOLD)
        i = i[:MAX_DETECTIONS]
        return boxes[i], conf[i], labels[i]


@torch.no_grad()
def separate_scores(model, batch):
    """Random class logits put every sigmoid score near the bias's ~0.0001 and the box bins
    near a flat softmax (every box ~7.5 strides a side). Scale the last class and box-bin convs
    by powers of two (logit std ~3 and ~2), then shift the class biases so that ~2% of the
    anchors of `batch` pass CONF_THRESHOLD: the candidates' scores, and so NMS's order, are
    well separated. Returns what it did."""
    box, cls = model.calibration_forward(batch)
    cls_factor = 2.0 ** round(float(torch.log2(3.0 / cls.std())))
    box_factor = 2.0 ** round(float(torch.log2(2.0 / box.std())))
    for seq in model.detect.cv3:
        seq[-1].weight.mul_(cls_factor)
        seq[-1].bias.mul_(cls_factor)
    for seq in model.detect.cv2:
        seq[-1].weight.mul_(box_factor)
        seq[-1].bias.mul_(box_factor)
    best = model.calibration_forward(batch)[1].max(1).values.flatten()
    target = float(torch.quantile(best, 0.98))
    shift = float(torch.logit(torch.tensor(CONF_THRESHOLD))) - target
    for seq in model.detect.cv3:
        seq[-1].bias.add_(shift)
    return {"class_logit_scale": cls_factor, "box_logit_scale": box_factor, "class_bias_shift": round(shift, 4)}
