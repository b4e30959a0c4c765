// Test helpers of @sqlenv/shared, for tests/ and bench/ (`@sqlenv/shared/testing`).
export { captureIo } from './capture-io.ts';
export { appErrorOf, appErrorCodeOf } from './app-errors.ts';
