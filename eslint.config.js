// Lint rules for src/, test/, bench/ and scripts/: the recommended sets plus type-aware checks for promises, which a rate limiter must never leave floating.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'bench/.bench-tmp/**', 'node_modules/**', 'src/stores/redis/lua/*.generated.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    languageOptions: { parserOptions: { project: './tsconfig.json', tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  {
    // The gateway is a client of the library: it reaches it through the public entry points (src/index.ts, src/http/index.ts,
    // src/stores/*/index.ts) like any user, so the library's inside can change without breaking it. The one exception is plumbing
    // that carries no rate-limiting meaning: util/, the process-wide one-time warning registry, and describeValue for error messages.
    files: ['src/gateway/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '**/core/*',
                '!**/core/warnings.js',
                '!**/core/describe-value.js',
                '**/algorithms/*',
                '**/guards/*',
                '**/stores/*.js',
                '**/stores/*/*',
                '!**/stores/*/index.js',
                '**/waiting/*',
                '**/limiter/*',
                '**/telemetry/*',
                '**/http/*',
                '!**/http/index.js',
              ],
              message:
                'The gateway reaches the library through its public entry points: import from src/index.ts, src/http/index.ts or src/stores/*/index.ts (export it there if it is missing and is API).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        Buffer: 'readonly',
        fetch: 'readonly',
      },
    },
  },
);
