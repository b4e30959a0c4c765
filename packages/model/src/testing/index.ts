// Test helpers of @sqlenv/model, for its own tests and for tests/, bench/ and the apps' tests (`@sqlenv/model/testing`).
export { TINY_BYTE_MODEL_CONFIG } from './tiny-model.ts';
