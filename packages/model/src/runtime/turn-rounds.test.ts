import { describe, expect, it } from 'vitest';
import type { TurnResult } from './executor.ts';
import { TurnRounds, type RoundTurn } from './turn-rounds.ts';

/** The lockstep barrier as plain data: which turns make up each round, with results settled by hand (no engine, no timers). */
const request = (tag: number) => ({ promptIds: [tag], maxNewTokens: 1 });
const result = (tag: number): TurnResult => ({ tokens: [tag], logprobs: [0], sampleLogprobs: [0], finishReason: 'length', policyVersion: 0 });

function recorder(): { rounds: number[][]; settle: (round: number) => void; barrier: TurnRounds } {
  const rounds: number[][] = [];
  const settlers: Array<() => void> = [];
  const barrier = new TurnRounds((_round, turns: readonly RoundTurn[]) => {
    rounds.push(turns.map((t) => t.order));
    const resolvers: Array<(r: TurnResult) => void> = [];
    const promises = turns.map((t) => new Promise<TurnResult>((resolve) => resolvers.push(() => resolve(result(t.request.promptIds[0] as number)))));
    settlers.push(() => resolvers.forEach((r) => r(result(0))));
    return promises;
  });
  return { rounds, settle: (round) => settlers[round]?.(), barrier };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('TurnRounds: lockstep rounds over lanes', () => {
  it('releases a round only when every open lane has a turn, sorted by order key whatever the arrival order', async () => {
    const { rounds, settle, barrier } = recorder();
    const lanes = [barrier.open(), barrier.open(), barrier.open()];
    const results = [lanes[2]!.generate(request(5), 5), lanes[0]!.generate(request(9), 9)];
    expect(rounds).toEqual([]);
    results.push(lanes[1]!.generate(request(1), 1));
    expect(rounds).toEqual([[1, 5, 9]]);
    settle(0);
    await Promise.all(results);
    expect(barrier.rounds).toBe(1);
  });

  it('waits for a lane whose turn is still running, and for a lane between episodes; a closed lane is not waited for', async () => {
    const { rounds, settle, barrier } = recorder();
    const [a, b] = [barrier.open(), barrier.open()];
    const first = [a.generate(request(0), 0), b.generate(request(1), 1)];
    expect(rounds).toEqual([[0, 1]]);
    settle(0);
    await Promise.all(first);
    // a's episode ended; it starts episode 2 on the same lane later. b submits at once: no round yet.
    const bNext = b.generate(request(1), 1);
    await flush();
    expect(rounds).toHaveLength(1);
    const aNext = a.generate(request(2), 2);
    expect(rounds).toEqual([[0, 1], [1, 2]]);
    settle(1);
    await Promise.all([aNext, bNext]);
    // b has no more episodes: a's next turn runs alone.
    b.close();
    void a.generate(request(2), 2);
    expect(rounds.at(-1)).toEqual([2]);
  });

  it('refuses a second turn on a lane while one is held, and twin order keys in a round', async () => {
    const { barrier } = recorder();
    const [a, b] = [barrier.open(), barrier.open()];
    const held = a.generate(request(0), 0);
    await expect(a.generate(request(0), 0)).rejects.toThrow(/one turn at a time/);
    const twin = b.generate(request(0), 0);
    await expect(held).rejects.toThrow(/order key 0/);
    await expect(twin).rejects.toThrow(/order key 0/);
  });

  it('rejects a waiting turn when its lane closes, and turns on a closed lane', async () => {
    const { rounds, barrier } = recorder();
    const [a] = [barrier.open(), barrier.open()];
    const waiting = a!.generate(request(0), 0);
    a!.close();
    await expect(waiting).rejects.toThrow(/closed/);
    await expect(a!.generate(request(0), 0)).rejects.toThrow(/closed/);
    expect(rounds).toEqual([]);
  });
});
