/**
 * The models page's "Loaded in memory" card: each loaded model's size and where it runs, its slots
 * in use out of its slots, the requests queued for one, its context per slot, engine and device,
 * with unload. The page polls `/api/ps` (every {@link PS_POLL_MS} while the tab is visible), so a
 * queue building up shows without a refresh.
 */
import { ErrorPanel, type Loaded } from '../common';
import { bytes } from '../format';
import { isRemote } from '../models';

/** How often the page asks `/api/ps` while it is visible (ms). */
export const PS_POLL_MS = 2000;

/** A model as `/api/ps` lists it (the fields this card shows). */
export interface LoadedModel {
  name: string;
  size: number;
  size_vram?: number;
  device?: string;
  engine?: string;
  expires_at?: string;
  context_length?: number;
  parallel?: number;
  running?: number;
  queued?: number;
  details?: { format?: string } | null;
}

/** A count or a dash when the server did not say (an older appliance). */
const count = (n: number | undefined): string => (n === undefined ? '–' : n.toLocaleString());

function Facts({ m }: { m: LoadedModel }) {
  return (
    <dl class="facts compact">
      <div>
        <dt>Slots in use</dt>
        <dd data-testid="slots">
          {count(m.running)} / {count(m.parallel)}
        </dd>
      </div>
      <div>
        <dt>Queued</dt>
        <dd data-testid="queued">{count(m.queued)}</dd>
      </div>
      <div>
        <dt>Context per slot</dt>
        <dd data-testid="context">{m.context_length ? `${m.context_length.toLocaleString()} tokens` : '–'}</dd>
      </div>
      <div>
        <dt>Engine</dt>
        <dd data-testid="engine">{m.engine || '–'}</dd>
      </div>
      <div>
        <dt>Device</dt>
        <dd data-testid="device">{m.device || '–'}</dd>
      </div>
    </dl>
  );
}

export function LoadedModels({ ps, onUnload, onRefresh }: { ps: Loaded<{ models: LoadedModel[] }>; onUnload: (name: string) => void; onRefresh: () => void }) {
  return (
    <section class="card" aria-labelledby="loaded-title">
      <h2 id="loaded-title">Loaded in memory</h2>
      <ErrorPanel error={ps.error} what="the loaded models" />
      {ps.data && ps.data.models.length === 0 && <p class="muted">No model is loaded; the first request to a model loads it.</p>}
      {ps.data && ps.data.models.length > 0 && (
        <ul class="plain">
          {ps.data.models.map((m) => (
            <li key={m.name} data-model={m.name}>
              <div class="row between wrap">
                <span>
                  <strong>{m.name}</strong> · {isRemote(m) ? 'remote' : bytes(m.size)}
                  {m.size_vram ? ` (${bytes(m.size_vram)} on ${m.device && m.device !== 'gpu' ? m.device : 'GPU'})` : ''}
                  {m.expires_at ? ` · unloads ${new Date(m.expires_at).toLocaleTimeString()}` : ''}
                </span>
                <button type="button" class="small" aria-label={`Unload ${m.name}`} onClick={() => onUnload(m.name)}>
                  Unload
                </button>
              </div>
              <Facts m={m} />
            </li>
          ))}
        </ul>
      )}
      <button type="button" class="small" onClick={onRefresh}>
        Refresh
      </button>
    </section>
  );
}
