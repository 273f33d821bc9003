/**
 * The model store: finds, lists, resolves, copies and deletes models in an Ollama-layout folder.
 * It implements the {@link ModelStore} contract the engine consumes and the operations behind
 * the model routes; pulling, pushing and creating build on it.
 *
 * @module
 */
import { existsSync, mkdirSync, statSync, type Stats } from 'node:fs';
import { mkdir, readdir, readFile, rm, rmdir, utimes } from 'node:fs/promises';
import path from 'node:path';
import { Errors } from 'lia/plugin';
import type { ModelSource } from '../public.js';
import type { BeforeDeleteHook, CatalogEntry, ModelStore, ResolvedModel } from '../public.js';
import { writeFileAtomic } from 'lia/utils';
import { BlobStore } from './blobs.js';
import { Describer, type Formats, type ModelView } from './describe.js';
import { storageError } from './errors.js';
import { ADAPTER_MEDIA_TYPE, PROJECTOR_MEDIA_TYPE, readManifest, TITLE_ANNOTATION, walkManifests, type StoredManifest } from './manifest.js';
import { displayName, fullName, parseName, sameName, tryParseName, type ModelName } from './names.js';
import { materialiseFolder } from './layout.js';
import { findRemote, remoteEntry, remoteModels, remoteRefusal, remoteResolved, type RemoteView } from './remote.js';
import { StorePaths } from './paths.js';

/** A manifest file's identity (inode, size, mtime), or null when it is missing or unreadable. */
function manifestStamp(file: string): string | null {
  let st: Stats | undefined;
  try {
    st = statSync(file, { throwIfNoEntry: false });
  } catch {
    st = undefined; // unreadable: resolved the slow way, which reports the problem
  }
  return st ? `${st.ino}:${st.size}:${st.mtimeMs}` : null;
}

/** The store of one models folder; the value of the `models` hook. */
function catalogEntry(m: StoredManifest): CatalogEntry {
  const entry: CatalogEntry = { name: displayName(m.name), namespace: m.name.namespace, digest: m.digest, sizeBytes: m.size, modifiedAt: m.modifiedAt };
  const layers = m.manifest.layers;
  if (layers.some((l) => l.mediaType === ADAPTER_MEDIA_TYPE)) entry.parent = layers.find((l) => l.from)?.from ?? '';
  return entry;
}

export class ModelStoreService implements ModelStore {
  readonly paths: StorePaths;
  readonly blobs: BlobStore;
  readonly describer: Describer;
  /** The formats the enabled backends serve (the `backends` hook). */
  readonly formats: Formats;
  readonly #beforeDelete: BeforeDeleteHook[] = [];
  /** Resolved models by manifest file, valid while the file's identity (inode, size, mtime) holds. */
  readonly #resolved = new Map<string, { stamp: string; model: ResolvedModel }>();
  /** The manifest file of each name asked (as spelled), for {@link resolve}'s short way. */
  readonly #fileOf = new Map<string, string>();

  /** The sources of remote models (`hooks.modelSources`); none by default. */
  readonly #sources: () => readonly ModelSource[];
  /**
   * The stored models' full names in lower case: filled by every walk of the manifests, kept up to
   * date by this store's own writes and deletes. It lets the synchronous lookups of remote models
   * (see {@link remotes}) know which names a local model holds.
   */
  readonly #localNames = new Set<string>();

  constructor(root: string, formats: Formats, sources: () => readonly ModelSource[] = () => []) {
    this.#sources = sources;
    this.paths = new StorePaths(root);
    this.blobs = new BlobStore(this.paths);
    this.formats = formats;
    this.describer = new Describer(this.blobs, formats);
  }

  /** Creates the folders and removes leftovers of interrupted uploads. */
  async init(): Promise<void> {
    await mkdir(this.paths.manifests, { recursive: true });
    await mkdir(this.paths.blobs, { recursive: true });
    await this.blobs.pruneTemp();
    await this.manifests(); // fills the local names
  }

