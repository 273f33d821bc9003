/**
 * Which blobs a key with a model allow-list may name: a blob that belongs to a stored model is
 * the model's weights, so naming its digest in `/api/create` `files` (or asking `HEAD
 * /api/blobs/:digest` whether it exists) is using that model. A key may name a blob that belongs
 * to no model, to a model its list admits, or that it uploaded itself in this process (sending
 * the bytes proves it holds them). A key without a list may name any. docs/security.md.
 *
 * @module
 */
import { currentPrincipal } from 'lia/plugin';
import { principalMayUse } from 'lia/utils';
import type { ModelStoreService } from '../store/store.js';

/** `<principal id>|<digest>` of the blobs each key uploaded, the oldest dropped past the bound. */
const uploaded = new Map<string, true>();
const MAX_UPLOADED = 10_000;

function key(digest: string): string | null {
  const id = currentPrincipal()?.id;
  return id === undefined ? null : `${id}|${digest}`;
}

/** Whether the current principal has a model allow-list. */
function restricted(): boolean {
  return Array.isArray(currentPrincipal()?.models);
}

/**
 * The first of `digests` the current principal may not name (see the module comment), null when
 * it may name them all; the stored manifests are read once for all of them.
 */
export async function forbiddenBlob(store: ModelStoreService, digests: readonly string[]): Promise<string | null> {
  if (!restricted()) return null;
  const unproven = digests.filter((d) => {
    const k = key(d);
    return k === null || !uploaded.has(k);
  });
  if (unproven.length === 0) return null;
  const users = await store.modelsUsing(unproven);
  return unproven.find((d) => (users.get(d) ?? []).length > 0 && !users.get(d)!.some((name) => principalMayUse(name))) ?? null;
}

/** Whether the current principal may name blob `digest`. */
export async function mayUseBlob(store: ModelStoreService, digest: string): Promise<boolean> {
  return (await forbiddenBlob(store, [digest])) === null;
}

/** Records that the current principal sent blob `digest`'s bytes. */
export function markUploaded(digest: string): void {
  const k = key(digest);
  if (k === null || !restricted()) return;
  uploaded.delete(k);
  uploaded.set(k, true);
  if (uploaded.size > MAX_UPLOADED) uploaded.delete(uploaded.keys().next().value!);
}
