import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', '.cache/**', 'bench/results/**', 'test-artifacts/**', '.tmp/**', 'packages/env-server/src/web/**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly',
        setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly',
        setImmediate: 'readonly', queueMicrotask: 'readonly', performance: 'readonly', structuredClone: 'readonly',
        TextEncoder: 'readonly', TextDecoder: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'Use an as-const object and a derived union instead of enum.' }],
    },
  },
  {
    files: ['packages/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-console': 'error',
    },
  },
  {
    // Spreading an array into call arguments throws "Maximum call stack size exceeded" past about
    // 100,000 elements (a long run's metrics did); use minOf/maxOf/appendAll from @sqlenv/shared.
    files: ['packages/**/*.ts', 'apps/**/*.ts'],
    ignores: ['**/*.test.ts', '**/testing/**', '**/testing/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Use an as-const object and a derived union instead of enum.' },
        { selector: "CallExpression[callee.object.name='Math'][callee.property.name=/^(min|max)$/] > SpreadElement", message: 'Math.min/Math.max of a spread array overflows the stack on long arrays: use minOf/maxOf from @sqlenv/shared.' },
        { selector: "CallExpression[callee.object.name='String'][callee.property.name=/^fromC(har|odePoint)/] > SpreadElement", message: 'String.fromCharCode(...bytes) overflows the stack on long inputs: decode with TextDecoder or in chunks.' },
      ],
    },
  },
);
