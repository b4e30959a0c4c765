export { coordinatorCommand } from '@sqlenv/rollout';
