/**
 * Ollama's Go prompt templates, the simple subset that generate-style templates use, rendered to
 * the prompt text: what a request's `template` (or a model's template layer) makes of a prompt
 * on an engine that takes raw text. Pure string work, shared by every local engine.
 *
 * @module
 */

const ACTION = /\{\{(-?)\s*(.*?)\s*(-?)\}\}/gs;

/**
 * Renders the simple subset of Ollama's Go templates that generate-style templates use:
 * `{{ .System }}`, `{{ .Prompt }}`, `{{ .Response }}` (output stops there, as Ollama does when it
 * renders a prompt), `{{ if .X }}`, `{{ else }}`, `{{ end }}` and the `{{-`/`-}}` trim markers.
 * Returns null for anything else (ranges over `.Messages`, functions), so the caller can fall
 * back to the model's own chat template.
 */
export function renderGoTemplate(template: string, vars: { System?: string; Prompt?: string }): string | null {
  type Frame = { emitting: boolean; taken: boolean };
  const stack: Frame[] = [];
  let out = '';
  let last = 0;
  let trimNext = false;
  const emitting = (): boolean => stack.every((f) => f.emitting);
  for (const m of template.matchAll(ACTION)) {
    let text = template.slice(last, m.index);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (m[1] === '-') text = text.replace(/\s+$/, '');
    if (emitting()) out += text;
    last = m.index + m[0].length;
    trimNext = m[3] === '-';
    const action = m[2] ?? '';
    const field = /^\.(System|Prompt|Response)$/.exec(action);
    const cond = /^if\s+\.(System|Prompt)$/.exec(action);
    if (field) {
      if (field[1] === 'Response') return out;
      if (emitting()) out += vars[field[1] as 'System' | 'Prompt'] ?? '';
    } else if (cond) {
      const value = Boolean(vars[cond[1] as 'System' | 'Prompt']);
      stack.push({ emitting: value, taken: value });
    } else if (action === 'else') {
      const top = stack.at(-1);
      if (!top) return null;
      top.emitting = !top.taken;
    } else if (action === 'end') {
      if (!stack.pop()) return null;
    } else if (action.startsWith('/*')) {
      // a comment
    } else {
      return null;
    }
  }
  if (stack.length > 0) return null;
  let tail = template.slice(last);
  if (trimNext) tail = tail.replace(/^\s+/, '');
  return out + tail;
}
