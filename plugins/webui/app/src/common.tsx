/** Pieces every page uses: loading data with its error states, the error panel, confirmation. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => Promise<void>;
}

/** Runs `load` now and on `reload()`; keeps the last data while reloading. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [loading, setLoading] = useState(true);
  const reload = useCallback(async () => {
    setLoading(true);
    try {
      setData(await load());
      setError(null);
    } catch (err) {
      setError(err instanceof ApiError ? err : new ApiError(500, String((err as Error).message ?? err)));
    } finally {
      setLoading(false);
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, loading, reload };
}

/**
 * Calls `reload` every `ms` while the tab is visible, and at once when it becomes visible again;
 * stops when the component goes (another page is shown).
 */
export function usePoll(reload: () => Promise<void>, ms: number): void {
  useEffect(() => {
    const tick = () => {
      if (document.visibilityState === 'visible') void reload();
    };
    const timer = setInterval(tick, ms);
    document.addEventListener('visibilitychange', tick);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', tick);
    };
  }, [reload, ms]);
}

/** What went wrong, as a sentence a user can act on. */
export function ErrorPanel({ error, what }: { error: unknown; what?: string }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : new ApiError(500, String((error as Error).message ?? error));
  let title = what ? `Could not load ${what}` : 'Something went wrong';
  let detail = e.message;
  if (e.unreachable) title = 'The appliance cannot be reached';
  else if (e.status === 403) {
    title = 'This key may not do that';
    detail = e.scope
      ? `This page needs an API key with the scope "${e.scope}". Sign in with a key that holds it (the master key holds every scope).`
      : e.message;
  } else if (e.status === 503) title = 'A service is not running';
  return (
    <div class="error" role="alert">
      <strong>{title}</strong>
      <p>{detail}</p>
    </div>
  );
}

/** A modal confirmation built on `<dialog>` (focus kept inside, Escape cancels). */
export function Confirm(props: {
  open: boolean;
  title: string;
  children?: ComponentChildren;
  confirmLabel: string;
  danger?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (props.open && !d.open) d.showModal();
    if (!props.open && d.open) d.close();
  }, [props.open]);
  return (
    <dialog
      ref={ref}
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        props.onCancel();
      }}
    >
      <h2 id="confirm-title">{props.title}</h2>
      <div>{props.children}</div>
      <div class="row end">
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
        <button type="button" class={props.danger ? 'danger' : 'primary'} onClick={props.onConfirm}>
          {props.confirmLabel}
        </button>
      </div>
    </dialog>
  );
}

/** A button that copies `text` and says so. */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="small"
      onClick={async () => {
        await navigator.clipboard.writeText(text).catch(() => undefined);
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      }}
    >
      {done ? 'Copied' : label}
    </button>
  );
}
