/** The console's entry: theme, sign-in gate, navigation by URL hash. */
import { render, type ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { onUnauthorized } from './api';
import { forgetKey, getKey } from './auth';
import { CaPanel, SignIn } from './pages/SignIn';
import { applyTheme, currentTheme, type Theme } from './theme';
import './styles.css';

applyTheme(currentTheme());

const PAGES = [
  { path: 'chat', label: 'Chat' },
  { path: 'models', label: 'Models' },
  { path: 'system', label: 'System' },
  { path: 'keys', label: 'Keys' },
  { path: 'trust', label: 'Certificate' },
] as const;

/**
 * Pages load on first visit, each as its own chunk: sign-in needs neither the Markdown renderer
 * nor the chart library, and the chat page does not wait for the system page's code.
 */
const LOADERS: Record<string, () => Promise<ComponentType>> = {
  chat: () => import('./pages/Chat').then((m) => m.Chat),
  models: () => import('./pages/Models').then((m) => m.Models),
  system: () => import('./pages/System').then((m) => m.System),
  keys: () => import('./pages/Keys').then((m) => m.Keys),
};

function Lazy({ name }: { name: string }) {
  const [Page, setPage] = useState<{ c: ComponentType } | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let live = true;
    setPage(null);
    (LOADERS[name] ?? LOADERS.chat!)().then(
      (c) => live && setPage({ c }),
      () => live && setFailed(true),
    );
    return () => {
      live = false;
    };
  }, [name]);
  if (failed)
    return (
      <div class="error" role="alert">
        This page could not be loaded from the appliance. Reload to try again.
      </div>
    );
  return Page ? (
    <Page.c />
  ) : (
    <p class="muted" role="status">
      Loading…
    </p>
  );
}

function useHash(): string {
  const read = () => location.hash.replace(/^#\/?/, '') || 'chat';
  const [hash, setHash] = useState(read);
  useEffect(() => {
    const on = () => setHash(read());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function ThemeToggle() {
  const [theme, setTheme] = useState<Theme>(currentTheme());
  const next: Record<Theme, Theme> = { system: 'light', light: 'dark', dark: 'system' };
  return (
    <button
      type="button"
      class="small"
      aria-label={`Theme: ${theme}. Switch to ${next[theme]}`}
      onClick={() => {
        applyTheme(next[theme]);
        setTheme(next[theme]);
      }}
    >
      Theme: {theme}
    </button>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(getKey() !== null);
  const [notice, setNotice] = useState<string | null>(null);
  const page = useHash();
  useEffect(
    () =>
      onUnauthorized((reason) => {
        forgetKey();
        setNotice(`You were signed out: the appliance refused the key (${reason}). It may have been rotated or revoked; sign in with the current one.`);
        setSignedIn(false);
      }),
    [],
  );
  useEffect(() => {
    document.title = `${PAGES.find((p) => p.path === page)?.label ?? 'Chat'} · LIA`;
  }, [page]);

  if (!signedIn)
    return (
      <>
        <header class="top">
          <span class="brand">LIA</span>
          <ThemeToggle />
        </header>
        <SignIn
          notice={notice}
          onSignedIn={() => {
            setNotice(null);
            setSignedIn(true);
          }}
        />
      </>
    );

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">LIA</span>
        <nav aria-label="Pages">
          {PAGES.map((p) => (
            <a key={p.path} href={`#/${p.path}`} aria-current={page === p.path ? 'page' : undefined}>
              {p.label}
            </a>
          ))}
        </nav>
        <span class="row">
          <ThemeToggle />
          <button
            type="button"
            class="small"
            onClick={() => {
              forgetKey();
              setNotice('Signed out.');
              setSignedIn(false);
            }}
          >
            Sign out
          </button>
        </span>
      </header>
      {page === 'trust' ? (
        <main id="main" class="page">
          <h1>Certificate</h1>
          <CaPanel />
        </main>
      ) : page in LOADERS && page !== 'chat' ? (
        <Lazy name={page} />
      ) : (
        <main id="main" class="page chat-page">
          <h1 class="sr-only">Chat</h1>
          <Lazy name="chat" />
        </main>
      )}
    </>
  );
}

render(<App />, document.getElementById('app')!);
