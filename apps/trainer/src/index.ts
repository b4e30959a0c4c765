export { trainerCommand } from '@sqlenv/rollout';
