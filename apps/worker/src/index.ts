export { workerCommand } from '@sqlenv/rollout';
