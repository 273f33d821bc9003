/**
 * The models page: installed models (size, family, quantisation, capabilities) with details,
 * copy and delete; pull by name with per-layer progress and cancel; import of a GGUF file from
 * disk (`/api/blobs` upload with progress, then `/api/create`); models loaded in memory with their
 * slots, queue, context, engine and device, and unload (LoadedModels.tsx, polled every 2 s). A
 * remote model (an upstream of `backend-upstream` serves it) is marked with its host(s) and
 * offers no copy or delete: it has no local files, and lia.config is where it is managed.
 */
import { useRef, useState } from 'preact/hooks';
import { ApiError, json, ndjson, request } from '../api';
import { getKey } from '../auth';
import { Confirm, ErrorPanel, useLoad, usePoll } from '../common';
import { bytes } from '../format';
import { isRemote, listModels, type ModelInfo, type ShowResponse } from '../models';
import { LoadedModels, PS_POLL_MS, type LoadedModel } from './LoadedModels';

interface PullLine {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

/** The mark of a remote model: a badge and the upstream(s) serving it. */
function RemoteBadge({ host }: { host?: string }) {
  return (
    <span class="remote">
      <span class="badge">remote</span>{' '}
      <span class="muted" data-testid="remote-host">
        {host || 'an upstream'}
      </span>
    </span>
  );
}

/** What stands in for copy and delete on a remote model. */
const REMOTE_NOTE = 'Served by an upstream configured in lia.config: add, rename or remove it there.';

function Progress({ label, value, max }: { label: string; value: number; max: number }) {
  return (
    <div class="progress">
      <span>{label}</span>
      <progress value={value} max={max || 1} aria-label={label} />
      <span class="muted">
        {bytes(value)} / {bytes(max)}
      </span>
    </div>
  );
}

function Pull({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState('');
  const [insecure, setInsecure] = useState(false);
  const [status, setStatus] = useState('');
  const [layers, setLayers] = useState<Record<string, { total: number; completed: number }>>({});
  const [error, setError] = useState<unknown>(null);
  const abort = useRef<AbortController | null>(null);
  const busy = abort.current !== null;

  const pull = async (e: Event) => {
    e.preventDefault();
    if (!name.trim() || abort.current) return;
    const controller = new AbortController();
    abort.current = controller;
    setError(null);
    setLayers({});
    setStatus('starting');
    try {
      await ndjson<PullLine>(
        '/api/pull',
        { model: name.trim(), stream: true, ...(insecure ? { insecure: true } : {}) },
        (line) => {
          setStatus(line.status);
          if (line.digest && line.total) {
            const d = line.digest;
            setLayers((l) => ({ ...l, [d]: { total: line.total ?? 0, completed: line.completed ?? 0 } }));
          }
        },
        controller.signal,
      );
      onDone();
    } catch (err) {
      if ((err as Error).name === 'AbortError') setStatus('cancelled');
      else {
        setStatus('');
        setError(err);
      }
    } finally {
      abort.current = null;
      setName((n) => n);
    }
  };

  return (
    <form class="card" onSubmit={pull} aria-labelledby="pull-title">
      <h2 id="pull-title">Pull a model</h2>
      <label for="pull-name">
        Name (from the configured registry, e.g. <code>llama3.2:1b</code>, or a full <code>host/namespace/model:tag</code>)
      </label>
      <div class="row">
        <input id="pull-name" value={name} onInput={(e) => setName(e.currentTarget.value)} spellcheck={false} />
        {busy ? (
          <button type="button" class="danger" onClick={() => abort.current?.abort()}>
            Cancel
          </button>
        ) : (
          <button type="submit" class="primary" disabled={!name.trim()}>
            Pull
          </button>
        )}
      </div>
      <label class="inline">
        <input type="checkbox" checked={insecure} onChange={(e) => setInsecure(e.currentTarget.checked)} /> the registry serves plain HTTP (insecure)
      </label>
      {status && (
        <p role="status" data-testid="pull-status">
          {status}
        </p>
      )}
      {Object.entries(layers).map(([d, l]) => (
        <Progress key={d} label={d.slice(7, 19)} value={l.completed} max={l.total} />
      ))}
      <ErrorPanel error={error} />
    </form>
  );
}

async function sha256(file: File): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
  return `sha256:${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** Uploads with XMLHttpRequest, the one browser API that reports upload progress. */
function upload(digest: string, file: File, onProgress: (sent: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/blobs/${digest}`);
    xhr.setRequestHeader('Authorization', `Bearer ${getKey() ?? ''}`);
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => (xhr.status < 300 ? resolve() : reject(new ApiError(xhr.status, xhr.responseText || `upload failed (${xhr.status})`)));
    xhr.onerror = () => reject(new ApiError(0, 'the upload was cut off'));
    xhr.send(file);
  });
}

