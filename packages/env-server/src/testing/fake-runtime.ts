import { AppError, ErrorCode } from '@sqlenv/shared';
import type { EpisodeState, ResetOptions, SqlAction, StepResult } from '@sqlenv/protocol';
import type { ServedEnvironment, ServedRuntime } from '../env-runtime.ts';

/**
 * A tiny stand-in for the SQL runtime, for tests of the transport layer only
 * (used while @sqlenv/sql-env is unavailable and for timing-controlled cases):
 * QUERY "SLEEP <ms>" waits, ANSWER "42" is correct.
 */
export function createFakeRuntime(): ServedRuntime & { closed: boolean } {
  const questions = [
    { question_id: 'shop_train_0', question_text: 'How many customers?', database_name: 'shop', difficulty: 'easy', split: 'train' },
    { question_id: 'shop_train_1', question_text: 'Oldest customer?', database_name: 'shop', difficulty: 'easy', split: 'train' },
  ];
  const runtime = {
    closed: false,
    dataset: { name: 'fake', databases: new Map([['shop', {}]]), questions },
    createEnvironment: (): ServedEnvironment => new FakeEnvironment(),
    close: async () => {
      runtime.closed = true;
    },
  };
  return runtime;
}

class FakeEnvironment implements ServedEnvironment {
  private episode: { id: string; question: string; steps: number; done: boolean; total: number; history: string[]; qid: string } | undefined;
  private closed = false;

  reset(options: ResetOptions = {}): Promise<StepResult> {
    if (this.closed) throw new AppError(ErrorCode.EPISODE_STATE, 'environment is closed');
    const qid = options.question_id ?? 'shop_train_0';
    this.episode = { id: options.episode_id ?? `ep-${Math.random().toString(36).slice(2)}`, question: `question ${qid}`, steps: 0, done: false, total: 0, history: [], qid };
    return Promise.resolve({ observation: this.observation('', ''), reward: null, done: false });
  }

  async step(action: SqlAction): Promise<StepResult> {
    const e = this.episode;
    if (e === undefined) throw new AppError(ErrorCode.EPISODE_STATE, 'no episode: call reset() first');
    if (e.done) throw new AppError(ErrorCode.EPISODE_STATE, 'episode is done');
    const sleep = /^SLEEP (\d+)$/.exec(action.argument);
    if (action.action_type === 'QUERY' && sleep?.[1] !== undefined) await new Promise((r) => setTimeout(r, Number(sleep[1])));
    e.steps += 1;
    const correct = action.action_type === 'ANSWER' && action.argument.trim() === '42';
    e.done = action.action_type === 'ANSWER' || e.steps >= 15;
    const reward = correct ? 1.0 : 0.01;
    e.total += reward;
    e.history.push(`${action.action_type} ${action.argument} -> ok`);
    return { observation: this.observation(`result of ${action.action_type} ${action.argument}`, ''), reward, done: e.done };
  }

  state(): EpisodeState {
    const e = this.episode;
    return {
      episode_id: e?.id ?? null,
      step_count: e?.steps ?? 0,
      question_id: e?.qid ?? null,
      db_id: e === undefined ? null : 'shop',
      budget_remaining: 15 - (e?.steps ?? 0),
      done: e?.done ?? false,
      total_reward: e?.total ?? 0,
    };
  }

  close(): void {
    this.closed = true;
  }

  private observation(result: string, error: string): StepResult['observation'] {
    const e = this.episode;
    return {
      question: e?.question ?? '',
      schema_info: 'Tables:\n- customers',
      result,
      error,
      step_count: e?.steps ?? 0,
      budget_remaining: 15 - (e?.steps ?? 0),
      action_history: [...(e?.history ?? [])],
    };
  }
}
