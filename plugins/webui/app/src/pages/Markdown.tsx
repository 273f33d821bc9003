/** A rendered answer: sanitised Markdown, with a copy button on every code block. */
import { useEffect, useMemo, useRef } from 'preact/hooks';
import { renderMarkdown } from '../markdown';

export function Markdown({ text }: { text: string }) {
  const ref = useRef<HTMLDivElement>(null);
  const html = useMemo(() => renderMarkdown(text), [text]);
  useEffect(() => {
    const root = ref.current;
    if (!root) return;
    for (const pre of root.querySelectorAll('pre')) {
      if (pre.querySelector('button.copy-code')) continue;
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'copy-code small';
      b.textContent = 'Copy';
      b.setAttribute('aria-label', 'Copy this code');
      pre.prepend(b);
    }
  }, [html]);
  const onClick = (e: MouseEvent) => {
    const target = e.target as HTMLElement;
    if (!target.matches('button.copy-code')) return;
    const code = target.parentElement?.querySelector('code')?.textContent ?? '';
    void navigator.clipboard.writeText(code).then(
      () => {
        target.textContent = 'Copied';
        setTimeout(() => (target.textContent = 'Copy'), 1500);
      },
      () => undefined,
    );
  };
  return <div class="md" ref={ref} onClick={onClick} dangerouslySetInnerHTML={{ __html: html }} />;
}
