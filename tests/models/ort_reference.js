#!/usr/bin/env node
// Reference outputs (and a latency baseline) from ONNX Runtime for edgert's tests.
//
//   node tests/models/ort_reference.js MODEL.onnx IN_DIR OUT_DIR [--threads N] [--bench ITERATIONS]
//
// Reads IN_DIR/<input_name>.npy for every model input, runs the model on ONNX Runtime's CPU
// execution provider (graphOptimizationLevel 'all', intraOpNumThreads N (default 1),
// interOpNumThreads 1, sequential execution) and writes OUT_DIR/<output_name>.npy ('/', '\\'
// and ':' in names become '_'). With --bench N it then does 3 warm-up runs, times N runs and
// prints one JSON line on stdout:
//   {"model":...,"threads":...,"iterations":...,"median_ms":...,"min_ms":...,"mean_ms":...}
// (the other messages go to stderr in that mode, so stdout is just the JSON line).
//
// onnxruntime-node comes from the repository root's node_modules (package.json pins it);
// install it with:  ONNXRUNTIME_NODE_INSTALL=skip npm ci   (in the repository root).
'use strict';

const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

// ---------------------------------------------------------------------------------------
// .npy reading and writing (format versions 1.0, 2.0 and 3.0; C order; any byte order on
// read, little-endian on write).

// numpy dtype (without byte-order char) -> [ORT tensor type, TypedArray, item size]
const NPY_TYPES = {
  f4: ['float32', Float32Array, 4],
  f8: ['float64', Float64Array, 8],
  f2: ['float16', Uint16Array, 2],
  i8: ['int64', BigInt64Array, 8],
  u8: ['uint64', BigUint64Array, 8],
  i4: ['int32', Int32Array, 4],
  u4: ['uint32', Uint32Array, 4],
  i2: ['int16', Int16Array, 2],
  u2: ['uint16', Uint16Array, 2],
  i1: ['int8', Int8Array, 1],
  u1: ['uint8', Uint8Array, 1],
  b1: ['bool', Uint8Array, 1],
};
const ORT_TO_NPY = {};
for (const [code, [type]] of Object.entries(NPY_TYPES)) ORT_TO_NPY[type] = code;

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const magic = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY
  if (buf.length < 10 || !buf.subarray(0, 6).equals(magic)) throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  let headerLen;
  let offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw new Error(`${file}: unsupported .npy version ${major}.${buf[7]}`);
  }
  const header = buf.subarray(offset, offset + headerLen).toString(major === 3 ? 'utf8' : 'latin1');
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shapeM = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeM) throw new Error(`${file}: cannot parse .npy header ${header}`);
  if (fortran[1] === 'True') throw new Error(`${file}: Fortran-order arrays are not supported`);
  const shape = shapeM[1].split(',').map((s) => s.trim()).filter((s) => s.length).map((s) => parseInt(s, 10));
  const order = descr[1][0];
  const code = descr[1].slice(1);
  if (!'<>|='.includes(order) || !(code in NPY_TYPES)) throw new Error(`${file}: unsupported dtype '${descr[1]}'`);
  const [type, Ctor, size] = NPY_TYPES[code];
  const count = shape.reduce((a, b) => a * b, 1);
  const dataStart = offset + headerLen;
  if (buf.length - dataStart < count * size) throw new Error(`${file}: truncated data (${shape} ${descr[1]})`);
  // Copy into a fresh, aligned buffer (the file buffer's offset need not be a multiple of size).
  const bytes = Buffer.from(buf.subarray(dataStart, dataStart + count * size));
  if (order === '>' && size > 1) {
    if (size === 2) bytes.swap16();
    else if (size === 4) bytes.swap32();
    else bytes.swap64();
  }
  const data = new Ctor(bytes.buffer, bytes.byteOffset, count);
  return { type, shape, data };
}

