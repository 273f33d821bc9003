/**
 * First page: what the key is and where to find it, the choice of where the browser keeps it,
 * and the CA to trust (download, SHA-256 fingerprint, how to install it).
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, request } from '../api';
import { saveKey, type KeyPlace } from '../auth';

/** The CA's fingerprint, from the public download's header. */
export function useCaFingerprint(): string | null {
  const [fp, setFp] = useState<string | null>(null);
  useEffect(() => {
    request('/system/ca-cert', { anonymous: true })
      .then((res) => setFp(res.headers.get('X-Certificate-Fingerprint-SHA256')))
      .catch(() => setFp(null));
  }, []);
  return fp;
}

export function CaPanel() {
  const fp = useCaFingerprint();
  return (
    <section class="card" aria-labelledby="ca-title">
      <h2 id="ca-title">Trust this appliance</h2>
      <p>
        The appliance signs its HTTPS certificate with its own certificate authority (CA). Install the CA once and the browser, the CLI and your scripts connect
        without warnings.
      </p>
      <p>
        <a class="button" href="/system/ca-cert" download="lia-root-ca.crt">
          Download the CA certificate
        </a>
      </p>
      <p>
        SHA-256 fingerprint:{' '}
        <code class="fingerprint" data-testid="ca-fingerprint">
          {fp ?? 'not available'}
        </code>
      </p>
      <p class="muted">Compare it with the fingerprint the appliance prints on its own console before you trust the file.</p>
      <details>
        <summary>How to install it</summary>
        <ul>
          <li>
            <strong>Firefox</strong>: Settings → Privacy &amp; Security → Certificates → View Certificates → Authorities → Import; tick "Trust this CA to
            identify websites".
          </li>
          <li>
            <strong>Chrome, Edge</strong> use the system store below (on Linux: Settings → Privacy and security → Security → Manage certificates → Authorities →
            Import).
          </li>
          <li>
            <strong>Linux</strong>: <code>sudo cp lia-root-ca.crt /usr/local/share/ca-certificates/ &amp;&amp; sudo update-ca-certificates</code>
          </li>
          <li>
            <strong>macOS</strong>: <code>sudo security add-trusted-cert -d -r trustRoot -k /Library/Keychains/System.keychain lia-root-ca.crt</code>
          </li>
          <li>
            <strong>Windows</strong> (administrator): <code>certutil -addstore Root lia-root-ca.crt</code>
          </li>
        </ul>
      </details>
    </section>
  );
}

export function SignIn({ notice, onSignedIn }: { notice: string | null; onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [place, setPlace] = useState<KeyPlace>('session');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) {
      setError('Enter the API key.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await request('/api/version', { key: k });
    } catch (err) {
      // A 403 means the key is valid but lacks models:read; it may still chat or manage.
      if (!(err instanceof ApiError) || err.status !== 403) {
        setError(err instanceof ApiError && err.status === 401 ? `That key was refused: ${err.message}.` : (err as Error).message);
        setBusy(false);
        return;
      }
    }
    saveKey(k, place);
    setBusy(false);
    onSignedIn();
  };

  return (
    <main class="signin" id="main">
      <h1>LIA web console</h1>
      {notice && (
        <div class="error" role="alert">
          {notice}
        </div>
      )}
      <form class="card" onSubmit={submit} aria-labelledby="signin-title">
        <h2 id="signin-title">Sign in</h2>
        <p>
          The console uses the appliance's public APIs with an API key, as any script would. The master key is printed by <code>lia key show</code> on the
          appliance (its device console, <code>lia console</code>, names the key file); a named key with fewer scopes works for the pages those scopes allow.
        </p>
        <label for="key">API key</label>
        <input
          id="key"
          name="key"
          type="password"
          autocomplete="current-password"
          spellcheck={false}
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          placeholder="lia_…"
        />
        <fieldset>
          <legend>Keep the key</legend>
          <label class="inline">
            <input type="radio" name="place" checked={place === 'session'} onChange={() => setPlace('session')} /> in this tab only (forgotten when it closes)
          </label>
          <label class="inline">
            <input type="radio" name="place" checked={place === 'local'} onChange={() => setPlace('local')} /> in this browser (until you sign out)
          </label>
        </fieldset>
        {error && (
          <div class="error" role="alert">
            {error}
          </div>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
      <CaPanel />
    </main>
  );
}