  /** Every stored manifest, newest first. */
  async manifests(): Promise<StoredManifest[]> {
    const out: StoredManifest[] = [];
    for await (const { file, parts } of walkManifests(this.paths.manifests)) {
      const parsed = tryParseName(`${parts[0]}/${parts[1]}/${parts[2]}:${parts[3]}`);
      if ('problem' in parsed) continue;
      const stored = await readManifest(file, parsed.name);
      if (stored) out.push(stored);
    }
    this.#localNames.clear();
    for (const m of out) this.#localNames.add(fullName(m.name).toLowerCase());
    return out.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime());
  }

  async catalog(): Promise<CatalogEntry[]> {
    const remote = this.remotes();
    return [...remote.map(remoteEntry), ...(await this.localManifests(remote)).map(catalogEntry)];
  }

  async entry(raw: string): Promise<CatalogEntry> {
    const remote = this.remote(raw);
    return remote ? remoteEntry(remote) : catalogEntry(await this.get(raw));
  }

  /**
   * Every remote model (see remote.ts) whose name no local model holds. A local model is never
   * shadowed: on a name collision it keeps the name and the remote model is left out (the plugin
   * that contributes it warns; the operator gives it another name in its configuration).
   */
  remotes(): RemoteView[] {
    return remoteModels(this.#sources()).filter((m) => !this.#isLocal(m.parsed));
  }

  /**
   * The remote model a client-supplied name denotes, if any and if no local model holds the name
   * (an invalid name is a 400).
   */
  remote(raw: string, field = 'model'): RemoteView | undefined {
    const name = parseName(raw, field);
    const remote = findRemote(this.#sources(), name);
    return remote && !this.#isLocal(name) ? remote : undefined;
  }

  /**
   * Whether a local model holds a name (case-insensitively, as names compare). Synchronous: the
   * names known from the last walk, or else the manifest file of that exact spelling, which covers
   * a model another process stored since.
   */
  #isLocal(name: ModelName): boolean {
    if (this.#localNames.has(fullName(name).toLowerCase())) return true;
    try {
      return existsSync(this.paths.manifest(name));
    } catch {
      return false; // a name that cannot be a path inside the store
    }
  }

  /** Throws the 400 for `action` when `raw` names a remote model. */
  refuseRemote(raw: string, action: Parameters<typeof remoteRefusal>[1], field = 'model'): void {
    const remote = this.remote(raw, field);
    if (remote) throw remoteRefusal(remote, action);
  }

  /**
   * Every stored manifest: local models are never hidden. For a listing of both kinds, it also
   * takes out of `remote` (the caller's list from {@link remotes}) a remote model whose name this
   * walk found stored, so that a model stored by another process since the last walk does not
   * appear twice.
   */
  async localManifests(remote: RemoteView[] = []): Promise<StoredManifest[]> {
    const all = await this.manifests();
    for (let i = remote.length - 1; i >= 0; i--) if (this.#isLocal(remote[i]!.parsed)) remote.splice(i, 1);
    return all;
  }

  /** The stored manifest of a name (exact path first, then a case-insensitive match), or null. */
  async find(name: ModelName): Promise<StoredManifest | null> {
    const exact = await readManifest(this.paths.manifest(name), name);
    if (exact) return exact;
    for (const m of await this.manifests()) if (sameName(m.name, name)) return m;
    return null;
  }

  /** Like {@link find} but a missing model is a 404 naming it. */
  async get(raw: string, field = 'model'): Promise<StoredManifest> {
    const name = parseName(raw, field);
    const stored = await this.find(name);
    if (!stored) throw Errors.modelNotFound(`model '${displayName(name)}' not found`);
    return stored;
  }

  /** The full view of a named model; `verbose` asks its format's handler for the full metadata. */
  async view(raw: string, options: { verbose?: boolean } = {}): Promise<ModelView> {
    return this.describer.view(await this.get(raw), options);
  }

  /**
   * The model behind a name, as the engine needs it on every request. Blobs are content-addressed,
   * so while a manifest file is unchanged its answer is too: it is kept per manifest file and
   * checked with one `stat`, instead of reading the manifest and its small layers each time. The
   * stat is synchronous: a manifest's inode is in the kernel's cache, so it takes microseconds,
   * where the thread-pool round trip of an asynchronous one showed in every request's time to
   * first token (bench/results/2026-11-engine.md).
   *
   * A name asked before goes straight to its manifest file: while that file is there, a local
   * model holds the name, so no remote model can, and parsing the name again and asking the
   * remote sources would give the same answer.
   */
  async resolve(raw: string): Promise<ResolvedModel> {
    const known = this.#fileOf.get(raw);
    if (known !== undefined) {
      const stamp = manifestStamp(known);
      const hit = this.#resolved.get(known);
      if (stamp !== null && hit?.stamp === stamp) return hit.model;
    }
    const name = parseName(raw, 'model');
    const remote = findRemote(this.#sources(), name);
    if (remote && !this.#isLocal(name)) return remoteResolved(remote);
    const file = this.paths.manifest(name);
    const stamp = manifestStamp(file);
    const hit = this.#resolved.get(file);
    if (stamp !== null && hit?.stamp === stamp) {
      this.#remember(raw, file);
      return hit.model;
    }
    const model = await this.toResolved(await this.view(raw));
    if (stamp !== null) {
      if (this.#resolved.size >= 256) this.#resolved.clear();
      this.#resolved.set(file, { stamp, model });
      this.#remember(raw, file);
    }
    return model;
  }

  /** Notes the manifest file a name asked resolved to (see {@link resolve}). */
  #remember(raw: string, file: string): void {
    if (this.#fileOf.size >= 256) this.#fileOf.clear();
    this.#fileOf.set(raw, file);
  }

  async list(): Promise<ResolvedModel[]> {
    const remote = this.remotes();
    const out: ResolvedModel[] = remote.map(remoteResolved);
    for (const m of await this.localManifests(remote)) {
      try {
        out.push(await this.toResolved(await this.describer.view(m)));
      } catch {
        // A model whose blobs are missing or unreadable is skipped, not fatal for the others.
      }
    }
    return out;
  }

  onBeforeDelete(hook: BeforeDeleteHook): void {
    this.#beforeDelete.push(hook);
  }

  /**
   * Turns a view into the contract's {@link ResolvedModel}: the weights blob, or for a format whose
   * backend loads a folder, the files laid out as one (on demand, once per manifest).
   */
  async toResolved(view: ModelView): Promise<ResolvedModel> {
    const { stored } = view;
    if (!view.weights[0]) throw Errors.badRequest(`model '${displayName(stored.name)}' has no weights layer`);
    const modelPath =
      view.handler?.layout === 'folder'
        ? await materialiseFolder(this.paths.layout(view.format, stored.digest), view.weights, (d) => this.blobs.path(d))
        : this.blobs.path(view.weights[0].digest);
    const projector = stored.manifest.layers.find((l) => l.mediaType === PROJECTOR_MEDIA_TYPE);
    const adapters = stored.manifest.layers.filter((l) => l.mediaType === ADAPTER_MEDIA_TYPE);
    return {
      name: displayName(stored.name),
      digest: stored.digest,
      format: view.format,
      modelPath,
      ...(projector ? { projectorPath: this.blobs.path(projector.digest) } : {}),
      ...(adapters.length > 0
        ? {
            adapters: adapters.map((l) => ({
              path: this.blobs.path(l.digest),
              digest: l.digest,
              ...(l.annotations?.[TITLE_ANNOTATION] ? { name: l.annotations[TITLE_ANNOTATION] } : {}),
            })),
          }
        : {}),
      sizeBytes: view.weights.reduce((n, l) => n + l.size, 0) + (projector?.size ?? 0) + adapters.reduce((n, l) => n + l.size, 0),
      template: view.template,
      system: view.system,
      parameters: view.parameters,
      messages: view.messages,
      capabilities: view.capabilities,
      details: view.details,
    };
  }

  /**
   * Writes manifest bytes for a name atomically (the final step of pull, create and copy) and
   * returns the file. Durable (fsynced, with its folder) unless `durable` is false, for a caller
   * that flushes it later together with the blobs it names (a pull: see registry/pull.ts).
   */
  async writeManifest(name: ModelName, bytes: Buffer, { durable = true }: { durable?: boolean } = {}): Promise<string> {
    const file = this.paths.manifest(name);
    try {
      mkdirSync(path.dirname(file), { recursive: true }); // one or two system calls, mostly none to make
      await writeFileAtomic(file, bytes, { mode: 0o644, durable });
    } catch (err) {
      throw storageError(err, 'writing the manifest');
    }
    this.#localNames.add(fullName(name).toLowerCase());
    return file;
  }

  /** Makes `destination` an alias of `source` (the manifest bytes are copied as they are). */
  async copy(source: string, destination: string): Promise<void> {
    this.refuseRemote(source, 'copy', 'source');
    this.refuseRemote(destination, 'copy', 'destination');
    const src = await this.get(source, 'source');
    const dst = parseName(destination, 'destination');
    const bytes = await readFile(src.file);
    await this.writeManifest(dst, bytes);
    const now = new Date();
    await utimes(this.paths.manifest(dst), now, now).catch(() => undefined);
  }

  /**
   * Deletes a model: the hooks run first (the engine unloads it), then the manifest goes, empty
   * folders are pruned and every blob no other manifest references is removed.
   */
  async delete(raw: string): Promise<void> {
    this.refuseRemote(raw, 'delete');
    const stored = await this.get(raw);
    const model = { name: displayName(stored.name), digest: stored.digest };
    for (const hook of this.#beforeDelete) await hook(model);
    await rm(stored.file, { force: true });
    this.#localNames.delete(fullName(stored.name).toLowerCase());
    await this.#pruneDirs(path.dirname(stored.file));
    await this.collectGarbage(stored);
  }

  /** For each of `digests`, the full names of the stored models whose manifest uses it (as config or layer). */
  async modelsUsing(digests: readonly string[]): Promise<Map<string, string[]>> {
    const users = new Map(digests.map((d) => [d, [] as string[]]));
    for (const m of await this.manifests()) {
      for (const d of new Set([m.manifest.config.digest, ...m.manifest.layers.map((l) => l.digest)])) users.get(d)?.push(fullName(m.name));
    }
    return users;
  }

  /** Removes the blobs of `removed` that no remaining manifest uses (and its laid-out folder). */
  async collectGarbage(removed: StoredManifest): Promise<void> {
    const remaining = await this.manifests();
    const used = new Set<string>();
    for (const m of remaining) {
      used.add(m.manifest.config.digest);
      for (const l of m.manifest.layers) used.add(l.digest);
    }
    const candidates = [removed.manifest.config, ...removed.manifest.layers].map((l) => l.digest);
    for (const digest of new Set(candidates)) {
      if (!used.has(digest) && !this.blobs.isPinned(digest)) await this.blobs.remove(digest);
    }
    if (!remaining.some((m) => m.digest === removed.digest)) {
      for (const format of await readdir(this.paths.layouts).catch(() => [] as string[])) {
        await rm(path.join(this.paths.layouts, format, removed.digest), { recursive: true, force: true });
      }
    }
  }

  /** Removes empty folders from `dir` up to (not including) the manifests root. */
  async #pruneDirs(dir: string): Promise<void> {
    let current = dir;
    while (current.startsWith(this.paths.manifests + path.sep)) {
      try {
        await rmdir(current);
      } catch {
        return;
      }
      current = path.dirname(current);
    }
  }
}
