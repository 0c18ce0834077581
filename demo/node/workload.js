// SPDX-License-Identifier: LGPL-2.1-or-later
// A Node workload for perf: hot functions, one that V8 deoptimizes and
// optimizes again, and code that comes and goes while the GC runs.
//
//   node workload.js [--seconds S | --iterations K [--rounds R]] [--churn N]
//                    [--load-after S2]
//
// Each phase runs for a share of S seconds (40%, 20%, 40%), or, with
// --iterations, a fixed amount of work (make bench): K, 2K and R times its
// step, R being K / (20 N) (at least 1) unless given, so that K / 20
// functions are made by default:
//   hot:    fib(), sumSquares() and area() in a loop (TurboFan code);
//   deopt:  area() called with objects of another shape, which throws its
//           optimized code away, then optimized again;
//   churn:  rounds of N functions churn_K made with new Function(), each
//           run hot enough to be compiled, then dropped with garbage around
//           them, so that V8 frees their code and puts later rounds' code
//           where it was (and, with --stress-compaction, moves it).
// Prints one line per phase, "phase NAME calls N", and one per churn round,
// "round START END FIRST LAST": from START to END (CLOCK_MONOTONIC ns, the
// clock of perf record -k 1) only churn_FIRST to churn_LAST-1 ran, which
// tells whether a sample's name is right.
// With --expose-gc, a full collection follows each churn round.
// --load-after S2: require('perfjit-node') after S2 seconds of the hot
// phase, as a program already running would (NODE_PATH must find it).
'use strict';

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}
const seconds = arg('--seconds', 3);
const iterations = arg('--iterations', 0);
const churn = arg('--churn', 200);
const rounds = arg('--rounds', Math.max(1, Math.floor(iterations / 20 / churn)));
const loadAfter = arg('--load-after', -1);

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function sumSquares(a) {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    s += a[i] * a[i];
  }
  return s;
}

function area(shape) {
  return shape.w * shape.h;
}

// Runs @body for @share of the time, or @times times with --iterations.
function until(share, times, body) {
  const end = Date.now() + seconds * 1000 * share;
  let calls = 0;
  while (iterations ? calls < times : Date.now() < end) {
    body(calls);
    calls++;
  }
  return calls;
}

const data = Array.from({length: 1000}, (_, i) => i);
let sink = 0;
const start = Date.now();
let loaded = loadAfter < 0;

const hot = until(0.4, iterations, () => {
  sink += fib(15) + sumSquares(data) + area({w: 3, h: 4});
  if (!loaded && Date.now() - start >= loadAfter * 1000) {
    require('perfjit-node');
    loaded = true;
    console.log('loaded perfjit-node');
  }
});
console.log(`phase hot calls ${hot}`);

const deopt = until(0.2, 2 * iterations, (i) => {
  const shape = i % 2 ? {h: 1, w: 2, d: 3} : {w: 3, h: 4};
  sink += area(shape) + fib(10);
});
console.log(`phase deopt calls ${deopt}`);

let made = 0;
const churned = until(0.4, rounds, () => {
  const fns = [];
  for (let j = 0; j < churn; j++) {
    const k = made + j;
    fns.push(new Function(`return function churn_${k}(x) {
      let s = 0;
      for (let i = 0; i < 20; i++) s += x * i + ${k};
      return s;
    }`)());
  }
  const t0 = process.hrtime.bigint();
  let garbage = [];
  for (let k = 0; k < 500; k++) {
    for (const f of fns) sink += f(k);
    garbage.push({k, s: 'g' + k});
  }
  garbage = null;
  const t1 = process.hrtime.bigint();
  console.log(`round ${t0} ${t1} ${made} ${made + churn}`);
  made += churn;
  // With --expose-gc: a full collection after each round (with
  // --stress-compaction, one that moves code).
  if (global.gc) global.gc();
});
console.log(`phase churn calls ${churned} functions ${made}`);
if (sink === 42) console.log(sink);
