/**
 * Remote models: the ones `hooks.modelSources` contributes (upstream engines, no local files). The
 * store lists and resolves them beside its own, by the same name rules, and refuses the operations
 * that need files (pull, push, copy, delete) with a 400 that says what such a model is. The store
 * leaves out a remote model whose name a local model holds: the local one keeps it (store.ts).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { ModelSource } from '../public.js';
import type { CatalogEntry, RemoteModel, ResolvedModel } from '../public.js';
import { displayName, fullName, tryParseName, type ModelName } from './names.js';

/** A remote model under its normalised name (`big` → `big:latest`). */
export interface RemoteView extends RemoteModel {
  parsed: ModelName;
}

/** The remote models of every source, normalised; a name that does not parse is left out. */
export function remoteModels(sources: readonly ModelSource[]): RemoteView[] {
  const out: RemoteView[] = [];
  for (const source of sources) {
    for (const m of source.models()) {
      const parsed = tryParseName(m.name);
      if ('problem' in parsed) continue;
      out.push({ ...m, name: displayName(parsed.name), parsed: parsed.name });
    }
  }
  return out;
}

/** The remote model a parsed name denotes, compared as Ollama compares names (case-insensitively). */
export function findRemote(sources: readonly ModelSource[], name: ModelName): RemoteView | undefined {
  const key = fullName(name).toLowerCase();
  return remoteModels(sources).find((m) => fullName(m.parsed).toLowerCase() === key);
}

export function remoteEntry(m: RemoteView): CatalogEntry {
  return { name: m.name, namespace: m.parsed.namespace, digest: m.digest, sizeBytes: 0, modifiedAt: m.modifiedAt, remote: m.remote };
}

export function remoteResolved(m: RemoteView): ResolvedModel {
  return {
    name: m.name,
    digest: m.digest,
    format: m.format,
    modelPath: '',
    sizeBytes: 0,
    parameters: m.parameters ?? {},
    messages: [],
    capabilities: m.capabilities,
    details: m.details,
    remote: m.remote,
  };
}

/** The 400 for an operation that needs local files, asked of a remote model. */
export function remoteRefusal(m: RemoteView, action: 'pull' | 'push' | 'copy' | 'delete' | 'create'): Error {
  const what =
    action === 'pull' || action === 'push'
      ? `it is not ${action === 'pull' ? 'pulled' : 'pushed'}: the upstream serves it`
      : action === 'copy'
        ? 'it has no local files to copy; give it another name in the upstream configuration instead'
        : action === 'delete'
          ? 'it has no local files to delete; remove it from the upstream configuration instead'
          : 'its name is taken by the upstream configuration';
  return Errors.badRequest(`"${m.name}" is a remote model served by ${m.remote.host} (as "${m.remote.model}"); ${what}`);
}
