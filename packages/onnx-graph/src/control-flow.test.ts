import { describe, expect, it } from 'vitest';
import { Graph } from './graph.ts';
import { runOnce } from './testing/run-once.ts';
import { tensor, toNumbers } from './tensor-data.ts';

describe('Loop', () => {
  it('runs a loop with loop-carried state, a growing tensor and scan outputs', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [1, 3]);
    const steps = g.input('steps', 'int64', []);
    const { carried, scans } = g.loop({
      maxTrips: steps,
      carried: [x, { init: g.full([1, 0], 0, 'float32'), shape: [1, 'past'] }],
      body: (b, { iter, carried: [acc, history] }) => {
        const next = b.add(acc!, b.cast(iter, 'float32')); // (1, 3): acc + i
        const grown = b.concat([history!, b.reduceSum(next, [1], { keepDims: true })], 1); // (1, past+1)
        return { carried: [next, grown], scans: [b.mul(next, 2)] };
      },
    });
    g.output('final', carried[0]!);
    g.output('history', carried[1]!);
    g.output('scan', scans[0]!);
    const out = await runOnce(g, { x: tensor('float32', [1, 3], [1, 2, 3]), steps: tensor('int64', [], [4]) });
    // acc after i=0..3: x + 0, +1, +2, +3 -> x + 6
    expect(toNumbers(out.final!)).toEqual([7, 8, 9]);
    // row sums after each step: 6, 9, 15, 24
    expect(toNumbers(out.history!)).toEqual([6, 9, 15, 24]);
    expect(out.scan!.dims).toEqual([4, 1, 3]);
    expect(toNumbers(out.scan!).slice(0, 3)).toEqual([2, 4, 6]);
  });

  it('stops early when the body returns a false condition', async () => {
    const g = new Graph();
    const limit = g.input('limit', 'int64', []);
    const { carried } = g.loop({
      maxTrips: 100,
      cond: g.less(g.scalar(0, 'int64'), limit),
      carried: [g.scalar(0, 'int64')],
      body: (b, { carried: [count] }) => {
        const next = b.add(count!, 1);
        return { cond: b.less(next, limit), carried: [next] };
      },
    });
    g.output('count', carried[0]!);
    const out = await runOnce(g, { limit: tensor('int64', [], [7]) });
    expect(toNumbers(out.count!)).toEqual([7]);
  });
});

describe('If', () => {
  it('takes the branch the condition selects', async () => {
    const g = new Graph();
    const x = g.input('x', 'float32', [2]);
    const flag = g.input('flag', 'bool', []);
    const [y] = g.ifElse(flag, (b) => [b.mul(x, 10)], (b) => [b.neg(x)]);
    g.output('y', y!);
    const yes = await runOnce(g, { x: tensor('float32', [2], [1, 2]), flag: tensor('bool', [], [true]) });
    const no = await runOnce(g, { x: tensor('float32', [2], [1, 2]), flag: tensor('bool', [], [false]) });
    expect(toNumbers(yes.y!)).toEqual([10, 20]);
    expect(toNumbers(no.y!)).toEqual([-1, -2]);
  });
});
