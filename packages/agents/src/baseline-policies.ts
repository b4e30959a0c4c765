import { AppError, ErrorCode } from '@sqlenv/shared';
import { OraclePolicy, type QuestionLookup } from './oracle-policy.ts';
import type { Policy } from './policy.ts';
import { RandomPolicy } from './random-policy.ts';

/** The policies that need no model, by name (the CLI's `--policy`, the rollout's run spec). */
export const BASELINE_POLICY_NAMES = ['oracle', 'random'] as const;
export type BaselinePolicyName = (typeof BASELINE_POLICY_NAMES)[number];

/** A baseline policy by name; an unknown name is a VALIDATION error listing the known ones. */
export function createBaselinePolicy(name: string, questions: QuestionLookup, seed: number): Policy {
  switch (name) {
    case 'oracle':
      return new OraclePolicy(questions);
    case 'random':
      return new RandomPolicy({ seed });
    default:
      throw new AppError(ErrorCode.VALIDATION, `unknown policy '${name}' (known: ${BASELINE_POLICY_NAMES.join(', ')})`);
  }
}