function Import({ onDone }: { onDone: () => void }) {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const [sent, setSent] = useState(0);
  const [status, setStatus] = useState('');
  const [error, setError] = useState<unknown>(null);
  const run = async (e: Event) => {
    e.preventDefault();
    if (!file || !name.trim()) return;
    setError(null);
    try {
      setStatus('computing the checksum');
      const digest = await sha256(file);
      const head = await fetch(`/api/blobs/${digest}`, { method: 'HEAD', headers: { Authorization: `Bearer ${getKey() ?? ''}` } });
      if (head.status !== 200) {
        setStatus('uploading');
        await upload(digest, file, setSent);
      }
      setSent(file.size);
      setStatus('creating the model');
      await json('/api/create', { body: { model: name.trim(), files: { [file.name]: digest }, stream: false } });
      setStatus(`created ${name.trim()}`);
      onDone();
    } catch (err) {
      setStatus('');
      setError(err);
    }
  };
  return (
    <form class="card" onSubmit={run} aria-labelledby="import-title">
      <h2 id="import-title">Import a GGUF file</h2>
      <label for="gguf-file">File</label>
      <input
        id="gguf-file"
        type="file"
        accept=".gguf"
        onChange={(e) => {
          const f = e.currentTarget.files?.[0] ?? null;
          setFile(f);
          if (f && !name)
            setName(
              f.name
                .replace(/\.gguf$/i, '')
                .toLowerCase()
                .replace(/[^a-z0-9._-]+/g, '-'),
            );
        }}
      />
      <label for="gguf-name">Model name</label>
      <input id="gguf-name" value={name} onInput={(e) => setName(e.currentTarget.value)} spellcheck={false} />
      <button type="submit" class="primary" disabled={!file || !name.trim() || (status !== '' && !status.startsWith('created'))}>
        Import
      </button>
      {file && status === 'uploading' && <Progress label="upload" value={sent} max={file.size} />}
      {status && <p role="status">{status}</p>}
      <ErrorPanel error={error} />
    </form>
  );
}

function Details({ model, onClose }: { model: string; onClose: () => void }) {
  const show = useLoad(() => json<ShowResponse>('/api/show', { body: { model } }), [model]);
  return (
    <section class="card" aria-labelledby="details-title">
      <div class="row between">
        <h2 id="details-title">{model}</h2>
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
      <ErrorPanel error={show.error} what="the details" />
      {show.data?.remote_host !== undefined && (
        <div class="notice">
          <p>
            <span class="badge">remote</span> Served by <span data-testid="remote-host">{show.data.remote_host}</span> as <code>{show.data.remote_model}</code>.
          </p>
          <p>
            It has no local files here, so pull, push, copy and delete do not apply: it is managed in the <code>backend-upstream</code> upstreams of{' '}
            <code>lia.config</code>.
          </p>
        </div>
      )}
      {show.data && (
        <>
          <p>Capabilities: {(show.data.capabilities ?? []).join(', ') || 'none recorded'}</p>
          {show.data.parameters && (
            <>
              <h3>Parameters</h3>
              <pre>{show.data.parameters}</pre>
            </>
          )}
          {show.data.template && (
            <>
              <h3>Template</h3>
              <pre>{show.data.template}</pre>
            </>
          )}
          {show.data.system && (
            <>
              <h3>System prompt</h3>
              <pre>{show.data.system}</pre>
            </>
          )}
          {show.data.license && (
            <details>
              <summary>License</summary>
              <pre>{show.data.license}</pre>
            </details>
          )}
          {show.data.modelfile && (
            <details>
              <summary>Modelfile</summary>
              <pre>{show.data.modelfile}</pre>
            </details>
          )}
        </>
      )}
    </section>
  );
}

