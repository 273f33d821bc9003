// Lint for LIA: typescript-eslint's recommended rules with type information, plus the boundaries the
// architecture rests on (docs/architecture.md): a plugin reaches core only through `lia/plugin`
// (and its other public entries), never another plugin's files; core never imports a plugin.
// Formatting is Prettier's (.prettierrc.json); `npm run lint` checks both with zero warnings.
import path from 'node:path';
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

const root = import.meta.dirname;

/** The top folder of a file inside the project: `core`, or `plugins/<name>`, else null. */
function area(file) {
  const rel = path.relative(root, file).split(path.sep);
  if (rel[0] === 'core') return 'core';
  if (rel[0] === 'plugins' && rel[1]) return `plugins/${rel[1]}`;
  return null;
}

/** Flags relative imports that cross the boundaries above. */
const boundaries = {
  meta: { type: 'problem', messages: { crossed: '{{from}} may not import {{to}}: {{why}}' }, schema: [] },
  create(context) {
    const from = area(context.filename);
    if (from === null) return {};
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const to = area(path.resolve(path.dirname(context.filename), spec));
      if (to === null || to === from) return;
      const why =
        from === 'core'
          ? 'core never depends on a plugin'
          : to === 'core'
            ? "plugins reach core only through 'lia/plugin'"
            : "a plugin uses another only through the contracts in 'lia/plugin'";
      context.report({ node: node.source, messageId: 'crossed', data: { from, to, why } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'bench/.cache/**',
      '.cache/**',
      'build/**',
      'plugins/webui/app/**',
      '**/*.d.ts',
      'test/fixtures/**/*.{js,mjs}',
      'bench/.scratch/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: root } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { lia: { rules: { boundaries } } },
    rules: {
      'lia/boundaries': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // `CustomHooks` is empty on purpose: plugins add their hooks to it by declaration merging.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'always' }],
      // `'known' | (string & {})` keeps editor completion for the known names of an open set
      // (hook names, key-store results); the rule reads it as redundant.
      '@typescript-eslint/no-redundant-type-constituents': 'off',
      // A `let` read by a callback that may run before the variable is assigned (a process's exit
      // handler passed to the call that starts it) stays `let`: `const` would throw there (TDZ).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // An abort passes on `signal.reason`, and a failure passes on what was caught, unchanged
      // (as `throw` does, which only-throw-error allows): both are typed any/unknown. Rejecting
      // with anything else that is not an Error is still an error.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
    },
  },
  {
    // Async functions that implement an async contract without awaiting anything are fine.
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    // Tests and benchmarks: tap's `t.test(...)` is called without await by design (tap queues
    // subtests), fixtures and JSON bodies are read loosely typed, and `t.teardown(app.close)`
    // passes bound-by-design methods.
    files: ['test/**', 'bench/**', '**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/unbound-method': 'off',
    },
  },
  {
    // Control characters matched on purpose: tests match terminal output (ANSI escapes), and the
    // registry client strips them from a registry's error text before quoting it to the user.
    files: ['test/**', 'plugins/model-store/registry/client.ts'],
    rules: { 'no-control-regex': 'off' },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: globals.node },
  },
);
