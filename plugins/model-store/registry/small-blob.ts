/**
 * Small blobs (templates, params, configs, small ONNX files) are fetched into memory, checked and
 * written in one go: no part state and no resume, since there is nothing worth resuming. A
 * dropped connection is retried from the start.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { BlobStore } from '../store/blobs.js';
import { corruptDownload } from '../store/errors.js';
import type { RegistryClient, Repository } from './client.js';
import { bodyError, HttpClient } from './http.js';
import { backoff, retryable } from './retry.js';

/** Blobs up to this size are downloaded this way. */
export const SMALL_BLOB = 1024 * 1024;

/**
 * Downloads blob `digest` (`total` bytes) of `repo` into `blobs`, reporting the bytes received so
 * far through `progress`; at most `retries` retries after a network failure that can pass. Bytes
 * that do not match the digest, or a store that cannot take them, fail at once.
 */
export async function fetchSmallBlob(req: SmallBlobRequest, signal: AbortSignal, progress: (received: number) => void): Promise<void> {
  const bytes = await receive(req, signal, progress);
  const got = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  if (got !== req.digest) throw corruptDownload(req.digest, got);
  await req.blobs.put(bytes); // maps its own file-system failures (see storageError)
}

/** What {@link fetchSmallBlob} needs. */
interface SmallBlobRequest {
  client: RegistryClient;
  repo: Repository;
  digest: string;
  total: number;
  blobs: BlobStore;
  retries: number;
}

/** The blob's bytes, fetched again from the start after a failure worth another attempt. */
async function receive(req: SmallBlobRequest, signal: AbortSignal, progress: (received: number) => void): Promise<Buffer> {
  const { client, repo, digest, total } = req;
  let failures = 0;
  for (;;) {
    try {
      const res = await client.getBlob(repo, digest, undefined, signal);
      await client.expectOk(res, `download ${digest}`);
      return await HttpClient.bytes(res, total, `more than the ${total} bytes of ${digest}`, progress);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (!retryable(err) || ++failures > req.retries) {
        throw bodyError(err, repo.name.host, `download of ${digest}`);
      }
      progress(0);
      await backoff(failures, signal);
    }
  }
}
