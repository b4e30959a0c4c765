export type { EpisodeContext, Policy, PolicyEpisode } from './policy.ts';
