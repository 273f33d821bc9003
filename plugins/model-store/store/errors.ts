/**
 * Error codes of the model store beyond core's registry.
 *
 * @module
 */
import { defineError, Errors } from 'lia/plugin';

/** The disk under the store is full (507 Insufficient Storage). */
export const insufficientStorage = defineError('LIA_ERR_INSUFFICIENT_STORAGE', 507, 'The disk that holds the model store is full.');

/** A downloaded blob whose bytes do not hash to its digest (nothing of it is kept). */
export function corruptDownload(want: string, got: string): Error {
  return Errors.badGateway(`digest mismatch, file must be downloaded again: want ${want}, got ${got}`);
}

/** Maps file-system failures (a Node system error's `E…` code) to clear errors; anything else passes through unchanged. */
export function storageError(err: unknown, what: string): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT') return insufficientStorage(`no space left on the device while ${what}`, { cause: err });
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') return Errors.internal(`the model store is not writable while ${what}`, { cause: err });
  // Any other system error (EISDIR, EIO, ...) says what failed instead of a bare 500.
  if (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code))
    return Errors.internal(`the model store failed while ${what}: ${(err as Error).message}`, { cause: err });
  return err;
}
