// ONNX Runtime's side of `make bench` (tools/bench/run): runs an ONNX model
// that bench_torch.py exported (the MLP with softmax, or the chain of adds)
// through onnxruntime-node's CPU execution provider with intra_op_num_threads
// N and one batch bound once, times each run, and prints one JSON line with
// the per-run median in microseconds.
//
//   node bench_ort.js MODEL.onnx infer|chain [--threads N] [--batch B] [--steps S] [--warmup W] [--ops N]
//
// onnxruntime-node is looked up next to this file (tools/bench/node_modules:
// `ONNXRUNTIME_NODE_INSTALL=skip npm install onnxruntime-node` there).
'use strict';
const path = require('path');

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? Number(process.argv[i + 1]) : dflt;
}

async function main() {
  const model = process.argv[2], mode = process.argv[3];
  const threads = arg('--threads', 1), batch = arg('--batch', 256), steps = arg('--steps', 50);
  const warmup = arg('--warmup', 5), ops = arg('--ops', 1000);
  const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const dims = mode === 'chain' ? [16] : [batch, 784];
  const n = dims.reduce((a, b) => a * b, 1), data = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) { s = (s * 1103515245 + 12345) % 2147483648; data[i] = s / 2147483648; }
  const feeds = {x: new ort.Tensor('float32', data, dims)};
  let out;
  for (let i = 0; i < warmup; i++) out = await session.run(feeds);
  const t = [];
  for (let i = 0; i < steps; i++) {
    const t0 = process.hrtime.bigint();
    out = await session.run(feeds);
    t.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  t.sort((a, b) => a - b);
  const med = t[Math.floor(steps / 2)];
  const first = out[session.outputNames[0]].data[0];
  const r = {bench: 'ort', mode, threads, steps, median_us: med, p10_us: t[Math.floor(steps / 10)],
             p90_us: t[Math.floor(steps * 9 / 10)], value: first,
             ort: require(path.join(__dirname, 'node_modules', 'onnxruntime-node', 'package.json')).version};
  if (mode === 'chain') r.us_per_op = med / ops;
  console.log(JSON.stringify(r));
}

main().catch((e) => { console.error('bench_ort: ' + e.message); process.exit(1); });