function writeNpy(file, type, shape, data) {
  const code = ORT_TO_NPY[type];
  if (!code) throw new Error(`cannot write a ${type} tensor as .npy`);
  const descr = (NPY_TYPES[code][2] === 1 ? '|' : '<') + code;
  const shapeStr = shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeStr}, }`;
  // magic(6) + version(2) + length(2) + header + '\n', padded to a multiple of 64.
  const total = Math.ceil((10 + header.length + 1) / 64) * 64;
  header = header.padEnd(total - 10 - 1, ' ') + '\n';
  const pre = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(pre);
  pre.writeUInt16LE(header.length, 8);
  let body;
  if (type === 'bool') body = Buffer.from(Uint8Array.from(data, (v) => (v ? 1 : 0)));
  else body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // The host is little-endian (x86_64/aarch64); ORT's typed arrays are in host order.
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

// Converts a read array to the type the model input wants (e.g. a float64 .npy into a float32 input).
function convert(arr, want) {
  if (!want || arr.type === want) return arr;
  const entry = Object.values(NPY_TYPES).find(([t]) => t === want);
  if (!entry || want === 'float16' || arr.type === 'float16') {
    throw new Error(`input is ${arr.type}, model wants ${want}: no conversion`);
  }
  const Ctor = entry[1];
  const big = want === 'int64' || want === 'uint64';
  const src = arr.data;
  const out = new Ctor(src.length);
  for (let i = 0; i < src.length; i++) {
    const v = src[i];
    if (big) out[i] = typeof v === 'bigint' ? v : BigInt(Math.trunc(Number(v)));
    else if (want === 'bool') out[i] = v ? 1 : 0;
    else out[i] = Number(v);
  }
  return { type: want, shape: arr.shape, data: out };
}

// ---------------------------------------------------------------------------------------

function usage(msg) {
  if (msg) process.stderr.write(`error: ${msg}\n`);
  process.stderr.write('usage: node tests/models/ort_reference.js MODEL.onnx IN_DIR OUT_DIR [--threads N] [--bench ITERATIONS]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const pos = [];
  const opts = { threads: 1, bench: 0, optimization: 'all' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const eq = a.indexOf('=');
    const key = a.startsWith('--') ? (eq > 0 ? a.slice(0, eq) : a) : null;
    if (key === '--threads' || key === '--bench') {
      const v = eq > 0 ? a.slice(eq + 1) : argv[++i];
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) usage(`${key} needs a positive integer, got '${v}'`);
      opts[key.slice(2)] = n;
    } else if (key === '--optimization') {
      // 'disabled' runs every node as the model writes it: a Q/DQ model as DequantizeLinear, the
      // float op and QuantizeLinear, instead of the fused integer kernels that 'all' makes of
      // them (which on AVX2 without VNNI saturate pairs of u8 x s8 products in vpmaddubsw).
      const v = eq > 0 ? a.slice(eq + 1) : argv[++i];
      if (!['disabled', 'basic', 'extended', 'all'].includes(v)) usage(`--optimization is disabled, basic, extended or all, got '${v}'`);
      opts.optimization = v;
    } else if (a === '-h' || a === '--help') {
      usage();
    } else if (key) {
      usage(`unknown option ${a}`);
    } else {
      pos.push(a);
    }
  }
  if (pos.length !== 3) usage('expected MODEL.onnx IN_DIR OUT_DIR');
  [opts.model, opts.inDir, opts.outDir] = pos;
  return opts;
}

function sanitize(name) {
  return name.replace(/[/\\:]/g, '_');
}

function summary(t) {
  let lo = Infinity;
  let hi = -Infinity;
  let nan = 0;
  if (t.type === 'float32' || t.type === 'float64') {
    for (const v of t.data) {
      if (Number.isNaN(v)) nan++;
      else {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    return `min ${lo.toPrecision(5)} max ${hi.toPrecision(5)}${nan ? ` NaN x${nan}` : ''}`;
  }
  return '';
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const log = opts.bench ? (s) => process.stderr.write(s + '\n') : (s) => console.log(s);
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: opts.optimization,
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const meta = {};
  for (const m of session.inputMetadata || []) meta[m.name] = m;

  const feeds = {};
  for (const name of session.inputNames) {
    const file = path.join(opts.inDir, sanitize(name) + '.npy');
    if (!fs.existsSync(file)) throw new Error(`missing input ${file} for model input '${name}'`);
    const arr = convert(readNpy(file), meta[name] && meta[name].isTensor ? meta[name].type : null);
    feeds[name] = new ort.Tensor(arr.type, arr.data, arr.shape);
    log(`input  ${name}: ${arr.type} [${arr.shape.join(', ')}] <- ${file}`);
  }

  const results = await session.run(feeds);
  fs.mkdirSync(opts.outDir, { recursive: true });
  for (const name of session.outputNames) {
    const t = results[name];
    const file = path.join(opts.outDir, sanitize(name) + '.npy');
    writeNpy(file, t.type, t.dims, t.data);
    log(`output ${name}: ${t.type} [${t.dims.join(', ')}] ${summary(t)} -> ${file}`);
  }

  if (opts.bench) {
    for (let i = 0; i < 3; i++) await session.run(feeds);
    const times = [];
    for (let i = 0; i < opts.bench; i++) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const sorted = [...times].sort((a, b) => a - b);
    const n = sorted.length;
    const median = n % 2 ? sorted[(n - 1) / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    const r = (v) => Math.round(v * 1000) / 1000;
    console.log(JSON.stringify({
      model: path.basename(opts.model),
      threads: opts.threads,
      iterations: n,
      median_ms: r(median),
      min_ms: r(sorted[0]),
      mean_ms: r(times.reduce((a, b) => a + b, 0) / n),
    }));
  }
  await session.release();
}

main().catch((e) => {
  process.stderr.write(`ort_reference.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
