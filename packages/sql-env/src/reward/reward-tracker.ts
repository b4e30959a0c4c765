import type { Cell, RewardBreakdown } from '@sqlenv/protocol';
import { AppError, ErrorCode } from '@sqlenv/shared';
import { actionKey, type DenseActionType } from './action-key.ts';
import { cachedGoldProfile, type GoldProfile } from './gold-profile.ts';
import { scorePotential, type PotentialScore } from './potential.ts';
import type { RewardConfig } from './reward-config.ts';

/** One executed (or failed) non-ANSWER action, as the environment saw it. */
export interface RewardStep {
  actionType: DenseActionType;
  argument: string;
  /** Executed without error (a rejected / failing / timed-out query is `false`). */
  ok: boolean;
  /** QUERY only: the full result rows (not the 20-row display cut). */
  rows?: readonly (readonly Cell[])[] | undefined;
}

/**
 * The reward of one episode, step by step (docs/architecture.md, "The environment",
 * "Reward"; formulas in reward/README.md). Not thread-safe and not reusable:
 * one tracker per episode.
 */
export interface RewardTracker {
  /** Dense reward (L1 + L2, clipped) of a DESCRIBE / SAMPLE / QUERY step. */
  onStep(step: RewardStep): RewardBreakdown;
  /** The ANSWER step: terminal reward only (no L1 / L2), ends the episode. */
  onAnswer(correct: boolean, similarity?: number): RewardBreakdown;
  /**
   * A PARSE_ERROR step (the agent's output held no valid tool call): −formatPenalty as the
   * operational term, unclipped; no action key, no progress.
   */
  onFormatError(): RewardBreakdown;
  /**
   * The budget ran out: a terminal-only breakdown (terminalWrong), ends the
   * episode. When the last step itself earned dense reward, add the two with
   * combineBreakdowns().
   */
  onBudgetExhausted(): RewardBreakdown;
  /** Φ of a result against this episode's gold (binned), without changing any state. */
  potential(rows: readonly (readonly Cell[])[]): number;
  /** All parts of Φ, for analysis and tests. */
  scorePotential(rows: readonly (readonly Cell[])[]): PotentialScore;
  /** Φ after the latest successful QUERY (0 before any). */
  readonly currentPotential: number;
  /** Sum of every returned breakdown's total. */
  readonly totalReward: number;
  readonly done: boolean;
}

// Sums like 0.02 + 0.01 − 0.02 leave 1e-18 dust; rounding keeps logs and equality checks clean.
function round(value: number): number {
  return Math.round(value * 1e12) / 1e12;
}

function denseBreakdown(operational: number, progress: number, potential: number, config: RewardConfig): RewardBreakdown {
  const denseUnclipped = operational + progress;
  const dense = round(Math.min(config.stepClipMax, Math.max(config.stepClipMin, denseUnclipped)));
  return {
    operational: round(operational),
    progress: round(progress),
    potential,
    terminal: 0,
    dense_unclipped: round(denseUnclipped),
    dense,
    total: dense,
  };
}

/** The breakdown of a terminal-only step: no dense part, so no clipping either. */
function terminalBreakdown(potential: number, terminal: number): RewardBreakdown {
  return { operational: 0, progress: 0, potential, terminal, dense_unclipped: 0, dense: 0, total: terminal };
}

/**
 * Adds a terminal-only breakdown (onBudgetExhausted) to the dense breakdown of
 * the same step, so that a step reports one reward.
 */
export function combineBreakdowns(step: RewardBreakdown, terminal: RewardBreakdown): RewardBreakdown {
  return {
    operational: round(step.operational + terminal.operational),
    progress: round(step.progress + terminal.progress),
    potential: terminal.potential,
    terminal: step.terminal + terminal.terminal,
    dense_unclipped: round(step.dense_unclipped + terminal.dense_unclipped),
    dense: round(step.dense + terminal.dense),
    total: round(step.total + terminal.total),
  };
}

function isProfile(gold: GoldProfile | { rows: readonly (readonly Cell[])[] }): gold is GoldProfile {
  return 'kind' in gold && gold.kind === 'gold-profile';
}

/**
 * Starts an episode's reward. `gold` is the question's gold rows (profiled
 * once per rows array and remembered, see cachedGoldProfile) or a GoldProfile
 * the caller computed with profileGold().
 */
export function createRewardTracker(config: RewardConfig, gold: GoldProfile | { rows: readonly (readonly Cell[])[] }): RewardTracker {
  const profile = isProfile(gold) ? gold : cachedGoldProfile(gold.rows);
  const seen = new Set<string>();
  let phi = 0;
  let total = 0;
  let done = false;

  const finish = (result: RewardBreakdown): RewardBreakdown => {
    total = round(total + result.total);
    return result;
  };
  const ensureRunning = (what: string): void => {
    if (done) throw new AppError(ErrorCode.EPISODE_STATE, `reward: ${what} after the episode ended`);
  };

  return {
    onStep(step) {
      ensureRunning(step.actionType);
      const key = actionKey(step.actionType, step.argument);
      const repeated = seen.has(key);
      seen.add(key);
      let operational = -config.stepCost;
      if (step.ok) operational += config.executedBonus;
      if (step.ok && !repeated) operational += config.newInfoBonus;
      if (repeated) operational -= config.repeatPenalty;

      // L2 (Ng, Harada & Russell 1999, "Policy invariance under reward
      // transformations"): F = γΦ(s') − Φ(s) with γ = 1. Φ is the potential
      // of the latest successful query's result; failed queries and other
      // actions leave it unchanged.
      let progress = 0;
      if (step.actionType === 'QUERY' && step.ok && step.rows !== undefined) {
        const next = scorePotential(profile, step.rows, config).binned;
        progress = config.progressScale * (next - phi);
        phi = next;
      }
      return finish(denseBreakdown(operational, progress, phi, config));
    },
    onAnswer(correct, similarity = 0) {
      ensureRunning('ANSWER');
      done = true;
      const partial = config.answerSimilarityScale * Math.min(1, Math.max(0, similarity));
      return finish(terminalBreakdown(phi, correct ? config.terminalCorrect : round(config.terminalWrong + partial)));
    },
    onFormatError() {
      ensureRunning('PARSE_ERROR');
      const penalty = round(-config.formatPenalty);
      return finish({ operational: penalty, progress: 0, potential: phi, terminal: 0, dense_unclipped: penalty, dense: penalty, total: penalty });
    },
    onBudgetExhausted() {
      ensureRunning('budget exhaustion');
      done = true;
      return finish(terminalBreakdown(phi, config.terminalWrong));
    },
    potential: (rows) => scorePotential(profile, rows, config).binned,
    scorePotential: (rows) => scorePotential(profile, rows, config),
    get currentPotential() {
      return phi;
    },
    get totalReward() {
      return total;
    },
    get done() {
      return done;
    },
  };
}
