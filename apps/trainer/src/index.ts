export { trainerCommand } from '@sqlenv/cli';