export function Models() {
  const models = useLoad(listModels);
  const ps = useLoad(() => json<{ models: LoadedModel[] }>('/api/ps'));
  usePoll(ps.reload, PS_POLL_MS);
  const [details, setDetails] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<ModelInfo | null>(null);
  const [copying, setCopying] = useState<{ source: string; destination: string } | null>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const reloadAll = () => {
    void models.reload();
    void ps.reload();
  };

  const act = async (fn: () => Promise<unknown>) => {
    setActionError(null);
    try {
      await fn();
    } catch (err) {
      setActionError(err);
    }
    reloadAll();
  };

  return (
    <main id="main" class="page">
      <h1>Models</h1>
      <ErrorPanel error={models.error} what="the models" />
      <ErrorPanel error={actionError} />
      {models.data && (
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Installed models</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Size</th>
                <th scope="col">Family</th>
                <th scope="col">Parameters</th>
                <th scope="col">Quantisation</th>
                <th scope="col">Capabilities</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {models.data.length === 0 && (
                <tr>
                  <td colSpan={7}>No models installed yet.</td>
                </tr>
              )}
              {models.data.map((m) => {
                const remote = isRemote(m);
                return (
                  <tr key={m.name} data-model={m.name}>
                    <th scope="row">
                      {m.name}
                      {m.details.broken && <span class="error-text"> (broken: {m.details.broken})</span>}
                      {remote && (
                        <>
                          {' '}
                          <RemoteBadge host={m.remote_host} />
                        </>
                      )}
                    </th>
                    <td>{remote ? '–' : bytes(m.size)}</td>
                    <td>{m.details.family || '–'}</td>
                    <td>{m.details.parameter_size || '–'}</td>
                    <td>{m.details.quantization_level || '–'}</td>
                    <td>{m.capabilities.join(', ') || '–'}</td>
                    <td class="actions">
                      <button type="button" class="small" aria-label={`Details of ${m.name}`} onClick={() => setDetails(m.name)}>
                        Details
                      </button>
                      {remote ? (
                        <span class="remote-note muted">{REMOTE_NOTE}</span>
                      ) : (
                        <>
                          <button
                            type="button"
                            class="small"
                            aria-label={`Copy ${m.name}`}
                            onClick={() => setCopying({ source: m.name, destination: `${m.name.split(':')[0]}-copy` })}
                          >
                            Copy
                          </button>
                          <button type="button" class="small danger" aria-label={`Delete ${m.name}`} onClick={() => setDeleting(m)}>
                            Delete
                          </button>
                        </>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {details && <Details model={details} onClose={() => setDetails(null)} />}

      <LoadedModels ps={ps} onUnload={(name) => act(() => json('/api/generate', { body: { model: name, keep_alive: 0 } }))} onRefresh={reloadAll} />

      <div class="grid2">
        <Pull onDone={reloadAll} />
        <Import onDone={reloadAll} />
      </div>

      <Confirm
        open={deleting !== null}
        title={`Delete ${deleting?.name ?? ''}?`}
        confirmLabel="Delete"
        danger
        onCancel={() => setDeleting(null)}
        onConfirm={() => {
          const m = deleting;
          setDeleting(null);
          if (m) void act(() => request('/api/delete', { method: 'DELETE', body: { model: m.name } }));
        }}
      >
        <p>The model's name is removed; its files are freed when no other model uses them.</p>
      </Confirm>
      <Confirm
        open={copying !== null}
        title={`Copy ${copying?.source ?? ''}`}
        confirmLabel="Copy"
        onCancel={() => setCopying(null)}
        onConfirm={() => {
          const c = copying;
          setCopying(null);
          if (c) void act(() => request('/api/copy', { body: c }));
        }}
      >
        <label for="copy-dest">New name</label>
        <input id="copy-dest" value={copying?.destination ?? ''} onInput={(e) => setCopying((c) => (c ? { ...c, destination: e.currentTarget.value } : c))} />
      </Confirm>
    </main>
  );
}
