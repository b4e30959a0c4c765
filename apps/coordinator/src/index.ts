export { coordinatorCommand } from '@sqlenv/cli';
