/**
 * Named API keys (`/system/api-keys`, scope `keys:admin`): list, create with scopes, model
 * allow-list, expiry and limits, rotate and revoke. A new or rotated secret is shown once. On an
 * appliance without named keys (the route answers 404) the page says so.
 */
import { useState } from 'preact/hooks';
import { json, request } from '../api';
import { Confirm, CopyButton, ErrorPanel, useLoad } from '../common';

interface Key {
  name: string;
  scopes: string[];
  models: string[] | null;
  expires_at: string | null;
  limits: { requests_per_minute?: number; tokens_per_minute?: number; concurrent_streams?: number } | null;
  created_at?: string;
  last_used_at: string | null;
  hint?: string;
  usage?: { requests: number; prompt_tokens: number; completion_tokens: number };
}

const SCOPES = ['inference', 'models:read', 'models:write', 'system:read', 'system:admin', 'keys:admin'];

function list(v: string): string[] {
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function CreateKey({ onCreated }: { onCreated: (secret: string) => void }) {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(['inference', 'models:read']);
  const [models, setModels] = useState('');
  const [expires, setExpires] = useState('');
  const [rpm, setRpm] = useState('');
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const body: Record<string, unknown> = { name: name.trim(), scopes };
      if (list(models).length) body.models = list(models);
      if (expires) body.expires_at = new Date(expires).toISOString();
      if (rpm) body.limits = { requests_per_minute: Number(rpm) };
      const r = await json<{ key: string }>('/system/api-keys', { body });
      setName('');
      onCreated(r.key);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form class="card" onSubmit={submit} aria-labelledby="newkey-title">
      <h2 id="newkey-title">New key</h2>
      <label for="key-name">Name</label>
      <input id="key-name" value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="ci-bot" spellcheck={false} />
      <fieldset>
        <legend>Scopes</legend>
        {SCOPES.map((s) => (
          <label key={s} class="inline">
            <input
              type="checkbox"
              checked={scopes.includes(s)}
              onChange={(e) => setScopes(e.currentTarget.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
            />{' '}
            {s}
          </label>
        ))}
      </fieldset>
      <label for="key-models">Models allowed (comma-separated, * wildcards; empty for all)</label>
      <input id="key-models" value={models} onInput={(e) => setModels(e.currentTarget.value)} spellcheck={false} />
      <div class="grid2">
        <div>
          <label for="key-expires">Expires (empty: never)</label>
          <input id="key-expires" type="date" value={expires} onInput={(e) => setExpires(e.currentTarget.value)} />
        </div>
        <div>
          <label for="key-rpm">Requests per minute (empty: no limit)</label>
          <input id="key-rpm" inputMode="numeric" value={rpm} onInput={(e) => setRpm(e.currentTarget.value)} />
        </div>
      </div>
      <button type="submit" class="primary" disabled={!name.trim() || scopes.length === 0}>
        Create
      </button>
      <ErrorPanel error={error} />
    </form>
  );
}

export function Keys() {
  const keys = useLoad(() => json<{ keys: Key[] }>('/system/api-keys'));
  const [secret, setSecret] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const act = async (fn: () => Promise<void>) => {
    setError(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    }
    await keys.reload();
  };
  if (keys.error?.status === 404) {
    return (
      <main id="main" class="page">
        <h1>API keys</h1>
        <p class="notice">
          Named API keys are not available on this appliance: it has the master key only (rotate it on the <a href="#/system">System</a> page).
        </p>
      </main>
    );
  }
  return (
    <main id="main" class="page">
      <h1>API keys</h1>
      <ErrorPanel error={keys.error} what="the keys" />
      <ErrorPanel error={error} />
      {secret && (
        <div class="newkey card" role="status">
          <p>
            <strong>The new key, shown once:</strong>
          </p>
          <code data-testid="new-named-key">{secret}</code> <CopyButton text={secret} />
          <p class="muted">Store it now; the appliance keeps only its hash.</p>
        </div>
      )}
      {keys.data && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">API keys</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Scopes</th>
                <th scope="col">Models</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">Requests</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.data.keys.map((k) => (
                <tr key={k.name}>
                  <th scope="row">
                    {k.name}
                    {k.hint ? <div class="muted">{k.hint}</div> : null}
                  </th>
                  <td>{k.scopes.join(', ')}</td>
                  <td>{k.models?.join(', ') ?? 'all'}</td>
                  <td>{k.expires_at ? new Date(k.expires_at).toLocaleDateString() : 'never'}</td>
                  <td>{k.last_used_at ? new Date(k.last_used_at).toLocaleString() : 'never'}</td>
                  <td>{k.usage?.requests ?? '–'}</td>
                  <td class="actions">
                    {k.name !== 'master' && (
                      <>
                        <button
                          type="button"
                          class="small"
                          onClick={() =>
                            act(async () => setSecret((await json<{ key: string }>(`/system/api-keys/${encodeURIComponent(k.name)}/rotate`, { body: {} })).key))
                          }
                        >
                          Rotate
                        </button>
                        <button type="button" class="small danger" onClick={() => setRevoking(k.name)}>
                          Revoke
                        </button>
                      </>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <CreateKey
        onCreated={(s) => {
          setSecret(s);
          void keys.reload();
        }}
      />
      <Confirm
        open={revoking !== null}
        title={`Revoke ${revoking ?? ''}?`}
        confirmLabel="Revoke"
        danger
        onCancel={() => setRevoking(null)}
        onConfirm={() => {
          const n = revoking;
          setRevoking(null);
          if (n)
            void act(async () => {
              await request(`/system/api-keys/${encodeURIComponent(n)}`, { method: 'DELETE' });
            });
        }}
      >
        <p>Requests with this key are refused from the next one on.</p>
      </Confirm>
    </main>
  );
}
