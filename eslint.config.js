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
    // The gateway is a client of the library: it uses the public RateLimiter and store surfaces, never their private parts, so those can change without breaking it.
    files: ['src/gateway/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/limiter/internals', '**/limiter/internals.js'],
              message: "The limiter's internals are private to the library: use RateLimiter's public methods.",
            },
            {
              group: ['**/stores/cluster/protocol', '**/stores/cluster/protocol.js'],
              message: "The cluster store's wire protocol is private to it: import what it exports from stores/cluster/index.js.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', Buffer: 'readonly', fetch: 'readonly' } },
  },
);
