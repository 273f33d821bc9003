// Lint for LIA: typescript-eslint's recommended rules with type information, plus the boundaries the
// architecture rests on (docs/architecture.md): a plugin reaches core only through `lia/plugin`
// (and its other public entries), never another plugin's files; core never imports a plugin.
// Formatting is Prettier's (.prettierrc.json); `npm run lint` checks both with zero warnings.
import path from 'node:path';
import js from '@eslint/js';
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
        from === 'core' ? 'core never depends on a plugin' : to === 'core' ? "plugins reach core only through 'lia/plugin'" : "a plugin uses another only through the contracts in 'lia/plugin'";
      context.report({ node: node.source, messageId: 'crossed', data: { from, to, why } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/.cache/**', '.cache/**', 'build/**', 'plugins/webui/app/**', '**/*.d.ts', 'test/fixtures/**/*.{js,mjs}'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: root } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { lia: { rules: { boundaries } } },
    rules: {
      'lia/boundaries': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  { files: ['**/*.{js,mjs,cjs}'], ...tseslint.configs.disableTypeChecked },
);
