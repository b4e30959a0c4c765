// After `npm ci`: the install did what package.json's allowScripts says, and nothing more.
// - onnxruntime-node's postinstall did not run (it would fetch the CUDA provider, hundreds of MB,
//   from NuGet): its CPU build loads and no CUDA provider library is on disk;
// - better-sqlite3, esbuild (and msgpackr-extract) ran theirs: their native parts work.
// Exit 1 with one line per problem.
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'package.json'));
const problems = [];
const check = (what, fn) => {
  try {
    const detail = fn();
    console.log(`ok   ${what}${detail ? `: ${detail}` : ''}`);
  } catch (error) {
    problems.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
};

check('onnxruntime-node postinstall skipped (no CUDA provider downloaded)', () => {
  const bin = path.join(path.dirname(require.resolve('onnxruntime-node/package.json')), 'bin', 'napi-v6', `${process.platform}`, process.arch);
  const cuda = existsSync(bin) ? readdirSync(bin).filter((f) => /providers_(cuda|tensorrt|shared)/.test(f)) : [];
  if (cuda.length > 0) throw new Error(`found ${cuda.join(', ')} in ${bin}`);
  const ort = require('onnxruntime-node');
  if (typeof ort.InferenceSession?.create !== 'function') throw new Error('the CPU binding does not load');
  return 'CPU build loads';
});
check('better-sqlite3 native addon', () => {
  const Database = require('better-sqlite3');
  const row = new Database(':memory:').prepare('SELECT 6 * 7 AS x').get();
  if (row.x !== 42) throw new Error(`SELECT 6 * 7 gave ${JSON.stringify(row)}`);
  return 'SELECT 6 * 7 = 42';
});
check('esbuild binary', () => {
  const esbuild = require(require.resolve('esbuild', { paths: [path.dirname(require.resolve('tsx/package.json'))] }));
  const code = esbuild.transformSync('const x: number = 1', { loader: 'ts' }).code.trim();
  if (code !== 'const x = 1;') throw new Error(`transform gave ${code}`);
  return `version ${esbuild.version}`;
});

if (problems.length > 0) {
  for (const p of problems) console.error(`FAIL ${p}`);
  process.exit(1);
}
